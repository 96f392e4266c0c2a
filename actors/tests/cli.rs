//! The binary against docs/CONTRACT.md: exit codes, one-line errors, catalog and search output.

use std::process::Command;

use serde_json::Value;

fn toolslot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolslot"))
}

#[test]
fn catalog_prints_provider_shapes() {
    for (format, name_path) in [("anthropic", "/0/name"), ("openai", "/0/function/name")] {
        let out = toolslot()
            .args(["catalog", "--format", format])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v.pointer(name_path).is_some_and(Value::is_string),
            "{format}: {v}"
        );
    }
}

#[test]
fn bad_config_is_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[approval]\nmood = \"ask\"\n").unwrap();
    let out = toolslot()
        .args(["catalog", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("mood") && err.contains("bad.toml"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn unknown_catalog_format_is_exit_2() {
    let out = toolslot()
        .args(["catalog", "--format", "yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("yaml"));
}
