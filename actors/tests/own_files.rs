//! A program sees the files it is started with, wherever they live: an extension whose script
//! is kept under the system temp folder runs when read-only and, once approved to write, too
//! (the writable sandbox's private /tmp must not hide its own script), while what else it
//! writes under /tmp stays private to the call.

mod support;

use std::path::Path;

use serde_json::json;
use support::{json_lines, openai_stream, replay_with, round_results, toolslot};

#[test]
fn an_extension_kept_under_the_temp_folder_runs_read_only_and_approved_to_write() {
    // Both the script's folder and the session's folder under the system temp folder.
    let scripts = tempfile::Builder::new()
        .prefix("toolslot-own-")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let script = scripts.path().join("ext.py");
    std::fs::write(
        &script,
        "import sys, os\nsys.stdin.read()\ntry:\n    open('made-by-ext.txt', 'w').write('x')\nexcept OSError:\n    pass\nprint('EXT RAN', os.path.exists(__file__))\n",
    )
    .unwrap();
    std::fs::write(scripts.path().join("neighbour.txt"), "beside the script\n").unwrap();
    for (caps, approve, writes) in [("[\"read_only\"]", "none", false), ("[\"writes_files\"]", "all", true)] {
        let config = dir.path().join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[approval]\nmode = \"ask\"\n[audit]\nledger_dir = \"\"\n[[extensions]]\nname = \"ext\"\ndescription = \"Runs a script\"\ncapabilities = {caps}\ncommand = [\"python3\", \"{}\"]\ninput_schema = '{{\"type\":\"object\"}}'\n",
                script.display()
            ),
        )
        .unwrap();
        let _ = std::fs::remove_file(ws.join("made-by-ext.txt"));
        let out = replay_with(
            toolslot(),
            dir.path(),
            &ws,
            &config,
            approve,
            &[openai_stream(&[("ext", json!({}))])],
        );
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let results = round_results(&json_lines(&out.stdout));
        let content = results[0]["content"].as_str().unwrap();
        assert!(content.contains("EXT RAN True"), "{caps}: {content}");
        assert!(!content.contains("can't open file"), "{caps}: {content}");
        assert_eq!(
            exists(&ws.join("made-by-ext.txt")),
            writes,
            "{caps}: the write grant decides: {content}"
        );
    }
}

fn exists(path: &Path) -> bool {
    path.exists()
}
