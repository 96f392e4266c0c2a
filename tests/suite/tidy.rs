//! Architecture checks that read the source as text, as rust-analyzer's tidy tests do.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_slot_never_imports_actix() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    assert!(files.len() > 10, "found the slot's sources");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            assert!(
                !code.contains("actix") || code.starts_with("//"),
                "{}:{}: the slot must not use actix: {line}",
                file.display(),
                n + 1
            );
            assert!(
                !code.contains("tokio::spawn") && !code.contains("task::spawn("),
                "{}:{}: the slot must not spawn tasks: {line}",
                file.display(),
                n + 1
            );
        }
    }
}

#[test]
fn the_slot_has_no_actor_dependencies() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table in the root Cargo.toml");
    for line in deps.lines() {
        assert!(
            !line.contains("actix") && !line.contains("toolslot-actors"),
            "root [dependencies] holds `{line}`"
        );
    }
}

#[test]
fn no_should_panic_or_ignore() {
    let mut files = Vec::new();
    for dir in ["src", "actors/src", "tests"] {
        rust_files(&root().join(dir), &mut files);
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for attr in ["#[should_panic", "#[ignore"] {
            let needle = attr.to_string();
            // This file names the attributes in order to forbid them.
            if file.ends_with("tidy.rs") {
                continue;
            }
            assert!(!text.contains(&needle), "{} uses {attr}", file.display());
        }
    }
}

#[test]
fn every_config_key_has_a_reason() {
    // Each key line in default.toml is preceded by a comment line (or another key of the same
    // commented group).
    let text = std::fs::read_to_string(root().join("config/default.toml")).unwrap();
    let mut prev_comment = false;
    let mut prev_key = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            prev_comment = true;
            continue;
        }
        if t.is_empty() || t.starts_with('[') {
            prev_comment = false;
            prev_key = false;
            continue;
        }
        if t.contains('=') {
            assert!(prev_comment || prev_key, "config key without a reason: {t}");
            prev_key = true;
            prev_comment = false;
        }
    }
}

#[test]
fn nothing_reads_outside_the_repository() {
    // A fresh clone must build and pass alone: no source, bench, script or example may name a
    // folder beside the checkout (the recorded streams live in tests/data/recorded).
    let mut files = Vec::new();
    for dir in ["src", "actors", "tests", "benches", "scripts", "examples", "fuzz", ".ci"] {
        all_files(&root().join(dir), &mut files);
    }
    let outside = ["../shared", "../../shared", "../.library"];
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        // This file names the forbidden paths in order to forbid them.
        if file.ends_with("tidy.rs") {
            continue;
        }
        for needle in outside {
            assert!(
                !text.contains(needle),
                "{} names `{needle}`, outside the repository",
                file.display()
            );
        }
    }
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "node_modules" || name == ".test-deps" {
            continue;
        }
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push(path);
        }
    }
}
