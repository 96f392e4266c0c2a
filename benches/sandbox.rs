//! What the OS sandbox costs per command, side by side in one run: `sh -c true` spawned and
//! waited for with no sandbox, under bubblewrap and under Landlock, for a read-only call (the
//! confined view, in a fresh sandbox and in the session's, entered again) and for an approved one
//! (the full view, the workspace writable); and what judging a command on the shell grammar
//! costs.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use toolslot::config::{Config, SandboxMode};
use toolslot::sandbox::{Backend, Grant, Request, View, backend, command};

fn spawn_true(
    rt: &tokio::runtime::Runtime,
    shell: &toolslot::config::ShellConfig,
    ws: &std::path::Path,
    grant: Grant,
    view: View,
    session: Option<&str>,
) {
    let args = ["-c".to_string(), "true".to_string()];
    let mut s = command(&Request {
        program: "sh",
        args: &args,
        workspace: ws,
        grant,
        view,
        keep_env: &[],
        shell,
        hidden: &[],
        session,
        policy: None,
    })
    .expect("the sandbox sets up");
    rt.block_on(async {
        let mut child = s.spawn().await.expect("sh starts");
        s.guard.spawned();
        let status = child.wait().await.expect("sh ends");
        assert!(status.success());
    });
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let ws = tempfile::tempdir().expect("a workspace");
    let mut group = c.benchmark_group("sandbox_spawn");
    for (name, mode, want) in [
        ("none", SandboxMode::None, Backend::None),
        ("bwrap", SandboxMode::Bwrap, Backend::Bwrap),
        ("landlock", SandboxMode::Landlock, Backend::Landlock),
    ] {
        assert_eq!(backend(mode), want, "{name} is not available here: install it first");
        let mut shell = Config::builtin().shell;
        shell.sandbox = mode;
        group.bench_function(format!("{name}/read_only"), |b| {
            b.iter(|| spawn_true(&rt, &shell, ws.path(), Grant::default(), View::Confined, None))
        });
        if want == Backend::Bwrap {
            // The session's sandbox, made once and entered by each command (`sandbox/warm/`).
            group.bench_function(format!("{name}/read_only_in_session"), |b| {
                b.iter(|| spawn_true(&rt, &shell, ws.path(), Grant::default(), View::Confined, Some("bench")))
            });
        }
        group.bench_function(format!("{name}/approved"), |b| {
            b.iter(|| {
                spawn_true(
                    &rt,
                    &shell,
                    ws.path(),
                    Grant {
                        write: true,
                        network: false,
                    },
                    View::Full,
                    None,
                )
            })
        });
    }
    group.finish();
    c.bench_function("shell_judge/git_status_and_grep", |b| {
        b.iter(|| toolslot::shell::judge_command(black_box("git status --porcelain && grep -rn 'TODO' src | wc -l")))
    });
    c.bench_function("shell_judge/not_plain", |b| {
        b.iter(|| toolslot::shell::judge_command(black_box("ls $(touch x) > out\ncat <<EOF\nx\nEOF")))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
