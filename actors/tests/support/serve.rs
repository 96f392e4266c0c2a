//! `toolslot serve` for a test: [`Serve`] writes a config around the test's own tables (a free
//! loopback port, a token, an overflow folder), starts the server and waits until it listens;
//! [`Served`] is the running server, killed when dropped; [`Client`] speaks HTTP/1.1 to it.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Proc, await_line, deps, free_port, openai_stream, repo, toolslot};

/// The bearer token of servers a test starts, unless it says otherwise.
pub const TOKEN: &str = "bounded-test-token";

/// A `toolslot serve` to start: where its config goes, the tables in it, its token and its
/// environment (the audit ledger off and no MCP tool cache, unless a test says otherwise).
pub struct Serve {
    own: Option<tempfile::TempDir>,
    dir: PathBuf,
    workspace: PathBuf,
    token: Option<String>,
    tables: String,
    server: String,
    env: Vec<(OsString, OsString)>,
}

impl Serve {
    /// In a temporary folder of its own, with an empty workspace `ws` in it.
    pub fn new() -> Serve {
        let own = tempfile::tempdir().unwrap();
        let workspace = own.path().join("ws");
        std::fs::create_dir(&workspace).unwrap();
        let mut serve = Serve::in_dir(own.path(), &workspace);
        serve.own = Some(own);
        serve
    }

    /// With its config and overflow folder in `dir`, and `workspace` as the test's workspace.
    pub fn in_dir(dir: &Path, workspace: &Path) -> Serve {
        Serve {
            own: None,
            dir: dir.to_path_buf(),
            workspace: workspace.to_path_buf(),
            token: Some(TOKEN.to_string()),
            tables: String::new(),
            server: String::new(),
            env: Vec::new(),
        }
    }

    /// The folder of its config and overflow.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The test's workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// No `server.token`: every request is let in, as on a laptop.
    pub fn no_token(mut self) -> Serve {
        self.token = None;
        self
    }

    /// Tables of the config (written before `[server]`).
    pub fn config(mut self, tables: &str) -> Serve {
        self.tables.push_str(tables);
        self.tables.push('\n');
        self
    }

    /// Keys of `[server]`, after its bind address and token.
    pub fn server(mut self, keys: &str) -> Serve {
        self.server.push_str(keys);
        self.server.push('\n');
        self
    }

    /// An environment variable of the server.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Serve {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The audit ledger kept in `dir`.
    pub fn ledger(self, dir: &Path) -> Serve {
        self.env("TOOLSLOT_AUDIT__LEDGER_DIR", dir)
    }

    /// Writes the config (`serve.toml` in its folder), starts the server and waits until it
    /// listens.
    pub fn start(self) -> Served {
        let addr = format!("127.0.0.1:{}", free_port());
        let token = self.token.as_deref().map(|t| format!("token = \"{t}\"\n")).unwrap_or_default();
        let config = self.dir.join("serve.toml");
        let text = format!(
            "{}\n[server]\nbind = \"{addr}\"\n{token}{}\n[overflow]\ndir = \"{}\"\n",
            self.tables,
            self.server,
            self.dir.join("overflow").display()
        );
        std::fs::write(&config, text).unwrap();
        let mut cmd = toolslot();
        cmd.envs(self.env);
        let mut served = Served::launch(cmd, &config, &addr, &[]);
        served.api.token = self.token;
        served.workspace = self.workspace;
        served.dir = self.dir;
        served._own = self.own;
        served
    }
}

/// A running `toolslot serve`, killed when dropped; requests go through its [`Client`].
pub struct Served {
    pub proc: Proc,
    pub api: Client,
    /// The test's workspace.
    pub workspace: PathBuf,
    /// The folder of its config and overflow.
    pub dir: PathBuf,
    _own: Option<tempfile::TempDir>,
}

impl Deref for Served {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.api
    }
}

impl Served {
    /// `toolslot serve` with `config`, written already, which binds `addr` and sets no token.
    pub fn at(config: &Path, addr: &str) -> Served {
        Served::launch(toolslot(), config, addr, &[])
    }

    /// As [`Served::at`], with more arguments after `serve --config FILE`
    /// (`--agent-response FILE`).
    pub fn at_with(config: &Path, addr: &str, args: &[&str]) -> Served {
        Served::launch(toolslot(), config, addr, args)
    }

    /// `node tests/console/{script}`, driving the console of this server in a real Chromium,
    /// given the session `id`.
    pub fn console(&self, script: &str, id: &str) -> Command {
        let mut node = Command::new("node");
        node.arg(repo().join("tests/console").join(script))
            .args([
                format!("http://{}", self.addr),
                self.token.clone().unwrap_or_default(),
                id.to_string(),
            ])
            .env(
                "PLAYWRIGHT_CORE_PATH",
                deps().join("node/node_modules/playwright-core/package.json"),
            );
        node
    }

    /// The same, started, once the page says it watches the session.
    pub fn console_watching(&self, script: &str, id: &str) -> Child {
        let mut node = self.console(script, id).stdout(Stdio::piped()).spawn().unwrap();
        let mut out = BufReader::new(node.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the page did not start watching the session");
        // The rest is read too, so that the page never writes to a closed or full pipe.
        std::thread::spawn(move || for _ in out.lines() {});
        node
    }

    fn launch(mut cmd: Command, config: &Path, addr: &str, args: &[&str]) -> Served {
        let child = cmd
            .env("TOOLSLOT_MCP__TOOL_CACHE_DIR", "")
            .args(["serve", "--config"])
            .arg(config)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut proc = Proc { child };
        await_line(&mut proc.child, "listening on", Duration::from_secs(60));
        let dir = config.parent().unwrap().to_path_buf();
        Served {
            proc,
            api: Client::new(addr),
            workspace: dir.clone(),
            dir,
            _own: None,
        }
    }
}

/// Requests to a server at `addr`, with its bearer token when it has one.
#[derive(Clone, Debug)]
pub struct Client {
    pub addr: String,
    pub token: Option<String>,
}

impl Client {
    /// A server at `addr` without a token.
    pub fn new(addr: &str) -> Client {
        Client {
            addr: addr.to_string(),
            token: None,
        }
    }

    /// One HTTP/1.1 request with exactly `headers` (and Content-Length and `Connection:
    /// close`): the status and the whole body, de-chunked.
    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        write!(s, "{head}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()).unwrap();
        s.write_all(body).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).to_string();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        (status, body)
    }

    /// A JSON request presenting `token`, if any.
    pub fn http_as(&self, token: Option<&str>, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Host", self.addr.as_str()), ("Content-Type", "application/json")];
        if let Some(a) = auth.as_deref() {
            headers.push(("Authorization", a));
        }
        self.request(method, path, &headers, body)
    }

    /// A JSON request with the server's token.
    pub fn http(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        self.http_as(self.token.as_deref(), method, path, body)
    }

    /// Opens a session described by `body`; its id.
    pub fn open(&self, body: &Value) -> String {
        let (status, text) = self.http("POST", "/v1/sessions", body.to_string().as_bytes());
        assert_eq!(status, 200, "{text}");
        serde_json::from_str::<Value>(&text).unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Opens a session on `ws` in approval mode `mode`.
    pub fn session_as(&self, ws: &Path, mode: &str) -> String {
        self.open(&json!({"workspace": ws, "approval_mode": mode}))
    }

    /// Opens a full-auto session on `ws`.
    pub fn session(&self, ws: &Path) -> String {
        self.session_as(ws, "full-auto")
    }

    /// Runs one round calling `calls` in `session`; its results.
    pub fn round(&self, session: &str, calls: &[(&str, Value)]) -> Vec<Value> {
        let (status, sse) = self.http(
            "POST",
            &format!("/v1/sessions/{session}/rounds?dialect=openai-chat"),
            openai_stream(calls).as_bytes(),
        );
        assert_eq!(status, 200, "{sse}");
        let events: Vec<Value> = sse
            .split("\n\n")
            .filter_map(|f| f.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        let last = events.last().unwrap_or_else(|| panic!("no events: {sse}"));
        assert_eq!(last["type"], "round_complete", "{sse}");
        last["results"].as_array().unwrap().clone()
    }
}

/// One JSON request to a server at `addr` that has no token.
pub fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    Client::new(addr).http(method, path, body)
}

/// The events of an SSE body, every one of them JSON.
pub fn events(sse: &str) -> Vec<Value> {
    sse.split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// A chunked body joined.
pub fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
