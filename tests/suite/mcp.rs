//! Real MCP servers (installed from npm and PyPI by scripts/install-test-deps.sh) in the slot.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot_actors::{Dispatcher, RoundInput, SessionOptions, build_toolset};

use super::support::*;

/// The test dependencies, installed on first use when a developer runs `cargo test` on a
/// fresh machine (CI installs them first, in .ci/run).
pub fn deps() -> std::path::PathBuf {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    ONCE.call_once(|| {
        let status = std::process::Command::new("bash")
            .arg(root.join("scripts/install-test-deps.sh"))
            .status()
            .expect("bash runs");
        assert!(status.success(), "installing the test MCP servers failed");
    });
    root.join(".test-deps")
}

fn config(extra: &str, workspace: &std::path::Path) -> Arc<Config> {
    let d = deps();
    let toml = format!(
        r#"
[approval]
mode = "full-auto"
[execution]
workers = 1
[overflow]
dir = "{ws}/.overflow"
[mcp]
tool_cache_dir = "{ws}/.mcp_tools"
# Python and node servers, several per test and tests in parallel: a loaded machine starts them slowly.
startup_timeout_ms = 60000
[[mcp.servers]]
name = "everything"
command = ["node", "{d}/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"]
[[mcp.servers]]
name = "time"
command = ["{d}/venv/bin/mcp-server-time", "--local-timezone=UTC"]
{extra}
"#,
        d = d.display(),
        ws = workspace.display()
    );
    let file = workspace.join(".mcp.toml");
    std::fs::write(&file, toml).unwrap();
    Arc::new(Config::load_with_env(Some(&file), std::iter::empty()).unwrap())
}

/// A running toolset over the test servers, its dispatcher and one session.
struct Bed {
    toolset: toolslot_actors::Toolset,
    d: Arc<Dispatcher>,
    s: String,
    _ws: tempfile::TempDir,
}

async fn bed() -> Bed {
    let ws = tempfile::tempdir().unwrap();
    let cfg = config("", ws.path());
    let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
    let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
    let s = d.open_session(SessionOptions {
        workspace: Some(ws.path().to_path_buf()),
        ..Default::default()
    });
    Bed { toolset, d, s, _ws: ws }
}

async fn round(d: &Dispatcher, s: &str, calls: &[(&str, serde_json::Value)]) -> Vec<PipelineEvent> {
    run_round(d, s, openai_chat(calls, "tool_calls")).await
}

#[test]
fn server_tools_are_deferred_found_by_search_and_called() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        let cfg = config("", ws.path());
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        assert!(toolset.notices.is_empty(), "{:?}", toolset.notices);
        let reg = toolset.registry.current();
        let echo = reg.get("everything__echo").expect("the echo tool is listed");
        assert!(echo.meta.deferred && echo.meta.network, "{:?}", echo.meta);
        assert_eq!(
            echo.meta.static_approval,
            toolslot::tool::ApprovalRequirement::Required,
            "untrusted server tools need approval"
        );
        // Dirty schemas are cleaned for the model: no `$schema` survives.
        for name in reg.names() {
            assert!(reg.get(name).unwrap().model_schema.get("$schema").is_none(), "{name}");
        }
        let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), Arc::clone(&reg)));
        let s = d.open_session(SessionOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..Default::default()
        });
        // Not loaded yet: the model is told how to load it.
        let ev = round(&d, &s, &[("everything__echo", json!({"message": "hello"}))]).await;
        assert!(results(&ev)[0].content.contains("retry_required"), "{}", results(&ev)[0].content);
        let ev = round(&d, &s, &[("tool_search", json!({"query": "echo a message back"}))]).await;
        assert!(results(&ev)[0].content.contains("everything__echo"), "{}", results(&ev)[0].content);
        let ev = round(&d, &s, &[("everything__echo", json!({"message": "hello"}))]).await;
        let r = &results(&ev)[0];
        assert!(!r.is_error, "{}", r.content);
        assert!(
            r.content.starts_with("<external_content source=\"everything__echo\""),
            "{}",
            r.content
        );
        assert!(r.content.contains("Echo: hello"));
        // A bad call is the server's error, in its own slot.
        let ev = round(
            &d,
            &s,
            &[
                ("everything__echo", json!({"message": 1})),
                ("time__get_current_time", json!({"timezone": "UTC"})),
            ],
        )
        .await;
        let r = results(&ev);
        assert!(r[0].is_error);
        assert!(
            r[1].content.contains("retry_required") || r[1].content.contains("datetime"),
            "{}",
            r[1].content
        );
    });
}

#[test]
fn a_killed_server_gives_outcome_unknown_and_is_restarted() {
    system(async {
        let b = bed().await;
        let (d, s) = (Arc::clone(&b.d), b.s.clone());
        let everything = b.toolset.mcp.iter().find(|h| toslot_name(h) == "everything").unwrap().clone();
        round(&d, &s, &[("tool_search", json!({"query": "long running operation"}))]).await;
        round(&d, &s, &[("tool_search", json!({"query": "echo"}))]).await;
        let pid = everything.pid().await.unwrap();
        let body = openai_chat(
            &[("everything__trigger-long-running-operation", json!({"duration": 5, "steps": 5}))],
            "tool_calls",
        );
        let mut rx = d
            .submit_round(&s, RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body)]))))
            .unwrap();
        // Killed once its first progress shows the server runs the call, however slow the
        // machine was to get it there.
        let mut ev = Vec::new();
        while let Some(e) = rx.recv().await {
            if matches!(e, PipelineEvent::Progress { .. }) && !ev.iter().any(|e| matches!(e, PipelineEvent::Progress { .. })) {
                unsafe_kill(pid);
            }
            ev.push(e);
        }
        assert!(
            ev.iter().any(|e| matches!(e, PipelineEvent::Progress { .. })),
            "no progress before the kill: {ev:?}"
        );
        let r = &results(&ev)[0];
        assert!(r.is_error && r.content.contains("outcome is unknown"), "{}", r.content);
        // The next call restarts the server.
        let ev = round(&d, &s, &[("everything__echo", json!({"message": "back"}))]).await;
        assert!(results(&ev)[0].content.contains("Echo: back"), "{}", results(&ev)[0].content);
        assert_ne!(everything.pid().await, Some(pid));
    });
}

fn toslot_name(h: &toolslot_actors::sources::mcp::McpServerHandle) -> String {
    use toolslot::mcp::McpCaller;
    h.server().to_string()
}

fn unsafe_kill(pid: u32) {
    let _ = std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status();
}

#[test]
fn a_server_that_never_starts_is_reported_and_required_ones_stop_startup() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        let cfg = config(
            "[[mcp.servers]]\nname = \"ghost\"\ncommand = [\"/no/such/mcp-server\"]\n",
            ws.path(),
        );
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        assert!(toolset.notices.iter().any(|n| n.message.contains("ghost")), "{:?}", toolset.notices);
        assert!(
            toolset.registry.current().get("everything__echo").is_some(),
            "the other servers still work"
        );
        let cfg = config(
            "[[mcp.servers]]\nname = \"ghost\"\nrequired = true\ncommand = [\"/no/such/mcp-server\"]\n",
            ws.path(),
        );
        let err = build_toolset(cfg, None).await.err().unwrap();
        assert!(err.contains("required MCP server `ghost`"), "{err}");
        // A server that exits at once: what it said on stderr is the reason given.
        let cfg = config(
            "[[mcp.servers]]\nname = \"keyless\"\ncommand = [\"python3\", \"-c\", \"import sys; print('starting', file=sys.stderr); print('cannot start: MISSING_API_KEY is not set', file=sys.stderr); sys.exit(3)\"]\n",
            ws.path(),
        );
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        let notice = toolset.notices.iter().find(|n| n.message.contains("keyless")).expect("reported");
        assert!(
            notice
                .message
                .contains("its stderr ends: starting | cannot start: MISSING_API_KEY is not set"),
            "{}",
            notice.message
        );
    });
}

/// The events of a round of `body`, cancelled once its first call started and `ready` is done.
async fn cancelled_after_start(d: &Dispatcher, s: &str, body: Vec<u8>, ready: impl AsyncFn()) -> Vec<PipelineEvent> {
    let mut rx = d
        .submit_round(s, RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body)]))))
        .unwrap();
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        if matches!(e, PipelineEvent::CallStarted { .. }) {
            ready().await;
            d.cancel_round(s).unwrap();
        }
        events.push(e);
    }
    events
}

/// Calls the fixture's `waited`, cancels the round once the tool has started at the server
/// (a call dropped before the server read it never runs, and has nothing to be told), and
/// checks that the server was told: the tool, cancelled there, wrote `cancelled` to its marker.
async fn waited_and_cancelled(d: &Dispatcher, s: &str, ws: &std::path::Path) {
    let marker = ws.join("cancelled");
    let body = openai_chat(&[("net__waited", json!({"marker": marker}))], "tool_calls");
    let read = || std::fs::read_to_string(&marker).unwrap_or_default();
    let events = cancelled_after_start(d, s, body, async || {
        for _ in 0..400 {
            if read() == "started" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(read(), "started", "the tool never started at the server");
    })
    .await;
    assert!(results(&events)[0].content.contains("cancelled"), "{}", results(&events)[0].content);
    for _ in 0..200 {
        if read() == "cancelled" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(read(), "cancelled", "the server was not told");
}

#[test]
fn a_long_running_call_is_cancelled_with_the_round() {
    system(async {
        let b = bed().await;
        let (d, s) = (Arc::clone(&b.d), b.s.clone());
        round(&d, &s, &[("tool_search", json!({"query": "long running operation"}))]).await;
        let body = openai_chat(
            &[("everything__trigger-long-running-operation", json!({"duration": 30, "steps": 3}))],
            "tool_calls",
        );
        let started = std::time::Instant::now();
        let events = cancelled_after_start(&d, &s, body, async || tokio::time::sleep(Duration::from_millis(300)).await).await;
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the cancelled call did not hold the round"
        );
        assert!(
            results(&events)[0].content.contains("\"error\":\"cancelled\""),
            "{}",
            results(&events)[0].content
        );
    });
}

#[test]
fn huge_results_are_truncated_with_overflow() {
    system(async {
        let b = bed().await;
        let (d, s) = (Arc::clone(&b.d), b.s.clone());
        round(&d, &s, &[("tool_search", json!({"query": "echo"}))]).await;
        let big = "0123456789".repeat(30_000);
        let ev = round(&d, &s, &[("everything__echo", json!({"message": big}))]).await;
        let r = &results(&ev)[0];
        assert!(r.content.len() < 120_000, "{}", r.content.len());
        let id = r
            .content
            .split("ref=")
            .nth(1)
            .expect("a pointer to the full output")
            .split(' ')
            .next()
            .unwrap()
            .to_string();
        let ev = round(
            &d,
            &s,
            &[(
                "retrieve_tool_result",
                json!({"ref": id, "mode": "bytes", "offset": 0, "limit": 26}),
            )],
        )
        .await;
        assert_eq!(results(&ev)[0].content, "Echo: 01234567890123456789");
    });
}

#[test]
fn progress_notifications_become_pipeline_events() {
    system(async {
        let b = bed().await;
        let (d, s) = (Arc::clone(&b.d), b.s.clone());
        round(&d, &s, &[("tool_search", json!({"query": "long running operation"}))]).await;
        let ev = round(
            &d,
            &s,
            &[("everything__trigger-long-running-operation", json!({"duration": 1, "steps": 3}))],
        )
        .await;
        let progress: Vec<f64> = ev
            .iter()
            .filter_map(|e| match e {
                PipelineEvent::Progress { index: 0, progress, .. } => Some(*progress),
                _ => None,
            })
            .collect();
        assert!(progress.len() >= 2, "progress events: {progress:?}");
        assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
        // Progress comes before the call finishes.
        let first_progress = ev.iter().position(|e| matches!(e, PipelineEvent::Progress { .. })).unwrap();
        let finished = ev.iter().position(|e| matches!(e, PipelineEvent::CallFinished { .. })).unwrap();
        assert!(first_progress < finished);
        assert!(!results(&ev)[0].is_error, "{}", results(&ev)[0].content);
    });
}

/// A process killed when the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_streamable_http_server_is_used_like_a_stdio_one() {
    let d = deps();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _server = Killed(
        std::process::Command::new("node")
            .arg(d.join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    system(async move {
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join("http.toml");
        std::fs::write(&file, format!("[approval]\nmode = \"full-auto\"\n[mcp]\ntool_cache_dir = \"\"\n[[mcp.servers]]\nname = \"remote\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nstartup_timeout_ms = 15000\n")).unwrap();
        let cfg = Arc::new(Config::load_with_env(Some(&file), std::iter::empty()).unwrap());
        listening(port, || true).await;
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        assert!(toolset.notices.is_empty(), "{:?}", toolset.notices);
        assert!(toolset.registry.current().get("remote__echo").is_some());
        let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
        let s = d.open_session(SessionOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..Default::default()
        });
        round(&d, &s, &[("tool_search", json!({"query": "echo"}))]).await;
        let ev = round(&d, &s, &[("remote__echo", json!({"message": "over http"}))]).await;
        assert!(results(&ev)[0].content.contains("Echo: over http"), "{}", results(&ev)[0].content);
    });
}

/// The growing fixture server (tests/data/growing_mcp_server.py) over HTTP, with `args`.
fn growing_over_http(args: &[String]) -> Killed {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/growing_mcp_server.py");
    Killed(
        std::process::Command::new(deps().join("venv/bin/python"))
            .arg(script)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits (a minute at most) until something listens on `port` and `ready` holds: a server's
/// start-up retries are the supervisor's job, not what these tests are about.
async fn listening(port: u16, ready: impl Fn() -> bool) {
    for _ in 0..1200 {
        if ready() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listened on port {port} within a minute");
}

/// The connection a call of the growing fixture's `connection` tool came over.
async fn connection_of(d: &Dispatcher, s: &str, nth: usize) -> String {
    // Each call its own argument: the loop guard stops a repeat.
    let ev = round(d, s, &[("net__connection", json!({"nth": nth}))]).await;
    let text = &results(&ev)[0].content;
    let at = text.find("connection ").unwrap_or_else(|| panic!("no connection named: {text}"));
    text[at..]
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_string()
}

/// A dispatcher whose one server, `net`, is the fixture at `port` (with `mcp_keys` under
/// `[mcp]`), and a session of it in `ws`: sessions on arbiters of their own, not on the thread
/// the server's actor lives on.
async fn net_session(ws: &std::path::Path, port: u16, mcp_keys: &str) -> (Arc<Dispatcher>, String) {
    let file = ws.join("net.toml");
    let toml = format!(
        "[approval]\nmode = \"full-auto\"\n[execution]\nworkers = 2\n[mcp]\ntool_cache_dir = \"\"\n{mcp_keys}[[mcp.servers]]\nname = \"net\"\nurl = \"http://127.0.0.1:{port}/mcp\"\ndefer = false\nrequired = true\n"
    );
    std::fs::write(&file, toml).unwrap();
    let cfg = Arc::new(Config::load_with_env(Some(&file), std::iter::empty()).unwrap());
    let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
    let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
    let s = d.open_session(SessionOptions {
        workspace: Some(ws.to_path_buf()),
        ..Default::default()
    });
    (d, s)
}

#[test]
fn a_session_thread_calls_a_streamable_http_server_over_a_connection_of_its_own() {
    // The fixture on the newest revision (no sessions: a connection is named by its port), and
    // on the older ones, whose calls from a thread's own connection are posted straight.
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (newest, older) = (free(), free());
    let _servers = [
        growing_over_http(&["--http".into(), newest.to_string()]),
        growing_over_http(&["--http".into(), older.to_string(), "--legacy".into()]),
    ];
    system(async move {
        listening(newest, || true).await;
        listening(older, || true).await;
        let ways = [
            (true, newest, true),
            (true, older, true),
            (true, older, false),
            (false, newest, true),
            (false, older, true),
        ];
        for (own, port, direct) in ways {
            let legacy = port == older;
            let ws = tempfile::tempdir().unwrap();
            let keys = format!("http_connection_per_thread = {own}\nhttp_direct_calls = {direct}\n");
            let (d, s) = net_session(ws.path(), port, &keys).await;
            // The first call goes over the shared connection while the thread's own opens.
            let shared = connection_of(&d, &s, 0).await;
            let mut seen = Vec::new();
            // Forty calls; with a connection of its own, more until the last ten came over
            // another than the shared one (the thread's own opens in the background: slowly
            // on a loaded machine), within half a minute.
            for nth in 1..=1200 {
                tokio::time::sleep(Duration::from_millis(25)).await;
                seen.push(connection_of(&d, &s, nth).await);
                if seen.len() >= 40 && (!own || seen.iter().rev().take(10).all(|c| *c != shared)) {
                    break;
                }
            }
            if own {
                let later = seen.last().unwrap().clone();
                assert_ne!(later, shared, "the thread's own connection serves its calls: {seen:?}");
                // Opened once, then kept: the last calls all came over it.
                assert!(seen.iter().rev().take(10).all(|c| *c == later), "{seen:?}");
                // A call's progress comes back over the thread's connection too.
                let ev = round(&d, &s, &[("net__counted", json!({"steps": 3}))]).await;
                let text = &results(&ev)[0].content;
                assert!(text.contains(&format!("counted 3 over connection {later}")), "{text}");
                // On the older revisions posted straight from the session's thread, not
                // through rmcp's worker (whose request ids are numbers), unless turned off.
                assert_eq!(text.contains("as request 'toolslot-"), legacy && direct, "{text}");
                let progress = ev.iter().filter(|e| matches!(e, PipelineEvent::Progress { .. })).count();
                assert!(progress >= 2, "progress over the thread's own connection: {ev:?}");
                // A call posted straight is cancelled at the server when its round is.
                waited_and_cancelled(&d, &s, ws.path()).await;
            } else {
                assert!(seen.iter().all(|c| *c == shared), "every call over the shared connection: {seen:?}");
            }
        }
    });
}

#[test]
fn a_call_after_the_server_forgot_its_session_goes_in_a_new_one() {
    // Posted straight, a call meets the 404 of a server started again: it never ran there,
    // so it goes again (through rmcp, which opens a new session) rather than end unknown.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let args = ["--http".to_string(), port.to_string(), "--legacy".into()];
    let mut server = growing_over_http(&args);
    system(async move {
        listening(port, || true).await;
        let ws = tempfile::tempdir().unwrap();
        let (d, s) = net_session(ws.path(), port, "").await;
        let mut posted = false;
        // Until the thread's own connection (opened in the background) takes the calls.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        for steps in 1.. {
            if std::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
            let ev = round(&d, &s, &[("net__counted", json!({"steps": steps}))]).await;
            if results(&ev)[0].content.contains("as request 'toolslot-") {
                posted = true;
                break;
            }
        }
        assert!(posted, "no call was posted straight");
        drop(server);
        server = growing_over_http(&args);
        listening(port, || true).await;
        // Not read-only: a call that could have acted is never sent twice, so it runs only
        // because the 404 says it never ran.
        let ev = round(&d, &s, &[("net__counted", json!({"steps": 99}))]).await;
        let result = &results(&ev)[0];
        assert!(!result.is_error && result.content.contains("counted 99"), "{}", result.content);
        // Again, with a call that is then cancelled: the cancellation reaches the request as
        // sent again, not the one the server never saw.
        drop(server);
        server = growing_over_http(&args);
        listening(port, || true).await;
        waited_and_cancelled(&d, &s, ws.path()).await;
        drop(server);
    });
}

/// Loads a config of one `[[mcp.servers]]` table (listings not kept).
fn one_server(ws: &std::path::Path, table: &str) -> Arc<Config> {
    let file = ws.join("one.toml");
    let toml = format!("[approval]\nmode = \"full-auto\"\n[mcp]\ntool_cache_dir = \"\"\n[[mcp.servers]]\n{table}\n");
    std::fs::write(&file, toml).unwrap();
    Arc::new(Config::load_with_env(Some(&file), std::iter::empty()).unwrap())
}

#[test]
fn an_https_server_is_reached_with_its_certificate_checked() {
    let ws = tempfile::tempdir().unwrap();
    let cert = ws.path().join("server-cert.pem");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _server = growing_over_http(&["--https".into(), port.to_string(), cert.display().to_string()]);
    system(async move {
        listening(port, || cert.is_file()).await;
        let url = format!("https://127.0.0.1:{port}/mcp");
        // Not trusted: the certificate is refused, and the reason says so.
        let cfg = one_server(ws.path(), &format!("name = \"tls\"\nurl = \"{url}\"\nrequired = true"));
        let err = build_toolset(cfg, None)
            .await
            .err()
            .expect("an untrusted certificate must not connect");
        assert!(err.contains("tls") && err.to_lowercase().contains("certificate"), "{err}");

        // Trusted through ca_cert: listed, called, and list_changed followed over HTTP.
        let table = format!(
            "name = \"tls\"\nurl = \"{url}\"\nrequired = true\ndefer = false\nca_cert = \"{}\"",
            cert.display()
        );
        let cfg = one_server(ws.path(), &table);
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
        let s = d.open_session(SessionOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..Default::default()
        });
        let ev = round(&d, &s, &[("tls__add_tool", json!({"name": "secure", "reply": "over tls"}))]).await;
        assert!(results(&ev)[0].content.contains("added secure"), "{}", results(&ev)[0].content);
        wait_for_tool(&toolset, "tls__secure").await;
        let ev = round(&d, &s, &[("tls__secure", json!({}))]).await;
        assert!(results(&ev)[0].content.contains("over tls"), "{}", results(&ev)[0].content);
    });
}

#[test]
fn bad_urls_and_certificates_are_named() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        let cfg = one_server(ws.path(), "name = \"odd\"\nurl = \"ftp://127.0.0.1/mcp\"");
        let toolset = build_toolset(cfg, None).await.unwrap();
        assert!(
            toolset
                .notices
                .iter()
                .any(|n| n.message.contains("must start with http:// or https://")),
            "{:?}",
            toolset.notices
        );
        let missing = ws.path().join("no-such.pem");
        let table = format!(
            "name = \"odd\"\nurl = \"https://127.0.0.1:1/mcp\"\nca_cert = \"{}\"",
            missing.display()
        );
        let toolset = build_toolset(one_server(ws.path(), &table), None).await.unwrap();
        assert!(
            toolset
                .notices
                .iter()
                .any(|n| n.message.contains("cannot read ca_cert") && n.message.contains("no-such.pem")),
            "{:?}",
            toolset.notices
        );
        let empty = ws.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let table = format!(
            "name = \"odd\"\nurl = \"https://127.0.0.1:1/mcp\"\nca_cert = \"{}\"",
            empty.display()
        );
        let toolset = build_toolset(one_server(ws.path(), &table), None).await.unwrap();
        assert!(
            toolset.notices.iter().any(|n| n.message.contains("holds no PEM certificate")),
            "{:?}",
            toolset.notices
        );
    });
}

/// Waits (up to five seconds) for a tool a server announced to reach the registry.
async fn wait_for_tool(toolset: &toolslot_actors::Toolset, name: &str) {
    for _ in 0..2400 {
        if toolset.registry.current().get(name).is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The growing fixture server (tests/data/growing_mcp_server.py) as a `[[mcp.servers]]` table.
fn growing_server(extra: &str) -> String {
    let d = deps();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/growing_mcp_server.py");
    format!(
        "[[mcp.servers]]\nname = \"growing\"\ncommand = [\"{}\", \"{}\"]\n{extra}\n",
        d.join("venv/bin/python").display(),
        script.display()
    )
}

#[test]
fn tools_a_server_adds_later_are_appended_to_the_catalog() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        let cfg = config(&growing_server("defer = false"), ws.path());
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        assert!(toolset.notices.is_empty(), "{:?}", toolset.notices);
        let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
        let s = d.open_session(SessionOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..Default::default()
        });
        let before = d.catalog(&s).unwrap();
        assert!(before.contains("growing__add_tool") && !before.contains("growing__greet"));
        let generation = toolset.registry.current().generation();

        let ev = round(&d, &s, &[("growing__add_tool", json!({"name": "greet", "reply": "hello there"}))]).await;
        assert!(results(&ev)[0].content.contains("added greet"), "{}", results(&ev)[0].content);
        // The notification is handled on the server's actor; wait for the next generation.
        wait_for_tool(&toolset, "growing__greet").await;
        let grown = toolset.registry.current();
        assert!(grown.get("growing__greet").is_some(), "list_changed was not followed");
        assert!(grown.generation() > generation);

        // The session's catalog: the same bytes, then the new tool, never sorted in.
        let after = d.catalog(&s).unwrap();
        assert_eq!(after.visible_names().last().map(String::as_str), Some("growing__greet"));
        for format in [
            toolslot::registry::CatalogFormat::Anthropic,
            toolslot::registry::CatalogFormat::OpenAi,
        ] {
            let (b, a) = (before.render(format), after.render(format));
            assert!(a.as_bytes().starts_with(&b.as_bytes()[..b.len() - 1]), "the cached prefix changed");
        }
        // The next submission announces it, and the new tool works like any other.
        let ev = round(&d, &s, &[("growing__greet", json!({}))]).await;
        let announced = ev.iter().any(|e| {
            matches!(e, PipelineEvent::Notice(n) if n.kind == toolslot::notice::NoticeKind::ToolsAdded && n.message.contains("growing__greet"))
        });
        assert!(announced, "{ev:?}");
        let r = &results(&ev)[0];
        assert!(!r.is_error && r.content.contains("hello there"), "{}", r.content);
        // A session opened now sees it too, after the resident block.
        let fresh = d.open_session(SessionOptions::default());
        assert_eq!(
            d.catalog(&fresh).unwrap().visible_names().last().map(String::as_str),
            Some("growing__greet")
        );
    });
}

#[test]
fn an_optional_server_with_a_kept_listing_starts_on_first_use() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        // First run: nothing kept, so the server starts to list its tools, and the listing
        // is kept.
        let cfg = config(&growing_server(""), ws.path());
        let first = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        let growing = first.mcp.iter().find(|h| h.name() == "growing").unwrap().clone();
        assert_eq!(growing.status().await, toolslot_actors::sources::mcp::ServerState::Ready);
        let kept: Vec<String> = std::fs::read_dir(ws.path().join(".mcp_tools"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(kept.iter().any(|f| f.starts_with("growing-") && f.ends_with(".json")), "{kept:?}");
        drop(first);

        // Second run: the kept listing gives the tools; nothing is started yet.
        let toolset = build_toolset(Arc::clone(&cfg), None).await.unwrap();
        let growing = toolset.mcp.iter().find(|h| h.name() == "growing").unwrap().clone();
        assert_eq!(growing.status().await, toolslot_actors::sources::mcp::ServerState::Idle);
        assert!(toolset.registry.current().get("growing__add_tool").is_some());
        let everything = toolset.mcp.iter().find(|h| h.name() == "everything").unwrap().clone();
        assert_eq!(everything.status().await, toolslot_actors::sources::mcp::ServerState::Idle);

        // The first call starts it.
        let d = toolset.attach(Dispatcher::new(Arc::clone(&cfg), toolset.registry.clone()));
        let s = d.open_session(SessionOptions {
            workspace: Some(ws.path().to_path_buf()),
            ..Default::default()
        });
        round(&d, &s, &[("tool_search", json!({"query": "add a tool"}))]).await;
        let ev = round(&d, &s, &[("growing__add_tool", json!({"name": "wave", "reply": "hi"}))]).await;
        assert!(results(&ev)[0].content.contains("added wave"), "{}", results(&ev)[0].content);
        assert_eq!(growing.status().await, toolslot_actors::sources::mcp::ServerState::Ready);
        assert_eq!(
            everything.status().await,
            toolslot_actors::sources::mcp::ServerState::Idle,
            "unused servers stay down"
        );

        // A changed command makes the kept listing worthless: that server starts at start-up.
        let moved = config(&growing_server("env = { GROWING = \"2\" }"), ws.path());
        let toolset = build_toolset(moved, None).await.unwrap();
        let growing = toolset.mcp.iter().find(|h| h.name() == "growing").unwrap().clone();
        assert_eq!(growing.status().await, toolslot_actors::sources::mcp::ServerState::Ready);
    });
}

#[test]
fn a_required_server_always_starts_at_startup() {
    system(async {
        let ws = tempfile::tempdir().unwrap();
        let cfg = config(&growing_server("required = true"), ws.path());
        drop(build_toolset(Arc::clone(&cfg), None).await.unwrap());
        let toolset = build_toolset(cfg, None).await.unwrap();
        let growing = toolset.mcp.iter().find(|h| h.name() == "growing").unwrap().clone();
        assert_eq!(growing.status().await, toolslot_actors::sources::mcp::ServerState::Ready);
    });
}
