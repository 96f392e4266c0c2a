use std::time::{Duration, Instant};

use serde_json::json;

use super::*;

/// Waits up to ten seconds for `done`, failing with `what` if it never is.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let waited = Instant::now();
    while !done() {
        assert!(waited.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

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

/// A ledger folder and, apart from it, a key folder.
struct Place {
    _dir: tempfile::TempDir,
    ledgers: PathBuf,
    key_file: PathBuf,
}

impl Place {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ledgers = dir.path().join("ledger");
        let key_file = dir.path().join("keys/ledger.key");
        Self {
            _dir: dir,
            ledgers,
            key_file,
        }
    }
    fn seal(&self) -> Seal {
        Seal::open_or_create(&self.key_file, &[&self.ledgers]).unwrap()
    }
    fn open(&self, session: &str) -> Ledger {
        Ledger::open(&self.ledgers, session, self.seal()).unwrap()
    }
    fn verify(&self, path: &Path) -> Result<Verified, VerifyError> {
        verify(path, &self.key_file)
    }
    /// A ledger of `decisions`, closed: its file and its lines.
    fn written(&self, session: &str, decisions: &[&str]) -> (PathBuf, Vec<String>) {
        let input = json!({"command": "git push"});
        let mut ledger = self.open(session);
        for d in decisions {
            ledger.append(&entry(&input, Kind::Decision, d)).unwrap();
        }
        ledger.close().unwrap();
        let path = ledger.path().to_path_buf();
        let lines = std::fs::read_to_string(&path).unwrap().lines().map(str::to_string).collect();
        (path, lines)
    }
}

fn write(path: &Path, lines: &[String]) {
    let text = if lines.is_empty() { String::new() } else { lines.join("\n") + "\n" };
    std::fs::write(path, text).unwrap();
}

fn seq_of(r: Result<Verified, VerifyError>) -> u64 {
    match r {
        Err(VerifyError::Broken { seq, .. }) => seq,
        other => panic!("{other:?}"),
    }
}

#[test]
fn records_chain_and_verify() {
    let place = Place::new();
    let input = json!({"command": "git status"});
    let mut ledger = place.open("s1");
    let first = ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    let second = ledger.append(&entry(&input, Kind::Outcome, "allow")).unwrap();
    assert_eq!(first["seq"], 1);
    assert_eq!(first["prev"], GENESIS);
    assert_eq!(second["prev"], first["mac"]);
    assert!(first.get("hash").is_none(), "{first}");
    assert_eq!(first["key_id"], place.seal().key().id());
    assert_eq!(first["input_sha256"], input_sha256(&input));
    assert_eq!(first["input_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(first["mac"].as_str().unwrap().len(), 64);
    assert!(first["ts"].as_str().unwrap().ends_with('Z'), "{}", first["ts"]);
    // Open: it verifies against its head so far.
    let v = place.verify(ledger.path()).unwrap();
    assert_eq!((v.records, v.closed, v.unsealed, v.session.as_deref()), (2, false, 0, Some("s1")));
    // A session resumed later continues the chain.
    drop(ledger);
    let mut again = place.open("s1");
    let third = again.append(&entry(&input, Kind::Decision, "deny")).unwrap();
    assert_eq!(third["seq"], 3);
    assert_eq!(third["prev"], second["mac"]);
    let closing = again.close().unwrap();
    assert_eq!((closing["seq"].as_u64(), closing["kind"].as_str()), (Some(4), Some("close")));
    assert!(closing.get("call_id").is_none(), "{closing}");
    let v = place.verify(again.path()).unwrap();
    assert_eq!((v.records, v.closed), (4, true));
    let head = read_head(&Seal::heads_dir(&place.key_file), "s1").unwrap().unwrap();
    assert_eq!(
        (head.records, head.closed, head.mac.as_str()),
        (4, true, closing["mac"].as_str().unwrap())
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(again.path()), 0o600);
        assert_eq!(mode(&place.key_file), 0o600);
        assert_eq!(mode(place.key_file.parent().unwrap()), 0o700);
        assert_eq!(mode(&head_path(&Seal::heads_dir(&place.key_file), "s1")), 0o600);
    }
}

#[test]
fn tampering_is_found_at_the_first_bad_record() {
    let place = Place::new();
    let (path, lines) = place.written("s", &["deny", "allow", "allow", "deny"]);
    // A decision changed from deny to allow.
    let mut changed = lines.clone();
    changed[0] = changed[0].replace("\"deny\"", "\"allow\"");
    write(&path, &changed);
    assert_eq!(seq_of(place.verify(&path)), 1);
    // A record removed.
    let mut removed = lines.clone();
    removed.remove(1);
    write(&path, &removed);
    assert_eq!(seq_of(place.verify(&path)), 3);
    // Two swapped.
    let mut swapped = lines.clone();
    swapped.swap(2, 3);
    write(&path, &swapped);
    assert_eq!(seq_of(place.verify(&path)), 4);
    // A record rewritten with its plain SHA-256 as its MAC.
    let mut rehashed = lines.clone();
    let mut r: Value = serde_json::from_str(&rehashed[1]).unwrap();
    r["decision"] = json!("deny");
    r["mac"] = json!(hex(&Sha256::digest(mac_message(&r).as_bytes())));
    rehashed[1] = r.to_string();
    write(&path, &rehashed);
    assert_eq!(seq_of(place.verify(&path)), 2);
    write(
        &path,
        &lines[..2].iter().cloned().chain(["not json".to_string()]).collect::<Vec<_>>(),
    );
    assert_eq!(seq_of(place.verify(&path)), 3);
    write(&path, &lines);
    assert_eq!(place.verify(&path).unwrap().records, 5);
}

/// Every way of cutting, appending to or recomputing the chain without the key.
#[test]
fn the_tail_cannot_be_cut_and_the_chain_cannot_be_recomputed() {
    let place = Place::new();
    let (path, lines) = place.written("s", &["allow", "allow", "deny"]);
    assert_eq!(lines.len(), 4);
    let fails = |what: &str, lines: &[String]| -> VerifyError {
        write(&path, lines);
        place.verify(&path).expect_err(what)
    };
    // The last record (the closing one) dropped.
    let e = fails("tail", &lines[..3]);
    assert_eq!(e, VerifyError::Truncated { seq: 4, sealed: 4 });
    assert_eq!(e.to_string(), "record 4 of 4 missing: the ledger ends before its sealed head");
    // All but the first.
    assert_eq!(fails("first only", &lines[..1]), VerifyError::Truncated { seq: 2, sealed: 4 });
    // Emptied.
    assert_eq!(fails("empty", &[]), VerifyError::Truncated { seq: 1, sealed: 4 });
    // Deleted.
    std::fs::remove_file(&path).unwrap();
    assert_eq!(place.verify(&path).unwrap_err(), VerifyError::Truncated { seq: 1, sealed: 4 });
    // A record appended with a correct plain SHA-256, in the old format...
    let last: Value = serde_json::from_str(&lines[3]).unwrap();
    let mut old = json!({"seq": 5, "ts": last["ts"], "session": "s", "call_id": "c", "index": 0, "tool": "exec_shell",
        "input_sha256": input_sha256(&json!({})), "kind": "decision", "decision": "allow", "source": "host",
        "prev": last["mac"]});
    old["hash"] = json!(record_hash(&old));
    let appended = lines.iter().cloned().chain([old.to_string()]).collect::<Vec<_>>();
    assert_eq!(seq_of(Err(fails("old append", &appended))), 5);
    // ... or in the new one, its plain SHA-256 as its MAC.
    let mut new = old.clone();
    new.as_object_mut().unwrap().remove("hash");
    new["key_id"] = last["key_id"].clone();
    new["mac"] = json!(hex(&Sha256::digest(mac_message(&new).as_bytes())));
    let appended = lines.iter().cloned().chain([new.to_string()]).collect::<Vec<_>>();
    assert_eq!(seq_of(Err(fails("new append", &appended))), 5);
    // The whole chain recomputed with plain SHA-256, keyed format kept: the first record fails.
    let mut prev = GENESIS.to_string();
    let recomputed: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut r: Value = serde_json::from_str(l).unwrap();
            r["decision"] = json!("allow");
            r["prev"] = json!(prev);
            r["mac"] = json!(hex(&Sha256::digest(mac_message(&r).as_bytes())));
            prev = r["mac"].as_str().unwrap().to_string();
            r.to_string()
        })
        .collect();
    assert_eq!(seq_of(Err(fails("recomputed", &recomputed))), 1);
    // Or in the old format: its head says it was keyed.
    let mut prev = GENESIS.to_string();
    let downgraded: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut r: Value = serde_json::from_str(l).unwrap();
            let map = r.as_object_mut().unwrap();
            map.remove("mac");
            map.remove("key_id");
            r["prev"] = json!(prev);
            r["hash"] = json!(record_hash(&r));
            prev = r["hash"].as_str().unwrap().to_string();
            r.to_string()
        })
        .collect();
    let e = fails("downgraded", &downgraded);
    assert_eq!(e.seq(), Some(1), "{e}");
    assert!(e.to_string().contains("recomputed without the key"), "{e}");
    // Another session's genuine ledger in its place.
    let (other, other_lines) = place.written("t", &["allow"]);
    assert!(place.verify(&other).is_ok());
    let e = fails("swapped", &other_lines);
    assert!(e.to_string().contains("swapped or renamed"), "{e}");
    // Untouched, it verifies.
    write(&path, &lines);
    let v = place.verify(&path).unwrap();
    assert_eq!((v.records, v.closed, v.unsealed), (4, true, 0));
}

#[test]
fn a_record_written_just_before_a_crash_verifies_unsealed() {
    let place = Place::new();
    let input = json!({});
    let mut ledger = place.open("s");
    ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    let heads = Seal::heads_dir(&place.key_file);
    let sealed_one = std::fs::read(head_path(&heads, "s")).unwrap();
    ledger.append(&entry(&input, Kind::Outcome, "allow")).unwrap();
    // The head of one record back, as a crash between the two writes would leave it.
    std::fs::write(head_path(&heads, "s"), &sealed_one).unwrap();
    let v = place.verify(ledger.path()).unwrap();
    assert_eq!((v.records, v.unsealed), (2, 1));
    // Writing on seals it.
    drop(ledger);
    let mut again = place.open("s");
    again.append(&entry(&input, Kind::Decision, "deny")).unwrap();
    assert_eq!(place.verify(again.path()).unwrap().unsealed, 0);
    // Two records past the head: a group of records whose head a crash interrupted.
    std::fs::write(head_path(&heads, "s"), &sealed_one).unwrap();
    let v = place.verify(again.path()).unwrap();
    assert_eq!((v.records, v.unsealed), (3, 2));
    // A ledger of several records with no head at all is not a crash: a head is made first.
    std::fs::remove_file(head_path(&heads, "s")).unwrap();
    assert!(matches!(place.verify(again.path()), Err(VerifyError::NoHead { records: 3, .. })));
}

#[test]
fn a_cut_ledger_is_not_written_on() {
    let place = Place::new();
    let (path, lines) = place.written("s", &["allow", "deny"]);
    write(&path, &lines[..1]);
    let err = Ledger::open(&place.ledgers, "s", place.seal()).unwrap_err();
    assert!(err.to_string().contains("record 2 of 3 missing"), "{err}");
    // The evidence is left as it is.
    assert_eq!(place.verify(&path).unwrap_err(), VerifyError::Truncated { seq: 2, sealed: 3 });
}

#[test]
fn an_unkeyed_ledger_is_read_but_proves_nothing() {
    let place = Place::new();
    let mut prev = GENESIS.to_string();
    let lines: Vec<String> = (1..=3)
        .map(|seq| {
            let mut r = json!({"seq": seq, "session": "old", "kind": "decision", "decision": "allow", "prev": prev});
            r["hash"] = json!(record_hash(&r));
            prev = r["hash"].as_str().unwrap().to_string();
            canonical_json(&r)
        })
        .collect();
    let path = place.ledgers.join("old.jsonl");
    std::fs::create_dir_all(&place.ledgers).unwrap();
    write(&path, &lines);
    // No key is needed (there is none yet) to say so.
    let e = place.verify(&path).unwrap_err();
    assert_eq!(e, VerifyError::Unkeyed { records: 3 });
    assert!(e.to_string().starts_with("unkeyed ledger"), "{e}");
    // Its plain chain is still checked.
    write(&path, &[lines[0].clone(), lines[2].clone()]);
    assert_eq!(seq_of(place.verify(&path)), 3);
}

#[test]
fn another_key_or_no_key_cannot_check_a_keyed_ledger() {
    let place = Place::new();
    let (path, _) = place.written("s", &["allow"]);
    let other = Place::new();
    other.seal();
    // The same heads, another key.
    std::fs::create_dir_all(Seal::heads_dir(&other.key_file)).unwrap();
    std::fs::copy(
        head_path(&Seal::heads_dir(&place.key_file), "s"),
        head_path(&Seal::heads_dir(&other.key_file), "s"),
    )
    .unwrap();
    assert!(matches!(other.verify(&path), Err(VerifyError::WrongKey { .. })));
    std::fs::remove_file(&place.key_file).unwrap();
    assert!(matches!(place.verify(&path), Err(VerifyError::Key { .. })));
}

#[test]
fn the_key_stays_out_of_the_ledger_folder_and_to_its_owner() {
    let place = Place::new();
    let inside = place.ledgers.join("ledger.key");
    let err = Seal::open_or_create(&inside, &[&place.ledgers]).unwrap_err();
    assert!(err.to_string().contains("must not lie inside"), "{err}");
    // Its heads neither.
    let heads = Seal::heads_dir(&place.key_file);
    let err = Seal::open_or_create(&place.key_file, &[&heads]).unwrap_err();
    assert!(err.to_string().contains("the ledger heads must not lie inside"), "{err}");
    assert!(!place.key_file.exists(), "refused before anything is made");
    // Made once; every later open reads the same key.
    let a = place.seal();
    let b = place.seal();
    assert_eq!(a.key().id(), b.key().id());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&place.key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Seal::open_or_create(&place.key_file, &[]).unwrap_err();
        assert!(err.to_string().contains("chmod 600"), "{err}");
    }
    std::fs::write(&place.key_file, "not a key").unwrap();
    assert!(Seal::open(&place.key_file).unwrap_err().to_string().contains("not a ledger key"));
}

#[test]
fn an_empty_ledger_with_no_head_proves_nothing() {
    let place = Place::new();
    place.seal();
    std::fs::create_dir_all(&place.ledgers).unwrap();
    let path = place.ledgers.join("x.jsonl");
    std::fs::write(&path, "").unwrap();
    assert!(matches!(place.verify(&path), Err(VerifyError::NoHead { records: 0, .. })));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(place.verify(&path), Err(VerifyError::Unreadable { .. })));
}

#[test]
fn an_unwritable_ledger_is_an_error() {
    let place = Place::new();
    std::fs::create_dir_all(&place.ledgers).unwrap();
    let file = place.ledgers.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    assert!(Ledger::open(&file, "s", place.seal()).is_err());
    std::fs::write(place.ledgers.join("s.jsonl"), "garbage\n").unwrap();
    let err = Ledger::open(&place.ledgers, "s", place.seal()).unwrap_err();
    assert!(err.to_string().contains("not a JSON record"), "{err}");
}

#[test]
fn parallel_writers_share_syncs_and_each_returns_only_once_its_record_is_sealed() {
    let place = Place::new();
    let ledger = std::sync::Arc::new(std::sync::Mutex::new(place.open("p")));
    let heads = Seal::heads_dir(&place.key_file);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let ledger = std::sync::Arc::clone(&ledger);
            let heads = heads.clone();
            std::thread::spawn(move || {
                let input = json!({"command": "true"});
                for _ in 0..25 {
                    let (seq, sealer) = {
                        let mut l = ledger.lock().unwrap();
                        let (_, seq) = l.append_written(&entry(&input, Kind::Decision, "allow")).unwrap();
                        (seq, l.sealer())
                    };
                    sealer.seal_through(seq).unwrap();
                    let sealed = read_head(&heads, "p").unwrap().unwrap().records;
                    assert!(sealed >= seq, "record {seq} returned before its head ({sealed})");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let path = ledger.lock().unwrap().path().to_path_buf();
    let v = place.verify(&path).unwrap();
    assert_eq!((v.records, v.unsealed), (200, 0));
}

#[test]
fn a_head_torn_by_a_crash_leaves_the_one_before_and_the_ledger_verifies() {
    let place = Place::new();
    let input = json!({});
    let mut ledger = place.open("t");
    for _ in 0..3 {
        ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    }
    let heads = Seal::heads_dir(&place.key_file);
    let path = head_path(&heads, "t");
    let mut bytes = std::fs::read(&path).unwrap();
    // The head is laid out at open (sealing none) and then written in turn: record 1's into
    // the first slot, 2's the second, 3's the first again, where the machine stopped half way.
    let half = bytes.len() / 2;
    bytes[..30].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let v = place.verify(ledger.path()).unwrap();
    assert_eq!((v.records, v.unsealed), (3, 1), "one record past the head before it");
    // Both slots spoiled is no head at all.
    bytes[half..half + 30].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    assert!(place.verify(ledger.path()).is_err());
}

#[test]
fn a_new_ledger_has_its_head_before_its_first_record() {
    let place = Place::new();
    let input = json!({});
    let mut ledger = place.open("n");
    let heads = Seal::heads_dir(&place.key_file);
    assert_eq!(read_head(&heads, "n").unwrap().map(|h| h.records), Some(0));
    // A crash after a group of records was written and synced, before its head.
    for _ in 0..3 {
        ledger.append_written(&entry(&input, Kind::Decision, "allow")).unwrap();
    }
    std::fs::File::open(ledger.path()).unwrap().sync_all().unwrap();
    drop(ledger);
    let v = place.verify(&Ledger::file_in(&place.ledgers, "n")).unwrap();
    assert_eq!((v.records, v.unsealed), (3, 3));
    // Written on after the restart, the group is sealed with the next record.
    let mut again = place.open("n");
    again.append(&entry(&input, Kind::Decision, "deny")).unwrap();
    assert_eq!(place.verify(again.path()).unwrap().unsealed, 0);
}

#[test]
fn sealing_a_record_never_written_is_an_error() {
    let place = Place::new();
    let ledger = place.open("never");
    let err = ledger.sealer().seal_through(5).unwrap_err();
    assert!(err.to_string().contains("record 5 was never written"), "{err}");
}

/// The environment variable that makes [`a_record_written_in_part_is_cut_off`] its own child.
const PART_WRITTEN_CHILD: &str = "TOOLSLOT_TEST_LEDGER_PART_WRITTEN";

/// A record whose line is written in part (the file-size limit is reached in the middle of it)
/// is an error and is cut off: the ledger verifies as it was, and the next record continues
/// the chain. The limit is the process's, so the writing happens in a child process.
#[test]
fn a_record_written_in_part_is_cut_off() {
    if let Some(dir) = std::env::var_os(PART_WRITTEN_CHILD) {
        write_in_part(Path::new(&dir));
        return;
    }
    let place = Place::new();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ledger::tests::a_record_written_in_part_is_cut_off", "--test-threads=1"])
        .env(PART_WRITTEN_CHILD, place.ledgers.parent().unwrap())
        .status()
        .unwrap();
    assert!(status.success(), "the child's assertions failed: {status}");
    let v = place.verify(&Ledger::file_in(&place.ledgers, "s1")).unwrap();
    assert_eq!((v.records, v.closed, v.unsealed), (3, true, 0), "decision, outcome, close: {v:?}");
}

/// The child of [`a_record_written_in_part_is_cut_off`], in the folder its parent made.
fn write_in_part(dir: &Path) {
    let ledgers = dir.join("ledger");
    let seal = Seal::open_or_create(&dir.join("keys/ledger.key"), &[&ledgers]).unwrap();
    let mut ledger = Ledger::open(&ledgers, "s1", seal).unwrap();
    let input = json!({"command": "git push"});
    ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    let whole = std::fs::metadata(ledger.path()).unwrap().len();
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on this process's own limits and signal disposition, with
    // valid pointers to locals.
    unsafe {
        // Past the limit a write fails with EFBIG instead of the signal ending the process.
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit), 0);
        let tight = libc::rlimit {
            rlim_cur: whole + 10,
            rlim_max: limit.rlim_max,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &tight), 0);
    }
    let refused = ledger.append(&entry(&input, Kind::Outcome, "allow"));
    // SAFETY: as above.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let e = refused.expect_err("a record that does not fit is not written");
    assert!(e.to_string().contains("too large") || e.to_string().contains("File"), "{e}");
    assert_eq!(
        std::fs::metadata(ledger.path()).unwrap().len(),
        whole,
        "the part written is cut off"
    );
    ledger.append(&entry(&input, Kind::Outcome, "allow")).unwrap();
    ledger.close().unwrap();
}

#[test]
fn a_record_sealed_within_a_bound_is_sealed_by_the_next_sync_or_at_its_deadline() {
    let place = Place::new();
    let input = json!({});
    let heads = Seal::heads_dir(&place.key_file);
    let sealed = || read_head(&heads, "b").unwrap().unwrap().records;
    let mut ledger = place.open("b");
    ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    // An outcome left to the next sync: written (it survives the process) but not sealed yet.
    let (_, seq) = ledger.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    later::seal_within(ledger.sealer(), seq, Duration::from_secs(600)).unwrap();
    assert_eq!(sealed(), 1);
    assert_eq!(std::fs::read_to_string(ledger.path()).unwrap().lines().count(), 2);
    // The next decision's sync seals it with its own record.
    ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    assert_eq!(sealed(), 3);
    // With nothing after it, the sealing thread seals it when its time is up.
    let (_, seq) = ledger.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    later::seal_within(ledger.sealer(), seq, Duration::from_millis(20)).unwrap();
    eventually("never sealed by the sealing thread", || sealed() >= 4);
    // Records later in the queue but earlier due are not held up by one due later.
    let (_, late) = ledger.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    let sealer = ledger.sealer();
    later::seal_within(std::sync::Arc::clone(&sealer), late, Duration::from_secs(600)).unwrap();
    let mut other = place.open("c");
    other.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    let (_, early) = other.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    later::seal_within(other.sealer(), early, Duration::from_millis(20)).unwrap();
    eventually("an earlier deadline waited for a later one", || {
        read_head(&heads, "c").unwrap().unwrap().records >= 2
    });
    assert_eq!(sealed(), 4, "a record due in ten minutes was sealed early");
    // Zero is at once.
    later::seal_within(sealer, late, Duration::ZERO).unwrap();
    assert_eq!(sealed(), 5);
    assert_eq!(place.verify(ledger.path()).unwrap().unsealed, 0);
}

#[test]
fn a_ledger_has_one_entry_at_the_sealing_thread_and_it_seals_every_record_written_before_it() {
    let place = Place::new();
    let input = json!({});
    let heads = Seal::heads_dir(&place.key_file);
    let sealed = || read_head(&heads, "d").unwrap().unwrap().records;
    let mut ledger = place.open("d");
    ledger.append(&entry(&input, Kind::Decision, "allow")).unwrap();
    let sealer = ledger.sealer();
    let now = Instant::now();
    // An entry due later than the one queued needs none of its own; an earlier one does.
    assert!(sealer.needs_due(now + Duration::from_secs(60)));
    assert!(!sealer.needs_due(now + Duration::from_secs(90)));
    assert!(sealer.needs_due(now + Duration::from_secs(30)));
    assert!(!sealer.needs_due(now + Duration::from_secs(30)));
    // Once it has sealed, the next record queues an entry again.
    sealer.seal_written(now + Duration::from_secs(30)).unwrap();
    assert!(sealer.needs_due(now + Duration::from_secs(90)));
    sealer.seal_written(now + Duration::from_secs(90)).unwrap();
    sealer.seal_written(now + Duration::from_secs(60)).unwrap();
    // Records left to an entry due sooner are sealed with it, each by its own deadline.
    let (_, first) = ledger.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    later::seal_within(std::sync::Arc::clone(&sealer), first, Duration::from_millis(20)).unwrap();
    let (_, second) = ledger.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    later::seal_within(std::sync::Arc::clone(&sealer), second, Duration::from_secs(600)).unwrap();
    eventually("a record left to an earlier entry was never sealed", || sealed() >= second);
    // A record due sooner than the entry queued gets its own.
    let (_, third) = ledger.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    later::seal_within(std::sync::Arc::clone(&sealer), third, Duration::from_secs(600)).unwrap();
    let (_, fourth) = ledger.append_written(&entry(&input, Kind::Outcome, "allow")).unwrap();
    later::seal_within(std::sync::Arc::clone(&sealer), fourth, Duration::from_millis(20)).unwrap();
    eventually("an earlier deadline waited for a later entry", || sealed() >= fourth);
    ledger.close().unwrap();
    assert_eq!(place.verify(ledger.path()).unwrap().unsealed, 0);
}

#[test]
fn a_head_whose_sync_waits_is_written_at_once_and_never_ahead_of_the_records() {
    let place = Place::new();
    let input = json!({});
    let heads = Seal::heads_dir(&place.key_file);
    let mut ledger = place.open("h");
    for expected in 1..=3u64 {
        let (_, seq) = ledger.append_written(&entry(&input, Kind::Decision, "allow")).unwrap();
        ledger.sealer().seal_through_within(seq, Duration::from_millis(20)).unwrap();
        // Every reader sees the head at once; only its sync waits.
        assert_eq!(read_head(&heads, "h").unwrap().unwrap().records, expected);
        let v = place.verify(ledger.path()).unwrap();
        assert_eq!((v.records, v.unsealed), (expected, 0));
    }
    // The sealing thread's sync finds it and syncs once; syncing again has nothing to do.
    std::thread::sleep(Duration::from_millis(60));
    ledger.sealer().sync_head().unwrap();
    // A full seal after lazy ones syncs the head too.
    ledger.append(&entry(&input, Kind::Decision, "deny")).unwrap();
    assert_eq!(read_head(&heads, "h").unwrap().unwrap().records, 4);
}
