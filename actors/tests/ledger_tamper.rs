//! The audit ledger against someone who can write its file but cannot read toolslot's key,
//! through the binary: a recorded stream is replayed to make a ledger (`toolslot replay`), then
//! each attack on the file is made, and `toolslot ledger verify` must fail naming it, while the
//! untouched ledger verifies. Also, through `toolslot serve`: what of a record may wait for its
//! sync (`audit.lazy_seal_ms`) and what may not.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A test's folder: a home, a config, the ledger folder, and apart from it the key's.
struct Bed {
    dir: tempfile::TempDir,
}

impl Bed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        let bed = Bed { dir };
        bed.write_config(&bed.key_file());
        bed
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn ledger_dir(&self) -> PathBuf {
        self.path("ledger")
    }
    fn key_file(&self) -> PathBuf {
        self.path("keys/ledger.key")
    }
    fn heads(&self) -> PathBuf {
        self.path("keys/heads")
    }
    fn config(&self) -> PathBuf {
        self.path("toolslot.toml")
    }
    fn write_config(&self, key_file: &Path) {
        std::fs::write(
            self.config(),
            format!(
                "[overflow]\ndir = \"{}\"\n[audit]\nledger_dir = \"{}\"\nkey_file = \"{}\"\n[policy]\nmanaged_file = \"{}\"\n",
                self.path("overflow").display(),
                self.ledger_dir().display(),
                key_file.display(),
                self.path("managed.toml").display()
            ),
        )
        .unwrap();
    }
    /// The binary, with this test's home and none of the caller's toolslot variables.
    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolslot"));
        for (name, _) in std::env::vars() {
            if name.starts_with("TOOLSLOT_") {
                cmd.env_remove(name);
            }
        }
        cmd.env("HOME", self.path("home")).env("TOOLSLOT_MCP__TOOL_CACHE_DIR", "");
        cmd
    }
    /// Replays the shipped example of four reads in `ws`: exit status, events, stderr.
    fn replay_in(&self, ws: &Path) -> (Option<i32>, Vec<Value>, String) {
        let stream = examples().join("streams/parallel-reads.sse");
        let out = self
            .command()
            .args(["replay", "--approve", "none", "--workspace"])
            .arg(ws)
            .arg("--config")
            .arg(self.config())
            .arg(stream)
            .output()
            .unwrap();
        (
            out.status.code(),
            lines(&out.stdout),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
    /// Replays the example into a ledger; the ledger's file.
    fn recorded(&self) -> PathBuf {
        let (code, events, err) = self.replay_in(&examples().join("workspace"));
        assert_eq!(code, Some(0), "{err}");
        let done = events.iter().find(|e| e["type"] == "round_complete").expect("a round_complete");
        assert_eq!(done["results"].as_array().map(Vec::len), Some(4), "{done}");
        let files: Vec<PathBuf> = std::fs::read_dir(self.ledger_dir()).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files[0].clone()
    }
    /// `toolslot ledger verify FILE`: exit status, its one line, stderr.
    fn verify(&self, file: &Path) -> (Option<i32>, Value, String) {
        let out = self
            .command()
            .args(["ledger", "verify", "--config"])
            .arg(self.config())
            .arg(file)
            .output()
            .unwrap();
        let stdout = lines(&out.stdout);
        (
            out.status.code(),
            stdout.into_iter().next().unwrap_or(Value::Null),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
    /// Verify must fail with exit 1, at record `seq`, its reason holding `why` (on stdout and
    /// stderr both).
    fn fails(&self, attack: &str, file: &Path, seq: u64, why: &str) {
        let (code, answer, err) = self.verify(file);
        assert_eq!(code, Some(1), "{attack}: {answer} {err}");
        assert_eq!(answer["ok"], false, "{attack}: {answer}");
        assert_eq!(answer["seq"], seq, "{attack}: {answer}");
        let reason = answer["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(why), "{attack}: `{reason}` does not say `{why}`");
        assert!(err.contains(why), "{attack}: stderr `{err}`");
        assert_eq!(err.trim().lines().count(), 1, "{attack}: one line: {err}");
    }
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn records(text: &str) -> Vec<Value> {
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn write(file: &Path, records: &[Value]) {
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(file, text).unwrap();
}

/// The plain SHA-256 (hex) of a record's canonical JSON without `field`: what someone without the
/// key can compute (the slot's `input_sha256` is that digest).
fn plain_sha256(record: &Value, field: &str) -> String {
    let mut without = record.clone();
    without.as_object_mut().unwrap().remove(field);
    toolslot::ledger::input_sha256(&without)
}

#[test]
fn an_untouched_ledger_verifies_and_is_sealed_closed() {
    let bed = Bed::new();
    let file = bed.recorded();
    let all = records(&std::fs::read_to_string(&file).unwrap());
    // Four decisions, four outcomes, and the closing record last.
    assert_eq!(all.len(), 9, "{all:?}");
    let last = &all[8];
    assert_eq!((last["kind"].as_str(), last["seq"].as_u64()), (Some("close"), Some(9)), "{last}");
    assert!(
        all.iter()
            .all(|r| r.get("hash").is_none() && r["mac"].as_str().map(str::len) == Some(64))
    );
    let (code, answer, err) = bed.verify(&file);
    assert_eq!(code, Some(0), "{answer} {err}");
    assert_eq!(
        (&answer["ok"], &answer["records"], &answer["keyed"], &answer["closed"]),
        (&json!(true), &json!(9), &json!(true), &json!(true)),
        "{answer}"
    );
    // The key and the head are apart from the ledger, the key readable by its owner alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&bed.key_file()), 0o600);
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    // The head file holds two slots written in turn; the one sealing more records is the head.
    let text = std::fs::read_to_string(bed.heads().join(format!("{stem}.json"))).unwrap();
    let head: Value = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .max_by_key(|h| h["records"].as_u64())
        .unwrap();
    assert_eq!(
        (&head["records"], &head["mac"], &head["closed"]),
        (&json!(9), &last["mac"], &json!(true))
    );
    // The key may also be named by the environment.
    let out = bed
        .command()
        .args(["ledger", "verify"])
        .arg(&file)
        .env("TOOLSLOT_AUDIT__KEY_FILE", bed.key_file())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn every_attack_without_the_key_is_named() {
    let bed = Bed::new();
    let file = bed.recorded();
    let good = std::fs::read_to_string(&file).unwrap();
    let all = records(&good);
    let n = all.len();
    assert_eq!(n, 9);

    // The last record (the closing one) dropped.
    write(&file, &all[..n - 1]);
    bed.fails(
        "drop the last",
        &file,
        9,
        "record 9 of 9 missing: the ledger ends before its sealed head",
    );
    // All but the first.
    write(&file, &all[..1]);
    bed.fails(
        "keep only the first",
        &file,
        2,
        "record 2 of 9 missing: the ledger ends before its sealed head",
    );
    // A record in the middle deleted.
    let mut holed = all.clone();
    holed.remove(4);
    write(&file, &holed);
    bed.fails("delete a record", &file, 6, "seq is 6, expected 5");
    // Emptied.
    write(&file, &[]);
    bed.fails(
        "empty the file",
        &file,
        1,
        "record 1 of 9 missing: the ledger ends before its sealed head",
    );
    // Deleted.
    std::fs::remove_file(&file).unwrap();
    bed.fails("delete the file", &file, 1, "record 1 of 9 missing");

    // A record appended with a correct plain SHA-256 hash, as the unkeyed format has it.
    let last = &all[n - 1];
    let mut old = json!({"seq": n + 1, "ts": last["ts"], "session": last["session"], "call_id": "call_x", "index": 9,
        "tool": "exec_shell", "input_sha256": toolslot::ledger::input_sha256(&json!({"command": "rm -rf /"})),
        "kind": "decision", "decision": "allow", "source": "host", "detail": "approve", "prev": last["mac"]});
    old["hash"] = json!(plain_sha256(&old, "hash"));
    let appended: Vec<Value> = all.iter().cloned().chain([old.clone()]).collect();
    write(&file, &appended);
    bed.fails("append a hashed record", &file, 10, "unkeyed");
    // The same in the keyed shape, its plain SHA-256 as its MAC.
    let mut forged = old.clone();
    forged.as_object_mut().unwrap().remove("hash");
    forged["key_id"] = last["key_id"].clone();
    forged["mac"] = json!(plain_sha256(&forged, "mac"));
    let appended: Vec<Value> = all.iter().cloned().chain([forged]).collect();
    write(&file, &appended);
    bed.fails("append a forged record", &file, 10, "its MAC does not match its content");

    // The whole chain recomputed with plain SHA-256 after a change, keyed shape kept.
    let mut prev = all[0]["prev"].clone();
    let recomputed: Vec<Value> = all
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if r["kind"] == "decision" {
                r["source"] = json!("rule");
            }
            r["prev"] = prev.clone();
            r["mac"] = json!(plain_sha256(&r, "mac"));
            prev = r["mac"].clone();
            r
        })
        .collect();
    write(&file, &recomputed);
    bed.fails("recompute the chain", &file, 1, "its MAC does not match its content");
    // Or in the unkeyed format, whose chain then holds: its head says it was keyed.
    let mut prev = all[0]["prev"].clone();
    let downgraded: Vec<Value> = all
        .iter()
        .map(|r| {
            let mut r = r.clone();
            let map = r.as_object_mut().unwrap();
            map.remove("mac");
            map.remove("key_id");
            r["prev"] = prev.clone();
            r["hash"] = json!(plain_sha256(&r, "hash"));
            prev = r["hash"].clone();
            r
        })
        .collect();
    write(&file, &downgraded);
    bed.fails("recompute the chain unkeyed", &file, 1, "recomputed without the key");

    // One record edited: a deny made an allow, or the tool renamed.
    let mut edited = all.clone();
    edited[2]["tool"] = json!("exec_shell");
    write(&file, &edited);
    bed.fails("edit a record", &file, 3, "its MAC does not match its content");

    // Untouched again, it verifies.
    std::fs::write(&file, &good).unwrap();
    let (code, answer, err) = bed.verify(&file);
    assert_eq!(code, Some(0), "{answer} {err}");
    assert_eq!(answer["records"], 9);
}

#[test]
fn an_unkeyed_ledger_is_read_but_not_called_ok() {
    let bed = Bed::new();
    std::fs::create_dir_all(bed.ledger_dir()).unwrap();
    let file = bed.ledger_dir().join("before-keys.jsonl");
    let mut prev = json!("0".repeat(64));
    let old: Vec<Value> = (1..=3)
        .map(|seq| {
            let mut r = json!({"seq": seq, "ts": "2025-01-01T12:00:00.000Z", "session": "before-keys", "call_id": "call_0",
                "index": 0, "tool": "read_file", "input_sha256": "0".repeat(64), "kind": "decision", "decision": "allow",
                "source": "mode", "prev": prev});
            r["hash"] = json!(plain_sha256(&r, "hash"));
            prev = r["hash"].clone();
            r
        })
        .collect();
    write(&file, &old);
    let (code, answer, err) = bed.verify(&file);
    assert_eq!(code, Some(3), "{answer} {err}");
    assert_eq!(
        (&answer["ok"], &answer["keyed"], &answer["records"]),
        (&json!(false), &json!(false), &json!(3))
    );
    let reason = answer["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("unkeyed ledger") && reason.contains("cannot prove its tail"),
        "{reason}"
    );
    // Its plain chain is still walked: a broken one is a failure, not "unkeyed".
    write(&file, &[old[0].clone(), old[2].clone()]);
    bed.fails("delete from an unkeyed ledger", &file, 3, "seq is 3, expected 2");
}

#[test]
fn a_ledger_verified_without_its_key_cannot_be_checked() {
    let bed = Bed::new();
    let file = bed.recorded();
    let elsewhere = bed.path("nowhere/ledger.key");
    bed.write_config(&elsewhere);
    let (code, _, err) = bed.verify(&file);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot check the ledger's MACs"), "{err}");
}

#[test]
fn a_key_inside_the_workspace_or_the_ledger_folder_is_refused() {
    let bed = Bed::new();
    // Inside the ledger folder: the config does not load.
    bed.write_config(&bed.ledger_dir().join("ledger.key"));
    let ws = bed.path("ws");
    std::fs::create_dir(&ws).unwrap();
    let (code, _, err) = bed.replay_in(&ws);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("audit.key_file"), "{err}");
    // Inside the workspace: no call is recorded, so none runs.
    bed.write_config(&ws.join(".keys/ledger.key"));
    let (code, events, err) = bed.replay_in(&ws);
    assert_eq!(code, Some(0), "{err}");
    let done = events.iter().find(|e| e["type"] == "round_complete").expect("a round_complete");
    for result in done["results"].as_array().unwrap() {
        let content = result["content"].as_str().unwrap_or_default();
        assert!(
            content.contains("could not be recorded in the ledger") && content.contains("must not lie inside"),
            "{content}"
        );
    }
    assert!(!ws.join(".keys/ledger.key").exists(), "no key was made in the workspace");
}

/// The highest head in the two-slot head file of ledger `stem` (0 when there is none yet).
fn head_records(heads: &Path, stem: &str) -> u64 {
    let text = std::fs::read_to_string(heads.join(format!("{stem}.json"))).unwrap_or_default();
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .filter_map(Result::ok)
        .filter_map(|h| h["records"].as_u64())
        .max()
        .unwrap_or(0)
}

#[test]
fn an_outcome_is_written_before_its_result_and_sealed_within_the_bound() {
    let bed = Bed::new();
    let ws = bed.path("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let served = support::Serve::in_dir(bed.dir.path(), &ws)
        .config(&format!(
            "[audit]\nkey_file = \"{}\"\nlazy_seal_ms = 20000\n",
            bed.key_file().display()
        ))
        .ledger(&bed.ledger_dir())
        .start();
    let id = served.session(&ws);
    let results = served.round(&id, &[("read_file", json!({"path": "a.txt"}))]);
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    // Both records are in the file by the time the result arrives.
    let file = bed.ledger_dir().join(format!("{id}.jsonl"));
    let kinds: Vec<String> = records(&std::fs::read_to_string(&file).unwrap())
        .iter()
        .map(|r| r["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(kinds, ["decision", "outcome"]);
    // The decision was sealed before the call ran; the outcome waits for the session's next
    // sync or the bound, whichever comes first (a bound of 20 s: the checks before it pass
    // on a loaded machine).
    assert_eq!(head_records(&bed.heads(), &id), 1, "the outcome was sealed at once");
    assert!(
        support::eventually(60, || head_records(&bed.heads(), &id) == 2),
        "the outcome was never sealed"
    );
    let (code, answer, err) = bed.verify(&file);
    assert_eq!(code, Some(0), "{answer} {err}");
    // No `unsealed` count: every record is under the head.
    assert_eq!((&answer["records"], &answer["unsealed"]), (&json!(2), &Value::Null), "{answer}");
    // A second round's decision is synced with the first round's outcome already sealed, and
    // its own outcome is again the one record past the head.
    served.round(&id, &[("read_file", json!({"path": "a.txt"}))]);
    assert_eq!(head_records(&bed.heads(), &id), 3);
    assert_eq!(records(&std::fs::read_to_string(&file).unwrap()).len(), 4);
}
