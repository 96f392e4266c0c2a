use serde_json::json;

use super::*;

fn entry<'a>(input: &'a Value, kind: Kind, decision: &'a str) -> Entry<'a> {
    Entry {
        call_id: "call_0",
        index: 0,
        tool: "exec_shell",
        input,
        kind,
        decision,
        source: Source::Rule,
        rule: Some(json!({"layer": "project", "file": "/w/.toolslot/policy.toml", "index": 2})),
        outcome: (kind == Kind::Outcome).then_some("ok"),
        detail: None,
    }
}

#[test]
fn records_chain_and_verify() {
    let dir = tempfile::tempdir().unwrap();
    let input = json!({"command": "git status"});
    let mut ledger = Ledger::open(dir.path(), "s1").unwrap();
    let first = ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    let second = ledger.append(&entry(&input, Kind::Outcome, "allow")).unwrap();
    assert_eq!(first["seq"], 1);
    assert_eq!(first["prev"], GENESIS);
    assert_eq!(second["prev"], first["hash"]);
    assert_eq!(first["input_sha256"], input_sha256(&input));
    assert_eq!(first["input_sha256"].as_str().unwrap().len(), 64);
    assert!(first["ts"].as_str().unwrap().ends_with('Z'), "{}", first["ts"]);
    assert_eq!(verify(ledger.path()).unwrap(), 2);
    // A session resumed later continues the chain.
    drop(ledger);
    let mut again = Ledger::open(dir.path(), "s1").unwrap();
    let third = again.append(&entry(&input, Kind::Decision, "deny")).unwrap();
    assert_eq!(third["seq"], 3);
    assert_eq!(third["prev"], second["hash"]);
    assert_eq!(verify(again.path()).unwrap(), 3);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(again.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}

#[test]
fn tampering_is_found_at_the_first_bad_record() {
    let dir = tempfile::tempdir().unwrap();
    let input = json!({"command": "git push"});
    let mut ledger = Ledger::open(dir.path(), "s").unwrap();
    for d in ["deny", "allow", "allow", "deny"] {
        ledger.append(&entry(&input, Kind::Decision, d)).unwrap();
    }
    let path = ledger.path().to_path_buf();
    let good = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let write = |lines: &[String]| std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let owned = |ls: &[&str]| ls.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let seq_of = |r: Result<u64, VerifyError>| match r {
        Err(VerifyError::Broken { seq, .. }) => seq,
        other => panic!("{other:?}"),
    };
    // A decision changed from deny to allow.
    let mut changed = owned(&lines);
    changed[0] = changed[0].replace("\"deny\"", "\"allow\"");
    write(&changed);
    assert_eq!(seq_of(verify(&path)), 1);
    // A record removed.
    let mut removed = owned(&lines);
    removed.remove(1);
    write(&removed);
    assert_eq!(seq_of(verify(&path)), 3);
    // Two swapped.
    let mut swapped = owned(&lines);
    swapped.swap(2, 3);
    write(&swapped);
    assert_eq!(seq_of(verify(&path)), 4);
    // A record rewritten with a matching hash but the old prev of another: the chain breaks after.
    let mut rehashed = owned(&lines);
    let mut r: Value = serde_json::from_str(&rehashed[1]).unwrap();
    r["decision"] = json!("deny");
    r["hash"] = json!(record_hash(&r));
    rehashed[1] = r.to_string();
    write(&rehashed);
    assert_eq!(seq_of(verify(&path)), 3);
    write(&owned(&lines[..2]).into_iter().chain(["not json".to_string()]).collect::<Vec<_>>());
    assert_eq!(seq_of(verify(&path)), 3);
    write(&owned(&lines));
    assert_eq!(verify(&path).unwrap(), 4);
}

#[test]
fn an_unwritable_ledger_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    assert!(Ledger::open(&file, "s").is_err());
    let err = Ledger::open(dir.path(), "s").map(|_| ()).and_then(|()| {
        std::fs::write(dir.path().join("s.jsonl"), "garbage\n").unwrap();
        Ledger::open(dir.path(), "s").map(|_| ())
    });
    assert!(err.unwrap_err().to_string().contains("not a record"));
}
