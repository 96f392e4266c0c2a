//! Runs the Python package's tests (pytest, in `.test-deps/venv`) against the extension module
//! this build made, so the README's `cargo test` runs them too; any pytest failure fails it.
//!
//! The module is not built a second time: `cargo test` has built `lib_native.so` for this
//! crate already (beside this test in `deps/`, the library being an rlib too), and it is linked into the package folder as `_native.abi3.so` (what
//! `maturin develop` would copy there). pytest imports the package from the checkout.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The folder of this build's artifacts (`target/debug`): this test runs from its `deps/`.
fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// The `toolslot` binary the Python tests compare against. A whole `cargo test` has built it
/// beside this crate's module before any test runs; run for this crate alone on a fresh
/// checkout, it is built here. (Building it here every time would build its dependencies a
/// second time in CI: without the tests' dev-dependencies their features differ.) After a
/// change to the actors crate, run `cargo build -p toolslot-actors` before this crate's tests
/// alone, or the comparison is against the old binary.
fn toolslot_bin() -> PathBuf {
    let bin = artifacts().join("toolslot");
    if !bin.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "toolslot-actors", "--bin", "toolslot"])
            .current_dir(repo())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the toolslot binary failed");
    }
    bin
}

#[test]
fn pytest_passes() {
    let python = repo().join(".test-deps/venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-test-deps.sh first (it installs pytest and the frameworks the adapters are tested against)",
        python.display()
    );
    // The one this `cargo test` built, beside this test binary; `target/<profile>/lib_native.so`
    // is only refreshed by `cargo build` and may be older than the code under test.
    let module = artifacts().join("deps/lib_native.so");
    assert!(module.exists(), "{} was not built", module.display());
    let link = repo().join("python/toolslot/_native.abi3.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&module, &link).expect("linking the extension module into python/toolslot");
    let out = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "python/tests"])
        .current_dir(repo())
        .env("PYTHONPATH", repo().join("python"))
        .env("PYTEST_TOOLSLOT_BIN", toolslot_bin())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("pytest runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "pytest failed:\n{text}");
}
