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

/// The slot's floors, lowest first: a module may use only modules on lower floors (never one
/// on its own floor or above), so the layers docs/ARCHITECTURE.md describes are the layers the
/// code has. Written once, here; ARCHITECTURE.md states the same order.
const FLOORS: &[&[&str]] = &[
    // Ground: configuration and pure helpers every layer uses.
    &["config", "canonical", "tool_name", "schema"],
    &["notice", "child_env", "child_group"],
    // The ledger of decisions: plain file IO over canonical JSON.
    &["ledger"],
    // Plain data the contract serializes.
    &["event"],
    // The trait layer: what a tool is, and the services it may ask its host for.
    &["tool"],
    // Input: what the model sent, made usable.
    &["forgery", "repair", "shell"],
    // What a team allows, asks about and denies, read against the input as the shell reads it.
    &["stream", "policy"],
    &["registry"],
    // The economics of results (and what a language server adds to them) and the OS sandbox
    // programs run in; then decisions about calls, which may read what results kept (handles).
    &["output", "lsp", "sandbox"],
    &["plan"],
    // Tools of each source.
    &["builtin", "mcp", "extension", "remote", "hooks"],
    // What holds a session together.
    &["session", "observe", "project_policy"],
];

/// The floor of a top-level slot module.
fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// The top-level module a file of `src/` belongs to (`src/plan/call.rs` → `plan`).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root().join("src")).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_string())
}

/// Every `crate::<module>` a line names outside comments.
fn crate_paths(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

#[test]
fn the_slot_imports_only_downward() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut upward = Vec::new();
    for file in &files {
        let Some(module) = module_of(file) else { continue };
        // Tests may use anything: they sit above the code they test.
        if module == "lib" || file.to_string_lossy().ends_with("_tests.rs") {
            continue;
        }
        let floor = floor_of(&module).unwrap_or_else(|| panic!("src/{module} has no floor in tidy.rs FLOORS: give it one"));
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let next = lines.get(n + 1).map_or("", |l| l.trim());
            if line.trim() == "#[cfg(test)]" && (next.starts_with("mod ") || next.starts_with("#[path")) {
                break;
            }
            for target in crate_paths(line) {
                if target == module {
                    continue;
                }
                let Some(target_floor) = floor_of(&target) else {
                    upward.push(format!("{}:{}: `crate::{target}` has no floor in FLOORS", file.display(), n + 1));
                    continue;
                };
                if target_floor >= floor {
                    upward.push(format!(
                        "{}:{}: `{module}` (floor {floor}) uses `crate::{target}` (floor {target_floor}): {}",
                        file.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports that run upward or sideways:\n{}", upward.join("\n"));
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
