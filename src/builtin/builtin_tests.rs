use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::config::Config;
use crate::output::OverflowStore;
use crate::registry::RegistryBuilder;
use crate::session::SessionMemory;
use crate::tool::{ErrorCategory, ToolContext, ToolOutput};

struct Ws {
    dir: tempfile::TempDir,
    ctx: ToolContext,
}

fn ws() -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Arc::new(Config::builtin());
    let registry = Arc::new(RegistryBuilder::new(Arc::clone(&cfg)).extend(super::enabled(&cfg)).build());
    let store = Arc::new(OverflowStore::new(dir.path().join(".overflow")));
    let services = Arc::new(SessionMemory::new("s1".into(), registry, store));
    let ctx = ToolContext {
        session_id: "s1".into(),
        workspace: dir.path().to_path_buf(),
        call_id: "c".into(),
        index: 0,
        config: cfg,
        services,
        // The tools run here as approved calls; the read-only grant has its own tests.
        grant: crate::tool::Grant {
            write: true,
            network: false,
        },
    };
    Ws { dir, ctx }
}

impl Ws {
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn run(&self, tool: &dyn ToolSpec, input: Value) -> Result<ToolOutput, ToolError> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(tool.run(input, &self.ctx))
    }
}

#[test]
fn read_file_numbers_lines_and_pages() {
    let w = ws();
    std::fs::write(w.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    assert_eq!(
        w.run(&ReadFile, json!({"path": "a.txt"})).unwrap().content,
        "     1\tone\n     2\ttwo\n     3\tthree\n"
    );
    assert_eq!(
        w.run(&ReadFile, json!({"path": "a.txt", "offset": 1, "limit": 1})).unwrap().content,
        "     2\ttwo\n[1 more lines; read on with offset=2]\n"
    );
    let err = w.run(&ReadFile, json!({"path": "a.txt", "offset": 9})).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("offset"));
}

#[test]
fn read_file_refuses_binary_traversal_and_folders() {
    let w = ws();
    std::fs::write(w.path().join("b.bin"), [0u8, 1, 2, 3]).unwrap();
    let err = w.run(&ReadFile, json!({"path": "b.bin"})).unwrap_err();
    assert!(err.message.contains("binary"), "{}", err.message);
    let err = w.run(&ReadFile, json!({"path": "../etc/passwd"})).unwrap_err();
    assert!(err.message.contains("outside the workspace"));
    let err = w.run(&ReadFile, json!({"path": "/etc/passwd"})).unwrap_err();
    assert!(err.message.contains("outside the workspace"));
    std::fs::create_dir(w.path().join("d")).unwrap();
    assert!(w.run(&ReadFile, json!({"path": "d"})).unwrap_err().message.contains("directory"));
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("s"), "secret").unwrap();
    std::os::unix::fs::symlink(outside.path().join("s"), w.path().join("link")).unwrap();
    assert!(
        w.run(&ReadFile, json!({"path": "link"}))
            .unwrap_err()
            .message
            .contains("outside the workspace")
    );
}

#[test]
fn list_dir_is_sorted_and_depth_limited() {
    let w = ws();
    std::fs::create_dir_all(w.path().join("b/c/d")).unwrap();
    std::fs::write(w.path().join("a.txt"), "12345").unwrap();
    std::fs::write(w.path().join("b/x.rs"), "").unwrap();
    let out = w.run(&ListDir, json!({"depth": 2})).unwrap().content;
    assert_eq!(out, "file  a.txt  (5 bytes)\ndir   b/\ndir   b/c/\nfile  b/x.rs  (0 bytes)");
    let err = w.run(&ListDir, json!({"depth": 99})).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("depth"));
}

#[test]
fn grep_honors_gitignore_and_caps() {
    let w = ws();
    std::fs::write(w.path().join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir(w.path().join("target")).unwrap();
    std::fs::write(w.path().join("target/x.rs"), "fn needle() {}\n").unwrap();
    std::fs::write(w.path().join("lib.rs"), "// a\nfn needle() {}\n").unwrap();
    assert_eq!(
        w.run(&GrepFiles, json!({"pattern": "needle"})).unwrap().content,
        "lib.rs:2:fn needle() {}"
    );
    assert_eq!(
        w.run(&GrepFiles, json!({"pattern": "("})).unwrap_err().field.as_deref(),
        Some("pattern")
    );
}

#[test]
fn write_file_is_atomic_and_creates_folders() {
    let w = ws();
    let out = w.run(&WriteFile, json!({"path": "deep/new/f.txt", "content": "hello\n"})).unwrap();
    assert!(out.content.starts_with("Created"));
    assert_eq!(std::fs::read_to_string(w.path().join("deep/new/f.txt")).unwrap(), "hello\n");
    let leftovers: Vec<_> = std::fs::read_dir(w.path().join("deep/new")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temp file left behind");
    assert!(w.run(&WriteFile, json!({"path": "../x", "content": ""})).is_err());
    // A path that names a folder writes no file.
    let e = w.run(&WriteFile, json!({"path": "sub/", "content": "x"})).unwrap_err();
    assert_eq!(e.message, "`sub/` ends with `/`, so it names a folder; give the file's path");
    assert!(!w.path().join("sub").exists());
    let e = w.run(&WriteFile, json!({"path": ".", "content": "x"})).unwrap_err();
    assert_eq!(e.message, "`.` is a folder");
}

#[test]
fn edit_file_needs_a_fresh_read_and_a_unique_match() {
    let w = ws();
    let f = w.path().join("m.rs");
    std::fs::write(&f, "let a = 1;\nlet b = 1;\nlet c = 2;\n").unwrap();
    let edit = |search: &str, all: bool| {
        w.run(
            &EditFile,
            json!({"path": "m.rs", "search": search, "replace": "X", "replace_all": all}),
        )
    };
    // Never read: refused.
    assert!(edit("c = 2", false).unwrap_err().message.contains("has not been read"));
    // Read it (as the pipeline's read observer would record).
    let real = f.canonicalize().unwrap();
    w.ctx
        .services
        .record_file_state(&real, std::fs::metadata(&real).unwrap().modified().unwrap());
    let err = edit("= 1;", false).unwrap_err();
    assert!(
        err.message.contains("occurs 2 times") && err.message.contains("lines 1, 2"),
        "{}",
        err.message
    );
    assert!(edit("nope", false).unwrap_err().message.contains("not found"));
    assert!(edit("c = 2", false).is_ok());
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "let a = 1;\nlet b = 1;\nlet X;\n");
    // Consecutive edits work: the tool records what it wrote.
    assert!(edit("= 1;", true).is_ok());
    // Changed behind the session's back: refused.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&f, "changed\n").unwrap();
    assert!(edit("changed", false).unwrap_err().message.contains("changed since you read it"));
}

#[test]
fn exec_shell_reports_exit_code_and_stderr_apart() {
    let w = ws();
    let out = w
        .run(&ExecShell::new(&w.ctx.config), json!({"command": "echo out; echo err >&2; exit 3"}))
        .unwrap();
    assert_eq!(out.content, "out\n");
    assert!(out.is_error);
    assert_eq!(out.trailer.as_deref(), Some("[exit code: 3]\n[stderr]\nerr\n"));
}

#[test]
fn exec_shell_timeout_kills_the_whole_group() {
    let w = ws();
    let marker = w.path().join("survivor");
    // The background child would create the marker after 1 s if it survived the kill.
    let cmd = format!("(sleep 1 && touch {}) & sleep 5", marker.display());
    let err = w
        .run(&ExecShell::new(&w.ctx.config), json!({"command": cmd, "timeout_ms": 200}))
        .unwrap_err();
    assert_eq!(err.category, ErrorCategory::Timeout);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(!marker.exists(), "a process of the group survived the timeout");
}

#[test]
fn exec_shell_approval_depends_on_the_command() {
    use crate::config::NetworkPolicy;
    use crate::tool::ApprovalRequirement;
    let sandboxed = ExecShell::new(&Config::builtin());
    assert!(sandboxed.session_notice().is_none(), "this machine has a sandbox");
    assert_eq!(
        sandboxed.approval_requirement_for_input(&json!({"command": "git status"}), NetworkPolicy::Prompt),
        ApprovalRequirement::Auto
    );
    assert_eq!(
        sandboxed.approval_requirement_for_input(&json!({"command": "rm -rf /"}), NetworkPolicy::Prompt),
        ApprovalRequirement::Required
    );
    // Without a sandbox nothing runs unasked, and the session is told why.
    let mut cfg = Config::builtin();
    cfg.shell.sandbox = crate::config::SandboxMode::None;
    let bare = ExecShell::new(&cfg);
    assert!(bare.session_notice().is_some_and(|n| n.contains("asks before every command")));
    assert_eq!(
        bare.approval_requirement_for_input(&json!({"command": "ls"}), NetworkPolicy::Prompt),
        ApprovalRequirement::Required
    );
}

#[test]
fn retrieve_reads_only_this_sessions_outputs() {
    let w = ws();
    let store = OverflowStore::new(w.path().join(".overflow"));
    let id = store.save("s1", "l1\nl2\nerror: boom\nl4\n").unwrap();
    let foreign = store.save("s2", "other").unwrap();
    let out = w
        .run(
            &RetrieveToolResult,
            json!({"ref": id, "mode": "grep", "pattern": "error", "context": 0}),
        )
        .unwrap();
    assert_eq!(out.content, "     3\terror: boom\n");
    let err = w.run(&RetrieveToolResult, json!({"ref": foreign})).unwrap_err();
    assert!(err.message.contains("another session"), "{}", err.message);
    assert!(w.run(&RetrieveToolResult, json!({"ref": "../../x"})).is_err());
}

#[test]
fn tool_search_activates_deferred_tools() {
    let w = ws();
    let err = w.run(&ToolSearch, json!({"query": "x"})).unwrap_err();
    assert_eq!(err.category, ErrorCategory::Unavailable, "no deferred tools among the built-ins");
    // A query over search.max_query_chars is refused as bad input, naming its length.
    let err = w.run(&ToolSearch, json!({"query": "é".repeat(1001)})).unwrap_err();
    assert_eq!(err.category, ErrorCategory::InvalidInput, "{}", err.message);
    assert!(err.message.contains("1001 characters"), "{}", err.message);
}

mod fetch {
    use std::io::{Read, Write};
    use std::net::{IpAddr, TcpListener};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::future::BoxFuture;

    use super::*;
    use crate::builtin::{FetchUrl, Resolve};

    /// A loopback-only HTTP server with a few routes; counts the connections it accepted.
    struct Server {
        port: u16,
        hits: Arc<AtomicUsize>,
    }

    fn server() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                h.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let n = s.read(&mut buf).unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = req.split_whitespace().nth(1).unwrap_or("/").to_string();
                let (status, headers, body) = match path.as_str() {
                    "/page" => (
                        "200 OK",
                        "Content-Type: text/html\r\n".to_string(),
                        "<html><body><h1>Hello</h1><p>from a page</p></body></html>".to_string(),
                    ),
                    "/to-metadata" => (
                        "302 Found",
                        "Location: http://169.254.169.254/latest/meta-data/\r\n".to_string(),
                        String::new(),
                    ),
                    "/to-page" => ("302 Found", "Location: /page\r\n".to_string(), String::new()),
                    "/big" => ("200 OK", "Content-Type: text/plain\r\n".to_string(), "x".repeat(100_000)),
                    _ => ("404 Not Found", String::new(), "nope".to_string()),
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Server { port, hits }
    }

    /// A resolver that answers from a fixed table and never asks the network.
    struct Table(Vec<(&'static str, IpAddr)>);
    impl Resolve for Table {
        fn resolve<'a>(&'a self, host: &'a str, _port: u16) -> BoxFuture<'a, std::io::Result<Vec<IpAddr>>> {
            let found: Vec<IpAddr> = self.0.iter().filter(|(h, _)| *h == host).map(|(_, ip)| *ip).collect();
            Box::pin(async move {
                if found.is_empty() {
                    Err(std::io::Error::other("not in the test table"))
                } else {
                    Ok(found)
                }
            })
        }
    }

    fn ctx_allowing(allow: &str) -> Ws {
        let mut w = ws();
        let env = vec![
            ("TOOLSLOT_NETWORK__ALLOW_HOSTS".to_string(), allow.to_string()),
            ("TOOLSLOT_FETCH_URL__MAX_BYTES".to_string(), "1000".to_string()),
        ];
        w.ctx.config = Arc::new(Config::load_with_env(None, env).unwrap());
        w
    }

    fn tool() -> FetchUrl {
        FetchUrl::with_resolver(Arc::new(Table(vec![
            ("evil.test", "10.0.0.1".parse().unwrap()),
            ("split.test", "127.0.0.1".parse().unwrap()),
            ("split.test", "169.254.169.254".parse().unwrap()),
            ("local.test", "127.0.0.1".parse().unwrap()),
        ])))
    }

    #[test]
    fn loopback_is_refused_without_the_allow_list_and_never_contacted() {
        let s = server();
        let w = ws();
        for url in [
            format!("http://127.0.0.1:{}/page", s.port),
            format!("http://2130706433:{}/page", s.port),
            format!("http://0x7f000001:{}/page", s.port),
            format!("http://[::ffff:127.0.0.1]:{}/page", s.port),
        ] {
            let err = w.run(&tool(), json!({"url": url})).unwrap_err();
            assert_eq!(err.field.as_deref(), Some("url"), "{url}");
            assert!(err.message.contains("loopback"), "{url}: {}", err.message);
        }
        assert_eq!(s.hits.load(Ordering::SeqCst), 0, "nothing was sent");
    }

    #[test]
    fn the_allow_list_opens_loopback_and_html_becomes_text() {
        let s = server();
        let w = ctx_allowing("127.0.0.1");
        let out = w.run(&tool(), json!({"url": format!("http://127.0.0.1:{}/page", s.port)})).unwrap();
        assert!(out.content.ends_with("Hello\n\nfrom a page"), "{}", out.content);
        // A redirect inside the allowed host is followed and checked again.
        let out = w
            .run(&tool(), json!({"url": format!("http://127.0.0.1:{}/to-page", s.port)}))
            .unwrap();
        assert!(out.content.contains("Hello"));
        // Bodies are capped.
        let out = w.run(&tool(), json!({"url": format!("http://127.0.0.1:{}/big", s.port)})).unwrap();
        assert!(out.content.contains("[body cut at 1000 bytes]"));
        let out = w
            .run(&tool(), json!({"url": format!("http://127.0.0.1:{}/missing", s.port)}))
            .unwrap();
        assert!(out.is_error);
    }

    #[test]
    fn a_redirect_to_the_metadata_address_is_refused_before_connecting() {
        let s = server();
        let w = ctx_allowing("127.0.0.1");
        let err = w
            .run(&tool(), json!({"url": format!("http://127.0.0.1:{}/to-metadata", s.port)}))
            .unwrap_err();
        assert!(
            err.message.contains("169.254.169.254") && err.message.contains("link-local"),
            "{}",
            err.message
        );
    }

    #[test]
    fn names_resolving_to_private_addresses_are_refused() {
        let w = ws();
        let err = w.run(&tool(), json!({"url": "http://evil.test/"})).unwrap_err();
        assert!(
            err.message.contains("10.0.0.1") && err.message.contains("private"),
            "{}",
            err.message
        );
        // One bad record among several is enough to refuse.
        let w = ctx_allowing("127.0.0.1");
        let err = w.run(&tool(), json!({"url": "http://split.test/"})).unwrap_err();
        assert!(err.message.contains("169.254.169.254"), "{}", err.message);
    }

    #[test]
    fn a_name_on_the_allow_list_connects_to_the_checked_address() {
        let s = server();
        let w = ctx_allowing("local.test");
        let out = w
            .run(&tool(), json!({"url": format!("http://local.test:{}/page", s.port)}))
            .unwrap();
        assert!(out.content.contains("Hello"));
        assert_eq!(s.hits.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn other_schemes_are_refused() {
        let w = ws();
        for url in ["file:///etc/passwd", "ftp://example.com/", "gopher://x/", "not a url"] {
            assert_eq!(
                w.run(&tool(), json!({"url": url})).unwrap_err().field.as_deref(),
                Some("url"),
                "{url}"
            );
        }
    }

    #[test]
    fn approval_key_is_the_host() {
        assert_eq!(tool().approval_key(&json!({"url": "https://docs.rs/a/b?c"})), "fetch_url:docs.rs");
    }
}

#[test]
fn a_value_of_the_wrong_type_is_named_by_its_field() {
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Args {
        path: String,
        offset: Option<usize>,
    }
    let e = parse_input::<Args>(serde_json::json!({"path": "a", "offset": 1e23})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("offset"), "{e:?}");
    assert!(
        e.message.starts_with("invalid arguments: `offset`: invalid type: floating point"),
        "{}",
        e.message
    );
    let e = parse_input::<Args>(serde_json::json!({"offset": 1})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("path"), "{e:?}");
    assert_eq!(e.message, "invalid arguments: missing field `path`");
}

#[test]
fn edit_file_matches_across_the_lines_of_a_crlf_file() {
    let w = ws();
    let f = w.path().join("win.txt");
    std::fs::write(&f, "one\r\ntwo\r\nthree\r\n").unwrap();
    // read_file shows it without its carriage returns, so that is what a model copies.
    let shown = w.run(&ReadFile, json!({"path": "win.txt"})).unwrap().content;
    assert!(!shown.contains('\r'), "{shown:?}");
    let seen = |name: &str| {
        // As the pipeline's read observer records a read.
        let real = w.path().join(name).canonicalize().unwrap();
        let modified = std::fs::metadata(&real).unwrap().modified().unwrap();
        w.ctx.services.record_file_state(&real, modified);
    };
    seen("win.txt");
    let out = w
        .run(&EditFile, json!({"path": "win.txt", "search": "one\ntwo", "replace": "1\n2\n2b"}))
        .unwrap();
    assert_eq!(out.content, "Edited `win.txt`: 1 replacement(s).");
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "1\r\n2\r\n2b\r\nthree\r\n",
        "the file keeps its line endings"
    );
    // A file with bare newlines is matched as given.
    std::fs::write(w.path().join("unix.txt"), "a\nb\n").unwrap();
    seen("unix.txt");
    w.run(&EditFile, json!({"path": "unix.txt", "search": "a\nb", "replace": "c\nd"}))
        .unwrap();
    assert_eq!(std::fs::read_to_string(w.path().join("unix.txt")).unwrap(), "c\nd\n");
}

#[test]
fn a_command_with_a_nul_byte_is_invalid_before_anyone_is_asked() {
    let shell = ExecShell::new(&Config::builtin());
    let e = shell.check_input(&json!({"command": "echo a\u{0}b"})).unwrap_err();
    assert_eq!((e.category, e.field.as_deref()), (ErrorCategory::InvalidInput, Some("command")));
    assert!(!e.started);
    assert!(shell.check_input(&json!({"command": "echo ab"})).is_ok());
}
