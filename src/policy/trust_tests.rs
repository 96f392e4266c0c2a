use std::path::Path;

use super::*;
use crate::config::Config;

fn key(path: &str) -> TrustKey {
    TrustKey::from_canonical(Path::new(path)).unwrap()
}

fn config(trust_file: &str) -> PolicyConfig {
    let mut config = Config::builtin().policy;
    config.trust_file = trust_file.to_string();
    config
}

#[test]
fn a_file_is_trusted_only_with_the_bytes_that_were_trusted() {
    let mut store = TrustStore::default();
    let file = key("/w/app/.toolslot/policy.toml");
    let text = b"[[policy.rules]]\ntool = \"write_file\"\ndecision = \"allow\"\n";
    assert_eq!(store.state(&file, &sha256_hex(text)), TrustState::Unknown);
    store.trust(&file, sha256_hex(text));
    assert_eq!(store.state(&file, &sha256_hex(text)), TrustState::Trusted);
    // One byte more is another file.
    let mut changed = text.to_vec();
    changed.push(b'\n');
    assert_eq!(store.state(&file, &sha256_hex(&changed)), TrustState::Changed);
    // Another path with the same bytes is not trusted.
    assert_eq!(
        store.state(&key("/w/other/.toolslot/policy.toml"), &sha256_hex(text)),
        TrustState::Unknown
    );
    assert!(store.revoke(&file));
    assert!(!store.revoke(&file));
    assert_eq!(store.state(&file, &sha256_hex(text)), TrustState::Unknown);
}

#[test]
fn the_store_round_trips_through_its_text() {
    let mut store = TrustStore::default();
    // A path a bare TOML key cannot hold: spaces, quotes, dots, unicode.
    let odd = key("/w/my \"app\".v2/é/.toolslot/policy.toml");
    store.trust(&odd, sha256_hex(b"a"));
    store.trust(&key("/w/b/.toolslot/policy.toml"), sha256_hex(b"b"));
    let text = store.to_toml();
    assert!(text.starts_with("# "), "{text}");
    let back = TrustStore::parse(&text, Path::new("t.toml")).unwrap();
    assert_eq!(back, store);
    assert_eq!(back.state(&odd, &sha256_hex(b"a")), TrustState::Trusted);
}

#[test]
fn a_store_that_is_not_one_is_refused_in_one_line() {
    for (text, want) in [
        ("[trusted]\n\"/a\" = \"short\"\n", "not a SHA-256"),
        ("[trusted]\n\"/a\" = 3\n", "invalid type"),
        ("trusted = 1\n", "invalid type"),
        ("[other]\n", "unknown field"),
        ("not toml [", ""),
    ] {
        let err = TrustStore::parse(text, Path::new("/h/trusted.toml")).unwrap_err().to_string();
        assert!(err.contains(want) && err.contains("/h/trusted.toml"), "{text:?} → {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
    assert_eq!(TrustStore::parse("", Path::new("t")).unwrap(), TrustStore::default());
}

#[test]
fn reading_a_missing_store_is_an_empty_one_and_a_folder_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(TrustStore::read(&dir.path().join("none.toml")).unwrap(), TrustStore::default());
    assert!(matches!(TrustStore::read(dir.path()), Err(TrustError::Store { .. })));
}

#[test]
fn the_key_is_the_workspaces_own_file() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".toolslot")).unwrap();
    let err = trust_key(&ws).unwrap_err().to_string();
    assert!(err.contains("no project policy file"), "{err}");
    std::fs::write(ws.join(PROJECT_FILE), "").unwrap();
    let canonical = ws.canonicalize().unwrap().join(PROJECT_FILE);
    assert_eq!(trust_key(&ws).unwrap().as_path(), canonical);
    // Spelled another way, the same key.
    assert_eq!(trust_key(&ws.join("../ws/.")).unwrap().as_path(), canonical);
    // A link out of the checkout would lend it another file's trust.
    let elsewhere = dir.path().join("trusted-elsewhere.toml");
    std::fs::write(&elsewhere, "").unwrap();
    std::fs::remove_file(ws.join(PROJECT_FILE)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, ws.join(PROJECT_FILE)).unwrap();
    let err = trust_key(&ws).unwrap_err().to_string();
    assert!(err.contains("only a file the checkout holds itself"), "{err}");
}

#[test]
fn the_store_lies_outside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    assert_eq!(store_path(&config(""), Some(&ws)), Err(TrustError::Disabled));
    let err = store_path(&config("trusted.toml"), Some(&ws)).unwrap_err().to_string();
    assert!(err.contains("relative"), "{err}");
    let inside = ws.join("sub/trusted.toml");
    let err = store_path(&config(&inside.display().to_string()), Some(&ws))
        .unwrap_err()
        .to_string();
    assert!(err.contains("inside the workspace"), "{err}");
    // Under the workspace's .toolslot folder (the home as workspace), which no tool may write.
    let protected = ws.join(".toolslot/trusted.toml");
    assert_eq!(store_path(&config(&protected.display().to_string()), Some(&ws)), Ok(protected));
    let outside = dir.path().join("home/.toolslot/trusted.toml");
    assert_eq!(store_path(&config(&outside.display().to_string()), Some(&ws)), Ok(outside.clone()));
    assert_eq!(store_path(&config(&outside.display().to_string()), None), Ok(outside));
}

#[test]
fn the_notice_names_the_file_the_count_and_the_command() {
    let untrusted = Untrusted {
        file: "/w/my app/.toolslot/policy.toml".into(),
        dir: "/w/my app".into(),
        why: Distrust::Changed,
        ignored: 2,
    };
    assert_eq!(
        untrusted.message(),
        "the project's policy file /w/my app/.toolslot/policy.toml is not trusted (it changed since it was trusted): its 2 allow rules were not applied (its deny and ask rules were); review it, then run `toolslot trust '/w/my app'` to apply them"
    );
    assert_eq!(
        untrusted.not_applied(),
        "not applied: the project's policy file is not trusted (run `toolslot trust '/w/my app'`)"
    );
    assert_eq!(trust_command(Path::new("/w/it's")), "toolslot trust '/w/it'\\''s'");
    assert_eq!(trust_command(Path::new("/w/app")), "toolslot trust /w/app");
}
