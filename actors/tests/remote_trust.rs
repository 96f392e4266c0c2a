//! The bus as a trust boundary, against a real nats-server and real `toolslot worker`s: every
//! way of logging in, the least-privilege accounts of `examples/nats/`, and the signatures that
//! keep a client on the bus from running a call or answering one.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::json;
use support::nats::*;
use support::{repo, toolslot};
use toolslot::remote::seal::{Domain, Sealer};
use toolslot::remote::wire::CallRecord;
use toolslot::remote::wire::Job;
use toolslot::tool::Grant;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn shell(command: &str) -> (&'static str, serde_json::Value) {
    ("exec_shell", json!({ "command": command }))
}

/// A private file holding `text`.
fn private_file(path: &Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.to_path_buf()
}

/// The keys of a signing dispatcher and its workers, and sealers that sign as each.
struct Keys {
    dispatcher: nkeys::KeyPair,
    workers: Vec<nkeys::KeyPair>,
}

impl Keys {
    fn new(workers: usize) -> Keys {
        Keys {
            dispatcher: nkeys::KeyPair::new_user(),
            workers: (0..workers).map(|_| nkeys::KeyPair::new_user()).collect(),
        }
    }

    /// `[remote]` lines, written into `dir`, for the dispatcher and worker `n`.
    fn lines(&self, dir: &Path, n: usize) -> String {
        let trusted: Vec<&nkeys::KeyPair> = self.workers.iter().collect();
        signing_lines(dir, &self.dispatcher, &self.workers[n], &trusted)
    }

    /// A sealer signing with `pair`, trusting what this dispatcher and these workers sign.
    fn signing_as(&self, pair: &nkeys::KeyPair) -> Sealer {
        let trusted: Vec<String> = self.workers.iter().map(|k| format!("*.* = {}", k.public_key())).collect();
        Sealer::new(Some(&pair.seed().unwrap()), &self.dispatcher.public_key(), &trusted).unwrap()
    }
}

/// A key nobody trusts, as a sealer.
fn stranger(keys: &Keys) -> Sealer {
    keys.signing_as(&nkeys::KeyPair::new_user())
}

/// Runs `cmd`, which is expected to end (refused) within `secs`; a command still running then
/// (it logged in after all) is killed and the test fails.
fn ends_within(cmd: &mut Command, secs: u64) -> Output {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("still running after {secs} s: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// `toolslot worker` of pool `shell` with `config` and `env`, expected to be refused: its one
/// line of error.
fn refused_worker(config: &Path, env: &[(&str, &str)]) -> String {
    let out = ends_within(
        toolslot()
            .args(["worker", "--pool", "shell", "--config"])
            .arg(config)
            .env_remove("TS_NATS_PASSWORD")
            .envs(env.iter().copied()),
        30,
    );
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA.
fn certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(
        dir,
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=toolslot test CA"],
        ]
        .concat(),
    );
    for (name, usage) in [
        ("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), usage).unwrap();
        openssl(
            dir,
            &[
                &["req", "-new"][..],
                &ec,
                &[
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                    "-subj",
                    &format!("/CN={name}"),
                ],
            ]
            .concat(),
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &format!("{name}.ext"),
                "-out",
                &format!("{name}.pem"),
            ],
        );
    }
}

/// `bytes` in unpadded URL-safe base64, as JWTs carry their parts.
fn base64url(bytes: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// A NATS JWT about `subject`, signed by `issuer`, with `nats` as its NATS claims.
fn jwt(issuer: &nkeys::KeyPair, subject: &str, nats: serde_json::Value) -> String {
    let header = base64url(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims = json!({"jti": format!("T{now}{}", &subject[..8]), "iat": now, "iss": issuer.public_key(), "sub": subject, "name": "toolslot-test", "nats": nats});
    let body = format!("{header}.{}", base64url(claims.to_string().as_bytes()));
    let signature = base64url(&issuer.sign(body.as_bytes()).unwrap());
    format!("{body}.{signature}")
}

/// An operator-mode server config (the account preloaded, JetStream allowed) and a credentials
/// file for a user of that account, as `nsc` would make them.
fn decentralized(dir: &Path) -> (PathBuf, PathBuf) {
    let (operator, account, user) = (
        nkeys::KeyPair::new_operator(),
        nkeys::KeyPair::new_account(),
        nkeys::KeyPair::new_user(),
    );
    let op = jwt(&operator, &operator.public_key(), json!({"type": "operator", "version": 2}));
    let unlimited = json!({"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": true, "conn": -1, "leaf": -1,
        "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1});
    let acc = jwt(
        &operator,
        &account.public_key(),
        json!({"type": "account", "version": 2, "limits": unlimited}),
    );
    let usr = jwt(
        &account,
        &user.public_key(),
        json!({"type": "user", "version": 2, "subs": -1, "data": -1, "payload": -1, "pub": {}, "sub": {}}),
    );
    let conf = dir.join("operator.conf");
    // JetStream in operator mode needs a system account.
    let system = nkeys::KeyPair::new_account();
    let sys = jwt(&operator, &system.public_key(), json!({"type": "account", "version": 2}));
    std::fs::write(
        &conf,
        format!(
            "operator: {op}\nsystem_account: {0}\nresolver: MEMORY\nresolver_preload: {{\n  {0}: {sys}\n  {1}: {acc}\n}}\n",
            system.public_key(),
            account.public_key()
        ),
    )
    .unwrap();
    let creds = private_file(
        &dir.join("user.creds"),
        &format!(
            "-----BEGIN NATS USER JWT-----\n{usr}\n------END NATS USER JWT------\n\n************************* IMPORTANT *************************\nNKEY Seed printed below can be used to sign and prove identity.\n\n-----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().unwrap()
        ),
    );
    (conf, creds)
}

#[test]
fn every_login_form_reaches_a_server_that_requires_it() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An nkey pair, as `nk -gen user -pubout` would make it.
    let pair = nkeys::KeyPair::new_user();
    let seed = private_file(&d.join("user.nk"), &format!("{}\n", pair.seed().unwrap()));
    std::fs::write(
        d.join("nkey.conf"),
        format!("authorization {{ users = [ {{ nkey: \"{}\" }} ] }}\n", pair.public_key()),
    )
    .unwrap();
    certificates(d);
    std::fs::write(
        d.join("tls.conf"),
        format!(
            "tls {{ cert_file: \"{0}/server.pem\", key_file: \"{0}/server.key\", ca_file: \"{0}/ca.pem\", verify: true }}\n",
            d.display()
        ),
    )
    .unwrap();
    let tls = format!(
        "tls_ca_file = \"{0}/ca.pem\"\ntls_cert_file = \"{0}/client.pem\"\ntls_key_file = \"{0}/client.key\"\ntls_required = true",
        d.display()
    );
    let nkey_conf = format!("{}/nkey.conf", d.display());
    let tls_conf = format!("{}/tls.conf", d.display());
    let (operator_conf, creds) = decentralized(d);
    let operator_conf = operator_conf.display().to_string();
    // (form, server arguments, `[remote]` lines, the variable the worker is given)
    let forms = [
        (
            "user and password",
            vec!["--user", "toolslot", "--pass", "pass-7c1e"],
            "user = \"toolslot\"\npassword_env = \"TS_NATS_PASSWORD\"".to_string(),
            ("TS_NATS_PASSWORD", "pass-7c1e"),
        ),
        (
            "token",
            vec!["--auth", "token-90af"],
            "token_env = \"TS_NATS_TOKEN\"".to_string(),
            ("TS_NATS_TOKEN", "token-90af"),
        ),
        (
            "nkey",
            vec!["-c", &nkey_conf],
            format!("nkey_seed_file = \"{}\"", seed.display()),
            ("UNUSED", ""),
        ),
        ("TLS client certificate", vec!["-c", &tls_conf], tls.clone(), ("UNUSED", "")),
        (
            "credentials file",
            vec!["-c", &operator_conf],
            format!("credentials_file = \"{}\"", creds.display()),
            ("UNUSED", ""),
        ),
    ];
    for (form, server, remote, env) in forms {
        let nats = Nats::start_with(&server, &[]);
        let wdir = d.join(form.replace(' ', "-"));
        std::fs::create_dir_all(&wdir).unwrap();
        // Without the credential the server refuses the worker...
        let bare = write_config(&wdir, &nats, SHELL_ROUTES, "auto", "");
        let err = refused_worker(&bare, &[]);
        assert!(err.contains("cannot reach NATS"), "{form}: {err}");
        // ...and with it, the worker logs in, opens JetStream and announces itself.
        let config = write_config_with(&wdir, &nats, SHELL_ROUTES, "auto", "", &remote);
        let _w = worker(&config, "shell", &[env]);
        drop(nats);
    }
}

#[test]
fn a_refused_login_is_one_line_naming_the_keys_and_never_the_secret() {
    let _one = serial();
    let nats = Nats::start_with(&["--user", "toolslot", "--pass", "right-b7d2"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let remote = "user = \"toolslot\"\npassword_env = \"TS_NATS_PASSWORD\"";
    let config = write_config_with(dir.path(), &nats, SHELL_ROUTES, "auto", "", remote);
    let wrong = "wrong-horse-battery-4711";
    for args in [vec!["worker", "--pool", "shell"], vec!["catalog"]] {
        let out = ends_within(
            toolslot().args(&args).arg("--config").arg(&config).env("TS_NATS_PASSWORD", wrong),
            30,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("authorization violation") && err.contains("$TS_NATS_PASSWORD"),
            "{err}"
        );
        assert!(!err.contains(wrong) && !err.contains("right-b7d2"), "no secret in: {err}");
    }
    // The variable unset: named, with the key that names it.
    let err = refused_worker(&config, &[]);
    assert!(
        err.contains("remote.password_env `TS_NATS_PASSWORD`") && err.contains("not set"),
        "{err}"
    );
    // A password in the URL is masked.
    let url_dir = dir.path().join("url");
    std::fs::create_dir_all(&url_dir).unwrap();
    let in_url = write_config(&url_dir, &nats, SHELL_ROUTES, "auto", "");
    let text = std::fs::read_to_string(&in_url).unwrap();
    std::fs::write(
        &in_url,
        text.replace("nats://127.0.0.1", &format!("nats://toolslot:{wrong}@127.0.0.1")),
    )
    .unwrap();
    let err = refused_worker(&in_url, &[]);
    assert!(err.contains("nats://toolslot:***@127.0.0.1") && !err.contains(wrong), "{err}");
    // Files that do not hold what their key says: the key and the file are named, not the text.
    let bad = private_file(&dir.path().join("bad.creds"), &format!("-----BEGIN NATS USER JWT-----\n{wrong}\n"));
    for (key, lines) in [
        ("remote.nkey_seed_file", format!("nkey_seed_file = \"{}\"", bad.display())),
        ("remote.credentials_file", format!("credentials_file = \"{}\"", bad.display())),
    ] {
        let d = dir.path().join(key);
        std::fs::create_dir_all(&d).unwrap();
        let err = refused_worker(&write_config_with(&d, &nats, SHELL_ROUTES, "auto", "", &lines), &[]);
        assert!(err.contains(key) && err.contains(&bad.display().to_string()), "{err}");
        assert!(!err.contains(wrong), "{err}");
    }
    // Two ways at once, or half of one: refused before anything is read.
    let both = dir.path().join("both");
    std::fs::create_dir_all(&both).unwrap();
    let two = format!("{remote}\ntoken_env = \"TS_NATS_TOKEN\"");
    let out = ends_within(
        toolslot()
            .args(["worker", "--pool", "shell", "--config"])
            .arg(write_config_with(&both, &nats, SHELL_ROUTES, "auto", "", &two)),
        30,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("remote.user / remote.token_env"), "{err}");
}

/// A client with `user`'s password that records what the server refuses it.
async fn client_as(url: &str, user: &str, password: &str) -> (async_nats::Client, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let client = async_nats::ConnectOptions::with_user_and_password(user.into(), password.into())
        .event_callback(move |event| {
            let tx = tx.clone();
            async move {
                if let async_nats::Event::ServerError(e) = event {
                    let _ = tx.send(e.to_string().to_lowercase());
                }
            }
        })
        .connect(url)
        .await
        .unwrap();
    (client, rx)
}

async fn refusal(refused: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(10), refused.recv())
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

#[test]
fn the_example_accounts_confine_a_worker_to_its_pool() {
    let _one = serial();
    let conf = repo().join("examples/nats/accounts.conf");
    let (dispatcher_pw, worker_pw) = ("dispatcher-pw-31f0", "worker-pw-8e2a");
    let nats = Nats::start_with(
        &["-c", conf.to_str().unwrap()],
        &[
            ("TOOLSLOT_DISPATCHER_PASSWORD", dispatcher_pw),
            ("TOOLSLOT_WORKER_SHELL_PASSWORD", worker_pw),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(1);
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let side = |name: &str, user: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let remote = format!("user = \"{user}\"\npassword_env = \"TS_NATS_PASSWORD\"\n{}", keys.lines(&d, 0));
        write_config_with(&d, &nats, SHELL_ROUTES, "auto", "", &remote)
    };
    let (dispatcher, worker_config) = (side("dispatcher", "dispatcher"), side("worker", "worker-shell"));
    // The dispatcher makes the stream and buckets; the worker may only look them up.
    let out = ends_within(
        toolslot()
            .args(["catalog", "--config"])
            .arg(&dispatcher)
            .env("TS_NATS_PASSWORD", dispatcher_pw),
        60,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _w = worker(&worker_config, "shell", &[("TS_NATS_PASSWORD", worker_pw), ("WHO", "the-worker")]);
    // Queued calls, a result through the object store, and a background task reached by a
    // request addressed to its worker.
    let rounds = [
        sse(&[
            shell("echo ran by $WHO"),
            shell("seq 1 20000"),
            ("exec_shell", json!({"command": "echo task on $WHO; sleep 1", "background": true})),
        ]),
        sse(&[shell("sleep 0.7"), ("shell_output", json!({"task_id": "t1"}))]),
    ];
    let mut replay = Replay::start_env(&dispatcher, &ws, &rounds, &[("TS_NATS_PASSWORD", dispatcher_pw)]);
    let first = replay.round(3, 60);
    assert!(first[0]["content"].as_str().unwrap().contains("ran by the-worker"), "{first:?}");
    assert!(first[1]["content"].as_str().unwrap().contains("20000"), "{first:?}");
    assert_eq!(first[2]["is_error"], false, "{first:?}");
    let second = replay.round(2, 60);
    assert!(second[1]["content"].as_str().unwrap().contains("task on the-worker"), "{second:?}");
    // Both sides had every subject they use.
    let log = nats.log();
    assert!(!log.to_lowercase().contains("violation"), "{log}");
    runtime().block_on(async {
        let (client, mut refused) = client_as(&nats.url(), "worker-shell", worker_pw).await;
        // A worker's password cannot queue a call, for its pool or another.
        for subject in ["toolslot.call.shell.write", "toolslot.call.other.read"] {
            client.publish(subject, "{}".into()).await.unwrap();
            client.flush().await.unwrap();
            let why = refusal(&mut refused).await;
            assert!(why.contains("permissions violation") && why.contains(subject), "{subject}: {why:?}");
        }
        // Nor read another pool's calls or records.
        for subject in ["toolslot.call.other.*", "$KV.toolslot_calls.other.>"] {
            let _sub = client.subscribe(subject).await.unwrap();
            client.flush().await.unwrap();
            let why = refusal(&mut refused).await;
            assert!(why.contains("permissions violation"), "{subject}: {why:?}");
        }
        // Without credentials there is no connection at all.
        let anonymous = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(nats.url())
            .await;
        let Err(e) = anonymous else {
            panic!("an anonymous client is refused")
        };
        assert_eq!(e.kind(), async_nats::ConnectErrorKind::AuthorizationViolation, "{e}");
    });
    // The server logs what it refuses: the clean log above meant something.
    assert!(nats.log().contains("toolslot.call.shell.write"), "{}", nats.log());
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A call of `exec_shell` as a dispatcher would queue it, cleared to write.
fn job(key: &str, ws: &Path, command: &str) -> Vec<u8> {
    serde_json::to_vec(&Job {
        key: key.into(),
        tool: "exec_shell".into(),
        input: json!({ "command": command }),
        session: "forged".into(),
        workspace: ws.to_path_buf(),
        call_id: "toolu_forged".into(),
        index: 0,
        read_only: false,
        timeout_ms: 20_000,
        not_after_ms: unix_ms() + 60_000,
        grant: Grant {
            write: true,
            network: false,
        },
        reply: None,
        hidden: Vec::new(),
    })
    .unwrap()
}

/// Waits until the calls stream holds no message (each was run, refused or given up).
async fn drained(js: &async_nats::jetstream::Context) {
    let stream = js.get_stream("TOOLSLOT_CALLS").await.unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while stream.get_info().await.unwrap().state.messages > 0 {
        assert!(Instant::now() < until, "the queue was not drained");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The worker terminates a message before it has finished refusing it: a moment more.
    tokio::time::sleep(Duration::from_millis(500)).await;
}

/// A signing dispatcher and worker on an open bus: `(dir, workspace, config, keys)`.
fn signed_setup(nats: &Nats) -> (tempfile::TempDir, PathBuf, PathBuf, Keys) {
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(1);
    let config = write_config_with(dir.path(), nats, SHELL_ROUTES, "auto", "", &keys.lines(dir.path(), 0));
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    (dir, ws, config, keys)
}

#[test]
fn a_worker_runs_no_call_a_dispatcher_did_not_seal_for_its_queue() {
    let _one = serial();
    let nats = Nats::start();
    let (_dir, ws, config, keys) = signed_setup(&nats);
    let sealer = keys.signing_as(&keys.dispatcher);
    let _w = worker(&config, "shell", &[]);
    // A dispatcher's call runs (and makes the stream).
    let mut replay = Replay::start(&config, &ws, &[sse(&[shell("echo sealed call ran")])]);
    let results = replay.round(1, 60);
    assert!(results[0]["content"].as_str().unwrap().contains("sealed call ran"), "{results:?}");
    let marker = |n: u32| ws.join(format!("forged-{n}"));
    runtime().block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
        let write = "toolslot.call.shell.write";
        let other = stranger(&keys);
        // The worker's own key is trusted, but not for jobs: only the dispatcher's is.
        let a_worker = keys.signing_as(&keys.workers[0]);
        let touch = |n: u32| job(&format!("shell.forged.{n}"), &ws, &format!("touch {}", marker(n).display()));
        let forged: Vec<(&str, Vec<u8>)> = vec![
            // No seal at all.
            (write, touch(1)),
            // Signed by a key nobody trusts, and by a trusted worker's key.
            (write, other.seal(Domain::Job, write, &touch(2))),
            (write, a_worker.seal(Domain::Job, write, &touch(7))),
            // Sealed for the read queue (delivered again when a worker is lost), published on
            // the write queue, and the other way round.
            (write, sealer.seal(Domain::Job, "toolslot.call.shell.read", &touch(3))),
            ("toolslot.call.shell.read", sealer.seal(Domain::Job, write, &touch(4))),
            // A sealed call whose arguments were changed on the way.
            (write, {
                let mut sealed = sealer.seal(Domain::Job, write, &touch(5));
                let at = sealed.len() - 20;
                sealed[at] ^= 1;
                sealed
            }),
        ];
        for (subject, payload) in forged {
            js.publish(subject, payload.into()).await.unwrap().await.unwrap();
        }
        drained(&js).await;
        for n in [1, 2, 3, 4, 5, 7] {
            assert!(!marker(n).exists(), "forged call {n} was run");
        }
        // The same call sealed with the key for its queue runs: only the seal kept the others out.
        js.publish(write, sealer.seal(Domain::Job, write, &touch(6)).into())
            .await
            .unwrap()
            .await
            .unwrap();
        drained(&js).await;
        let until = Instant::now() + Duration::from_secs(20);
        while !marker(6).exists() {
            assert!(Instant::now() < until, "the sealed call did not run");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

#[test]
fn a_finished_write_is_not_run_again_when_its_job_is_published_again() {
    let _one = serial();
    let nats = Nats::start();
    let (_dir, ws, config, _) = signed_setup(&nats);
    let marker = ws.join("marker");
    let _w = worker(&config, "shell", &[]);
    let rt = runtime();
    let client = rt.block_on(async_nats::connect(nats.url())).unwrap();
    let mut calls = rt.block_on(client.subscribe("toolslot.call.>")).unwrap();
    rt.block_on(client.flush()).unwrap();
    let mut replay = Replay::start(&config, &ws, &[sse(&[shell(&format!("echo run >> {}", marker.display()))])]);
    let results = replay.round(1, 60);
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    assert_eq!(lines(&marker).len(), 1);
    rt.block_on(async {
        // The job as the dispatcher published it, sealed, published again, twice, with new
        // message ids so that JetStream's de-duplication does not drop it.
        let seen = tokio::time::timeout(Duration::from_secs(5), calls.next()).await.unwrap().unwrap();
        let js = async_nats::jetstream::new(client.clone());
        for _ in 0..2 {
            js.publish(seen.subject.clone(), seen.payload.clone()).await.unwrap().await.unwrap();
        }
        drained(&js).await;
    });
    // The call's record says it is done: the worker does not claim it again.
    assert_eq!(lines(&marker).len(), 1, "run once, never again");
}

/// A `done` record of `key` carrying `content`, unsigned.
fn forged_done(content: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "state": "done",
        "worker": "shell.forger",
        "outcome": {"kind": "output", "content": content, "is_error": false, "shell": true, "trailer": null, "partial": false}
    }))
    .unwrap()
}

#[test]
fn a_forged_answer_or_record_never_becomes_the_result() {
    let _one = serial();
    let nats = Nats::start();
    let (_dir, ws, config, keys) = signed_setup(&nats);
    let late = ws.join("late");
    let _w = worker(&config, "shell", &[]);
    let rt = runtime();
    let client = rt.block_on(async_nats::connect(nats.url())).unwrap();
    let mut calls = rt.block_on(client.subscribe("toolslot.call.>")).unwrap();
    rt.block_on(client.flush()).unwrap();
    let rounds = [
        sse(&[shell("sleep 2; echo the real output")]),
        sse(&[shell(&format!("sleep 4; echo late >> {}", late.display()))]),
    ];
    let mut replay = Replay::start(&config, &ws, &rounds);
    let other = stranger(&keys);
    // What a client on the bus learns from a queued call: its key and where it is answered.
    let mut next_job = || {
        rt.block_on(async {
            let msg = tokio::time::timeout(Duration::from_secs(30), calls.next()).await.unwrap().unwrap();
            let body = &msg.payload[msg.payload.iter().position(|&b| b == b'\n').unwrap() + 1..];
            serde_json::from_slice::<Job>(body).unwrap()
        })
    };
    // 1. Forged answers, unsigned and under another key, while the call runs: dropped.
    let job = next_job();
    let subject = format!("{}.{}", job.reply.clone().unwrap(), job.key);
    rt.block_on(async {
        client.publish(subject.clone(), forged_done("FORGED answer").into()).await.unwrap();
        let sealed = other.seal(Domain::Record, &job.key, &forged_done("FORGED answer"));
        client.publish(subject, sealed.into()).await.unwrap();
        client.flush().await.unwrap();
    });
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert!(content.contains("the real output") && !content.contains("FORGED"), "{content}");
    // 2. A `done` record forged over the worker's claim: the dispatcher cannot know what ran,
    // so the call is `outcome_unknown`, never the forged output, and the worker stops it.
    let job = next_job();
    rt.block_on(async {
        let kv = async_nats::jetstream::new(client.clone())
            .get_key_value("toolslot_calls")
            .await
            .unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        while kv.entry(&job.key).await.unwrap().is_none() {
            assert!(Instant::now() < until, "the call was never claimed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        kv.put(&job.key, forged_done("FORGED record").into()).await.unwrap();
    });
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert!(!content.contains("FORGED"), "{content}");
    assert_eq!(error_meta(content)["error"], "outcome_unknown", "{content}");
    std::thread::sleep(Duration::from_secs(5));
    assert!(!late.exists(), "the worker stopped the call whose claim was forged over");
}

/// The public key in a signed message's first line.
fn signer_of(message: &[u8]) -> String {
    let head = std::str::from_utf8(&message[..message.iter().position(|&b| b == b'\n').unwrap()]).unwrap();
    head.split(' ').nth(2).unwrap().to_string()
}

/// A `done` record of `worker` carrying `content`.
fn done_of(worker: &str, content: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "state": "done",
        "worker": worker,
        "outcome": {"kind": "output", "content": content, "is_error": false, "shell": true, "trailer": null, "partial": false}
    }))
    .unwrap()
}

#[test]
fn a_worker_cannot_answer_for_another_worker_of_its_pool() {
    let _one = serial();
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    // Two workers of pool `shell`, each with its own key, both trusted.
    let keys = Keys::new(2);
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let configs: Vec<PathBuf> = (0..2)
        .map(|n| {
            let d = dir.path().join(format!("w{n}"));
            std::fs::create_dir_all(&d).unwrap();
            write_config_with(&d, &nats, SHELL_ROUTES, "auto", "", &keys.lines(&d, n))
        })
        .collect();
    let _workers: Vec<_> = configs.iter().map(|c| worker(c, "shell", &[])).collect();
    let late = ws.join("late");
    let rounds = [
        sse(&[shell("sleep 2; echo the real output")]),
        sse(&[shell(&format!("sleep 4; echo late >> {}", late.display()))]),
        sse(&[shell(&format!("sleep 4; echo late >> {}", late.display()))]),
    ];
    let rt = runtime();
    let client = rt.block_on(async_nats::connect(nats.url())).unwrap();
    let js = rt.block_on(async { async_nats::jetstream::new(client.clone()) });
    let announced = rt.block_on(js.get_key_value("toolslot_workers")).unwrap();
    let mut calls = rt.block_on(client.subscribe("toolslot.call.>")).unwrap();
    rt.block_on(client.flush()).unwrap();
    // The dispatcher makes the calls bucket when it starts.
    let mut replay = Replay::start(&configs[0], &ws, &rounds);
    let kv = rt.block_on(js.get_key_value("toolslot_calls")).unwrap();
    // Per call: its job, the claim's worker and key, the other worker's id and its sealer.
    let mut claimed = || {
        rt.block_on(async {
            let msg = tokio::time::timeout(Duration::from_secs(30), calls.next()).await.unwrap().unwrap();
            let body = &msg.payload[msg.payload.iter().position(|&b| b == b'\n').unwrap() + 1..];
            let job: Job = serde_json::from_slice(body).unwrap();
            let until = Instant::now() + Duration::from_secs(20);
            let entry = loop {
                if let Some(e) = kv.entry(&job.key).await.unwrap() {
                    break e;
                }
                assert!(Instant::now() < until, "the call was never claimed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let claimer_key = signer_of(&entry.value);
            let other = keys.workers.iter().find(|k| k.public_key() != claimer_key).unwrap();
            let mut ids = announced.keys().await.unwrap();
            let mut other_id = None;
            while let Some(id) = ids.next().await {
                let id = id.unwrap();
                let value = announced.get(&id).await.unwrap().unwrap();
                if signer_of(&value) == other.public_key() {
                    other_id = Some(id);
                }
            }
            let sealer = keys.signing_as(other);
            (job, other_id.expect("the other worker announced itself"), sealer)
        })
    };
    // 1. An answer signed by the other (trusted) worker while the call runs: dropped.
    let (job, other_id, other) = claimed();
    rt.block_on(async {
        let subject = format!("{}.{}", job.reply.clone().unwrap(), job.key);
        let forged = other.seal(Domain::Record, &job.key, &done_of(&other_id, "FORGED answer"));
        client.publish(subject, forged.into()).await.unwrap();
        client.flush().await.unwrap();
    });
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert!(content.contains("the real output") && !content.contains("FORGED"), "{content}");
    // 2. and 3. A `done` record put over the claim, signed with the other worker's trusted key,
    // naming that worker, then naming the claiming worker: `outcome_unknown`, never the output.
    for names_claimer in [false, true] {
        let (job, other_id, other) = claimed();
        rt.block_on(async {
            let entry = kv.entry(&job.key).await.unwrap().unwrap();
            let record: CallRecord =
                serde_json::from_slice(&entry.value[entry.value.iter().position(|&b| b == b'\n').unwrap() + 1..]).unwrap();
            let CallRecord::Started { worker: claimer, .. } = record else {
                panic!("not a claim: {record:?}")
            };
            let named = if names_claimer { claimer } else { other_id };
            let forged = other.seal(Domain::Record, &job.key, &done_of(&named, "FORGED record"));
            kv.put(&job.key, forged.into()).await.unwrap();
        });
        let results = replay.round(1, 60);
        let content = results[0]["content"].as_str().unwrap();
        assert!(!content.contains("FORGED"), "{content}");
        assert_eq!(error_meta(content)["error"], "outcome_unknown", "{content}");
    }
    std::thread::sleep(Duration::from_secs(5));
    assert!(!late.exists(), "the worker stopped the calls whose claims were forged over");
}

#[test]
fn an_announcement_signed_by_an_untrusted_key_is_ignored() {
    let _one = serial();
    let nats = Nats::start();
    let (_dir, ws, config, keys) = signed_setup(&nats);
    // No worker runs: only the announcements put here could make pool `shell` look served.
    let announcement = |id: &str| {
        serde_json::to_vec(&json!({
            "worker": id, "pool": "shell", "slots": 2, "running": [], "version": "forged",
            "tools": [{"name": "exec_shell", "description": "", "input_schema": {"type": "object"}, "capabilities": []}]
        }))
        .unwrap()
    };
    let rt = runtime();
    let client = rt.block_on(async_nats::connect(nats.url())).unwrap();
    // The dispatcher makes the buckets.
    let out = ends_within(toolslot().args(["catalog", "--config"]).arg(&config), 60);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    rt.block_on(async {
        let workers = async_nats::jetstream::new(client.clone())
            .get_key_value("toolslot_workers")
            .await
            .unwrap();
        let id = "shell.intruder";
        workers
            .put(id, stranger(&keys).seal(Domain::Announcement, id, &announcement(id)).into())
            .await
            .unwrap();
    });
    let mut replay = Replay::start(&config, &ws, &[sse(&[shell("echo hi")])]);
    let results = replay.round(1, 60);
    let content = results[0]["content"].as_str().unwrap();
    assert!(content.contains("no live worker of pool `shell` hosts it"), "{content}");
}
