//! Language-server diagnostics after an edit, through the binary, with real servers
//! (basedpyright from PyPI, TypeScript's own `tsc --lsp` from npm).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The test dependencies (installed on first use on a fresh machine, by CI beforehand).
fn deps() -> PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let ok = Command::new("bash")
            .arg(repo().join("scripts/install-test-deps.sh"))
            .status()
            .expect("bash runs")
            .success();
        assert!(ok, "installing the test dependencies failed");
    });
    repo().join(".test-deps").canonicalize().unwrap()
}

/// An OpenAI Chat response calling `calls` (name, arguments), as SSE.
fn openai_stream(calls: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (n, (name, args)) in calls.iter().enumerate() {
        let chunk = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("call_{n}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {chunk}\n\n"));
    }
    out.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
    out
}

/// A config with the two real servers (and `extra` appended), waiting long enough for a cold
/// start on a loaded machine: the wait is a bound, not a delay.
fn config_with_servers(dir: &Path, extra: &str) -> PathBuf {
    let deps = deps();
    let config = dir.join("lsp.toml");
    std::fs::write(
        &config,
        format!(
            r#"[lsp]
wait_ms = 60000

[[lsp.servers]]
name = "python"
command = ["{}", "--stdio"]
extensions = ["py"]

[[lsp.servers]]
name = "typescript"
command = ["{}", "--lsp", "--stdio"]
extensions = ["ts"]
{extra}
"#,
            deps.join("venv/bin/basedpyright-langserver").display(),
            deps.join("node/node_modules/.bin/tsc").display(),
        ),
    )
    .unwrap();
    config
}

/// Replays `rounds` (one stream file each, one session) in a fresh workspace; the results of
/// each round, and the workspace.
fn replay(dir: &Path, config: &Path, rounds: &[Vec<(&str, Value)>]) -> Vec<Vec<Value>> {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolslot"));
    cmd.env("TOOLSLOT_AUDIT__LEDGER_DIR", "");
    cmd.env("TOOLSLOT_OVERFLOW__DIR", dir.join("overflow"))
        .args(["replay", "--approve", "all", "--workspace"])
        .arg(&ws)
        .arg("--config")
        .arg(config);
    for (i, calls) in rounds.iter().enumerate() {
        let file = dir.join(format!("round{i}.sse"));
        std::fs::write(&file, openai_stream(calls)).unwrap();
        cmd.arg(file);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "round_complete")
        .map(|e| e["results"].as_array().unwrap().clone())
        .collect()
}

fn content(result: &Value) -> &str {
    assert_eq!(result["is_error"], false, "{result}");
    result["content"].as_str().unwrap()
}

#[test]
fn an_edit_that_breaks_the_types_gets_the_error_and_the_fix_gets_none() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_servers(dir.path(), "");
    let rounds = replay(
        dir.path(),
        &config,
        &[
            vec![
                (
                    "write_file",
                    json!({"path": "app.py", "content": "def double(n: int) -> int:\n    return n * 2\n\ncount: int = double(\"two\")\n"}),
                ),
                (
                    "write_file",
                    json!({"path": "src/app.ts", "content": "export function double(n: number): number {\n  return n * 2;\n}\n\nexport const count: number = double(\"two\");\n"}),
                ),
            ],
            vec![
                (
                    "edit_file",
                    json!({"path": "app.py", "search": "double(\"two\")", "replace": "double(2)"}),
                ),
                (
                    "edit_file",
                    json!({"path": "src/app.ts", "search": "double(\"two\")", "replace": "double(2)"}),
                ),
            ],
        ],
    );
    assert_eq!(rounds.len(), 2);
    let broken_py = content(&rounds[0][0]);
    assert!(broken_py.starts_with("Created `app.py`"), "{broken_py}");
    assert!(
        broken_py.contains("Diagnostics (python) for `app.py`: 1 error")
            && broken_py.contains("app.py:4:21: error: Argument of type \"Literal['two']\"")
            && broken_py.contains("[reportArgumentType]"),
        "{broken_py}"
    );
    let broken_ts = content(&rounds[0][1]);
    assert!(
        broken_ts.contains("Diagnostics (typescript) for `src/app.ts`: 1 error")
            && broken_ts
                .contains("src/app.ts:5:37: error: Argument of type 'string' is not assignable to parameter of type 'number'. [2345]"),
        "{broken_ts}"
    );
    for (fixed, name, file) in [(&rounds[1][0], "python", "app.py"), (&rounds[1][1], "typescript", "src/app.ts")] {
        let fixed = content(fixed);
        assert!(fixed.ends_with(&format!("Diagnostics ({name}) for `{file}`: none.")), "{fixed}");
        assert!(!fixed.contains("error"), "the fix's result carries no error: {fixed}");
    }
    servers_are_gone(&dir.path().join("ws"));
}

/// No process is left running in `ws` (the language servers and what they started end with
/// the session), waiting a little for them to exit.
fn servers_are_gone(ws: &Path) {
    let ws = ws.canonicalize().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|p| p.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
            .filter(|p| std::fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&ws)))
            .map(|p| {
                std::fs::read_to_string(p.path().join("cmdline"))
                    .unwrap_or_default()
                    .replace('\0', " ")
            })
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "still running after the session ended: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_dead_or_silent_server_never_fails_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("lsp.toml");
    std::fs::write(
        &config,
        r#"[lsp]
wait_ms = 1500

[[lsp.servers]]
name = "missing"
command = ["/no/such/language-server", "--stdio"]
extensions = ["py"]

[[lsp.servers]]
name = "crashing"
command = ["sh", "-c", "echo 'fatal: no licence' >&2; exit 3"]
extensions = ["rb"]

[[lsp.servers]]
name = "silent"
command = ["sh", "-c", "cat > /dev/null"]
extensions = ["go"]
"#,
    )
    .unwrap();
    let rounds = replay(
        dir.path(),
        &config,
        &[vec![
            ("write_file", json!({"path": "a.py", "content": "x = 1\n"})),
            ("write_file", json!({"path": "b.rb", "content": "x = 1\n"})),
            ("write_file", json!({"path": "c.go", "content": "package c\n"})),
            ("write_file", json!({"path": "d.txt", "content": "no server\n"})),
        ]],
    );
    let ws = dir.path().join("ws");
    for name in ["a.py", "b.rb", "c.go", "d.txt"] {
        assert!(ws.join(name).is_file(), "{name} was written");
    }
    let missing = content(&rounds[0][0]);
    assert!(
        missing
            .contains("Diagnostics (missing) for `a.py`: unavailable (language server `missing`: cannot start `/no/such/language-server`"),
        "{missing}"
    );
    let crashing = content(&rounds[0][1]);
    assert!(crashing.contains("Diagnostics (crashing) for `b.rb`: unavailable ("), "{crashing}");
    let silent = content(&rounds[0][2]);
    assert!(
        silent.contains("Diagnostics (silent) for `c.go`: not ready within 1500 ms"),
        "{silent}"
    );
    assert_eq!(content(&rounds[0][3]), "Created `d.txt` (10 bytes, 1 lines).");
    servers_are_gone(&ws);
}

#[test]
fn a_late_answer_is_never_appended_to_a_later_edit() {
    use toolslot::config::LspServerConfig;
    let deps = deps();
    let servers = [
        (
            "python",
            deps.join("venv/bin/basedpyright-langserver"),
            vec!["--stdio"],
            "a.py",
            "x: int = \"one\"\n",
            "x: int = 1\n",
        ),
        (
            "typescript",
            deps.join("node/node_modules/.bin/tsc"),
            vec!["--lsp", "--stdio"],
            "a.ts",
            "export const x: number = \"one\";\n",
            "export const x: number = 1;\n",
        ),
    ];
    actix_rt::System::new().block_on(async {
        for (name, program, args, file, broken, fixed) in servers {
            let ws = tempfile::tempdir().unwrap();
            let cfg = LspServerConfig {
                name: name.into(),
                command: std::iter::once(program.display().to_string())
                    .chain(args.iter().map(|a| a.to_string()))
                    .collect(),
                extensions: vec![],
                language_id: None,
                env: Default::default(),
            };
            let client = toolslot_actors::lsp::connect(&cfg, ws.path(), Duration::from_secs(60))
                .await
                .unwrap();
            let path = ws.path().canonicalize().unwrap().join(file);
            let language = if name == "python" { "python" } else { "typescript" };
            let settle = Duration::from_millis(300);
            // The broken version's result stops waiting at once; its answer comes later.
            std::fs::write(&path, broken).unwrap();
            let gave_up = tokio::time::timeout(Duration::from_millis(1), client.diagnose(&path, language, broken.into(), settle)).await;
            assert!(gave_up.is_err(), "{name}: the first edit's wait ended early");
            std::fs::write(&path, fixed).unwrap();
            let second = tokio::time::timeout(Duration::from_secs(60), client.diagnose(&path, language, fixed.into(), settle))
                .await
                .unwrap()
                .unwrap();
            assert!(
                second.is_empty(),
                "{name}: the first edit's diagnostics reached the second: {second:?}"
            );
            // And the error is reported when it is the current version.
            std::fs::write(&path, broken).unwrap();
            let third = client.diagnose(&path, language, broken.into(), settle).await.unwrap();
            assert_eq!(third.len(), 1, "{name}: {third:?}");
            client.shutdown(Duration::from_secs(5)).await;
        }
    });
}
