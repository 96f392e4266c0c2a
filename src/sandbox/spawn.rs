//! Building the process: the program wrapped in the sandbox, its environment, its limits.
//!
//! This is where a command is *spawned*; how its output is read belongs to its caller.

use std::io;
use std::path::{Path, PathBuf};

use super::{Backend, Grant, SandboxError, View, backend, bwrap_path, confined_dirs};
use crate::child_env::{EnvPolicy, for_child};
use crate::config::{ShellConfig, expand_home};

/// A program to run sandboxed.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The program (looked up on the child's PATH).
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The workspace: its working folder, and the one folder a call cleared to write may write.
    pub workspace: &'a Path,
    /// What the call was cleared to do.
    pub grant: Grant,
    /// What of the files it sees.
    pub view: View,
    /// Variables this program was given besides the shell's (an extension's `env_passthrough`).
    pub keep_env: &'a [String],
    /// Sandbox, environment and limits.
    pub shell: &'a ShellConfig,
    /// Files and folders the program must not see (absolute, symlinks resolved): what the
    /// session's policy denies by path, masked by the sandbox (`mask.rs`).
    pub hidden: &'a [PathBuf],
    /// The session the program runs for, where its sandbox may be the session's, made once
    /// and entered by each of its commands (`warm/`); `None`: a sandbox of its own. With a
    /// session, spawn it with [`Sandboxed::spawn`] only: the process its command starts is not
    /// the program (it starts the program and leaves).
    pub session: Option<&'a str>,
    /// The session's policy settings, for a program cleared to write: where the trust store
    /// lies, so that its end leaves a project policy file the user trusts (one toolslot wrote
    /// for an approval, in this process or another) as it is; with `None` the file is put back
    /// as it was before, or as this process wrote it meanwhile.
    pub policy: Option<&'a crate::config::PolicyConfig>,
}

impl<'a> Request<'a> {
    /// A program toolslot runs beside the model's, on its own account (a hook, a language
    /// server): granted nothing (every folder readable, nothing writable, no network), the
    /// full view less `secrets` ([`secret_paths`]: such a program may run code the checkout
    /// chose, and what it prints reaches the model), no policy masks (those are for the
    /// programs the model drives: this one is the team's), a sandbox of its own, and no policy
    /// file to keep (it writes nothing).
    pub fn granted_nothing(
        program: &'a str,
        args: &'a [String],
        workspace: &'a Path,
        shell: &'a ShellConfig,
        secrets: &'a [PathBuf],
    ) -> Self {
        Self {
            program,
            args,
            workspace,
            grant: Grant::default(),
            view: View::Full,
            keep_env: &[],
            shell,
            hidden: secrets,
            session: None,
            policy: None,
        }
    }
}

/// The credentials of `shell.secret_paths` that exist, as masks take them (absolute, links
/// resolved), less any that holds `workspace` (masking it would hide the workspace itself).
pub fn secret_paths(shell: &ShellConfig, workspace: &Path) -> Vec<PathBuf> {
    let workspace = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let mut out: Vec<PathBuf> = shell
        .secret_paths
        .iter()
        .map(|p| expand_home(p))
        .filter(|p| p.is_absolute())
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| !workspace.starts_with(p))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A command ready to spawn, and what must live while it runs.
#[derive(Debug)]
pub struct Sandboxed {
    /// The command: no stdin, killed if dropped, in its own session and process group; the
    /// caller sets stdout and stderr (and stdin, if it writes one), then spawns it with
    /// [`Sandboxed::spawn`] (the command of a session's sandbox is not the program itself).
    pub command: tokio::process::Command,
    /// Keep it until the process has ended: it holds the private temporary folder.
    pub guard: Guard,
    /// The sandbox it runs in.
    pub backend: Backend,
    /// In a session's sandbox: where the process spawned reports the program's pid (the read
    /// end, and toolslot's copy of the write end, closed once spawned).
    report: Option<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)>,
}

impl Sandboxed {
    /// Spawns the program.
    ///
    /// # Errors
    /// When it could not be started.
    pub async fn spawn(&mut self) -> io::Result<super::Child> {
        let child = self.command.spawn()?;
        match self.report.take() {
            Some((read, write)) => {
                // Only the process spawned holds the write end now: a pid it did not write
                // reads as nothing, never as a wait.
                drop(write);
                super::Child::entered(child, read).await
            }
            None => Ok(super::Child::spawned(child)),
        }
    }
}

/// What a sandboxed process needs while it runs: Landlock's ruleset (until spawned) and the
/// private temporary folder (removed when dropped).
#[derive(Debug, Default)]
pub struct Guard {
    ruleset: Option<std::os::fd::OwnedFd>,
    temp: Option<PathBuf>,
    /// The project's policy, put back as it was when the program ends.
    policy: Option<super::Protected>,
    /// The session's sandbox the program entered, given back (or ended, if the program left
    /// anything running in it) when this is dropped.
    warm: Option<super::warm::Lease>,
}

impl Guard {
    /// Releases the Landlock ruleset once the child has restricted itself (after spawn).
    pub fn spawned(&mut self) {
        self.ruleset = None;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(t) = self.temp.take() {
            let _ = std::fs::remove_dir_all(t);
        }
        // Counted and given back only now that the program has ended.
        drop(self.warm.take());
    }
}

/// The resource limits applied to the child (0 = none).
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    cpu_secs: u64,
    data_bytes: u64,
    processes: u64,
    file_bytes: u64,
}

/// Builds `req`'s process in the configured sandbox.
///
/// # Errors
/// [`SandboxError`] when the workspace cannot be resolved or the sandbox cannot be set up; the
/// caller reports it as the call's failure (nothing ran).
pub fn command(req: &Request<'_>) -> Result<Sandboxed, SandboxError> {
    let workspace = req.workspace.canonicalize().map_err(|e| SandboxError::Workspace {
        path: req.workspace.to_path_buf(),
        reason: e.to_string(),
    })?;
    let shell = req.shell;
    let env = for_child(EnvPolicy {
        core: &shell.env_core,
        exclude: &shell.env_exclude,
        passthrough: &shell.env_passthrough,
        keep: req.keep_env,
    });
    let path_var = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone());
    let writable: Vec<PathBuf> = if req.grant.write {
        shell
            .writable_paths
            .iter()
            .map(|p| expand_home(p))
            .filter(|p| p.is_absolute())
            .collect()
    } else {
        Vec::new()
    };
    let limits = Limits {
        cpu_secs: shell.limit_cpu_secs,
        data_bytes: shell.limit_memory_bytes,
        processes: shell.limit_processes,
        file_bytes: shell.limit_file_bytes,
    };
    let backend = backend(shell.sandbox);
    // No network means no socket of any family: a socket file is reached through the file
    // system, where neither a network namespace nor Landlock's TCP rules look.
    let mut no_sockets = (!req.grant.network).then(|| no_sockets(backend));
    // Sockets the host allows without the network: bubblewrap masks every other one bound on
    // the machine instead of the filter refusing them all (`sockets.rs`).
    let mut socket_masks: Vec<PathBuf> = Vec::new();
    if no_sockets.is_some()
        && !shell.allow_unix_sockets.is_empty()
        && backend == Backend::Bwrap
        && let Some(masks) = super::sockets::masks_except(&shell.allow_unix_sockets)
    {
        no_sockets = None;
        socket_masks = masks;
    }
    let mut guard = Guard::default();
    let mut report = None;
    // Only a program cleared to write could change the workspace's policy.
    if req.grant.write {
        let wait = std::time::Duration::from_millis(shell.policy_lock_wait_ms);
        guard.policy = Some(super::Protected::snapshot(&workspace, wait, req.policy)?);
    }
    let mut cmd = match (backend, bwrap_path()) {
        (Backend::Bwrap, Some(bwrap)) => {
            let confined = confined_dirs(path_var.as_deref());
            let protected = guard.policy.as_ref().map(super::Protected::folder);
            let own = if req.grant.write && req.view == View::Full {
                own_files(req, &workspace)
            } else {
                Vec::new()
            };
            let masked = [req.hidden, socket_masks.as_slice()].concat();
            let pinned = if req.grant.write {
                let roots = [std::slice::from_ref(&workspace), writable.as_slice()].concat();
                // The workspace too: moved, with a link put in its place, it would take the
                // file tools, which find it by its path, where the link leads.
                let mut pinned = super::mask::pins(std::slice::from_ref(&workspace), &roots);
                pinned.extend(super::mask::pins(req.hidden, &roots));
                pinned.sort();
                pinned.dedup();
                pinned
            } else {
                Vec::new()
            };
            let writes = super::bwrap::Writes {
                writable: &writable,
                protected,
                pinned: &pinned,
            };
            let mut options = super::bwrap::args(&workspace, req.grant, req.view, &writes, &confined, &own);
            options.extend(super::mask::bwrap_args(&masked, req.view, &workspace, &confined));
            let warm = match req.session {
                Some(session) if warm_fits(req) => {
                    // The placeholder outlives the thread that starts it: it ends with
                    // toolslot through the pipe it reads, not with that thread.
                    options.retain(|o| o != "--die-with-parent");
                    let masked_paths: Vec<&Path> = masked.iter().map(PathBuf::as_path).collect();
                    let key = super::warm::Key::new(session, options.clone(), &workspace, &masked_paths);
                    let keep = super::warm::Keep {
                        idle: std::time::Duration::from_secs(shell.warm_sandbox_idle_secs),
                        max: shell.warm_sandboxes_max,
                    };
                    let placeholder = |c: &mut std::process::Command| set_up_child(c, Limits::default(), None, false, no_sockets);
                    match super::warm::lease(key, keep, bwrap, &env, placeholder) {
                        Ok(lease) => Some(lease),
                        Err(e) => {
                            // A fresh sandbox for this command instead: slower, as safe.
                            tracing::warn!(error = %e, "the session's sandbox could not be made");
                            None
                        }
                    }
                }
                _ => None,
            };
            match warm {
                Some(lease) => {
                    // What runs is given to `enter`: the process spawned enters the sandbox
                    // and starts the program there itself.
                    let env: Vec<(String, String)> = env.into_iter().filter(|(k, _)| k != "TMPDIR").collect();
                    let mut cmd = tokio::process::Command::new(req.program);
                    cmd.env_clear();
                    set_up_child(cmd.as_std_mut(), limits, None, false, no_sockets);
                    let (read, write) = report_pipe().map_err(|e| SandboxError::Warm(e.to_string()))?;
                    use std::os::fd::AsRawFd;
                    lease
                        .enter(cmd.as_std_mut(), write.as_raw_fd(), &workspace, req.program, req.args, &env)
                        .map_err(|e| SandboxError::Warm(e.to_string()))?;
                    report = Some((read, write));
                    guard.warm = Some(lease);
                    cmd
                }
                None => {
                    let mut cmd = tokio::process::Command::new(bwrap);
                    cmd.args(options).arg("--").arg(req.program).args(req.args);
                    cmd.env_clear().envs(env);
                    if req.grant.write && req.view == View::Full {
                        cmd.env("TMPDIR", "/tmp");
                    } else {
                        cmd.env_remove("TMPDIR");
                    }
                    set_up_child(cmd.as_std_mut(), limits, None, false, no_sockets);
                    cmd
                }
            }
        }
        #[cfg(target_os = "linux")]
        (Backend::Landlock, _) => {
            let temp = if req.grant.write { Some(private_temp()?) } else { None };
            guard.temp = temp.clone();
            let confined = confined_dirs(path_var.as_deref());
            let ruleset = super::landlock::ruleset(&workspace, req.grant, req.view, &writable, temp.as_deref(), &confined, req.hidden)?;
            let mut cmd = tokio::process::Command::new(req.program);
            cmd.args(req.args).env_clear().envs(env);
            match &temp {
                Some(t) => cmd.env("TMPDIR", t),
                None => cmd.env_remove("TMPDIR"),
            };
            use std::os::fd::AsRawFd;
            set_up_child(cmd.as_std_mut(), limits, Some(ruleset.as_raw_fd()), true, no_sockets);
            guard.ruleset = Some(ruleset);
            cmd
        }
        _ => {
            let mut cmd = tokio::process::Command::new(req.program);
            cmd.args(req.args).env_clear().envs(env);
            set_up_child(cmd.as_std_mut(), limits, None, false, no_sockets);
            cmd
        }
    };
    cmd.current_dir(&workspace).stdin(std::process::Stdio::null()).kill_on_drop(true);
    Ok(Sandboxed {
        command: cmd,
        guard,
        backend,
        report,
    })
}

/// A pipe, both ends closed on exec and never blocking, for the pid of a program started in a
/// session's sandbox.
fn report_pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    use std::os::fd::FromRawFd;
    // SAFETY: two descriptors the kernel just gave this process, owned here alone.
    Ok(unsafe { (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1])) })
}

/// Whether `req` may run in its session's sandbox: a program cleared neither to write nor to
/// reach the network (a read-only command in the confined view, a read-only extension in the
/// full one), which can leave nothing in a sandbox but processes (counted after it) and files
/// in its `/dev`; the rest get a fresh sandbox each.
fn warm_fits(req: &Request<'_>) -> bool {
    !req.grant.write && !req.grant.network && req.shell.warm_sandbox_idle_secs > 0 && req.shell.warm_sandboxes_max > 0
}

/// The files a program is started with (its program word and arguments that name an existing
/// file by absolute path, outside the workspace), as what bubblewrap must show under its
/// private temp folders: the file's folder, or the file alone when its folder is a temp root.
/// In a full view every other folder is visible anyway, so this shows nothing a program that
/// was not cleared to write would not see.
fn own_files(req: &Request<'_>, workspace: &Path) -> Vec<PathBuf> {
    const HIDDEN: &[&str] = &["/tmp", "/dev/shm"];
    let mut out: Vec<PathBuf> = Vec::new();
    for word in std::iter::once(req.program).chain(req.args.iter().map(String::as_str)) {
        let path = Path::new(word);
        if !path.is_absolute() || !path.is_file() {
            continue;
        }
        let Ok(real) = path.canonicalize() else { continue };
        if real.starts_with(workspace) || !HIDDEN.iter().any(|h| real.starts_with(h)) {
            continue;
        }
        let shown = match real.parent() {
            Some(folder) if !HIDDEN.iter().any(|h| folder == Path::new(h)) => folder.to_path_buf(),
            _ => real,
        };
        if !out.contains(&shown) {
            out.push(shown);
        }
    }
    out
}

/// A fresh folder only this command may write, for Landlock (bubblewrap mounts its own /tmp).
fn private_temp() -> Result<PathBuf, SandboxError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| SandboxError::Temp(e.to_string()))?;
    let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("toolslot-sandbox-{name}"));
    std::fs::create_dir(&dir).map_err(|e| SandboxError::Temp(format!("{}: {e}", dir.display())))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| SandboxError::Temp(e.to_string()))?;
    Ok(dir)
}

/// The filter for a program without the network under `backend`, made once per process (so
/// nothing is allocated between fork and exec): under Landlock, whose rules know TCP alone,
/// it lets only TCP and netlink sockets be made; elsewhere it refuses unix sockets (a network
/// namespace holds the rest, and bubblewrap needs an IP datagram socket to make it).
fn no_sockets(backend: Backend) -> &'static super::NoSockets {
    static NAMESPACED: std::sync::OnceLock<super::NoSockets> = std::sync::OnceLock::new();
    static TCP_ONLY: std::sync::OnceLock<super::NoSockets> = std::sync::OnceLock::new();
    if backend == Backend::Landlock {
        TCP_ONLY.get_or_init(super::NoSockets::tcp_only)
    } else {
        NAMESPACED.get_or_init(super::NoSockets::new)
    }
}

/// What the child does between fork and exec: its own session (so a timeout's group kill
/// reaches all it started, and it has no terminal to type into), the resource limits, for
/// Landlock: no capabilities, no new privileges, the ruleset; and without network, the filter
/// that refuses unix sockets (last, so bubblewrap itself is under it too).
fn set_up_child(
    cmd: &mut std::process::Command,
    limits: Limits,
    landlock: Option<std::os::fd::RawFd>,
    drop_capabilities: bool,
    no_sockets: Option<&'static super::NoSockets>,
) {
    let setup = move || -> io::Result<()> {
        // SAFETY: between fork and exec only async-signal-safe system calls run here: no
        // allocation, no lock (io::Error::last_os_error holds an errno, it allocates nothing).
        unsafe {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            lower_limit(libc::RLIMIT_CPU, limits.cpu_secs)?;
            lower_limit(libc::RLIMIT_DATA, limits.data_bytes)?;
            lower_limit(libc::RLIMIT_NPROC, limits.processes)?;
            lower_limit(libc::RLIMIT_FSIZE, limits.file_bytes)?;
            #[cfg(target_os = "linux")]
            if drop_capabilities {
                // Root keeps no capability across the exec: an empty bounding set. Without
                // CAP_SETPCAP (not root) there is nothing to drop, and the call fails harmlessly.
                for cap in 0..64 {
                    libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
                }
            }
            #[cfg(target_os = "linux")]
            if let Some(fd) = landlock {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            #[cfg(not(target_os = "linux"))]
            let _ = (landlock, drop_capabilities);
            #[cfg(target_os = "linux")]
            if let Some(filter) = no_sockets {
                filter.install()?;
            }
        }
        Ok(())
    };
    // SAFETY: the closure only makes async-signal-safe system calls (see above).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, setup);
    }
}

/// Lowers a resource limit to `value` (never raises it; 0 leaves it alone).
///
/// # Safety
/// Async-signal-safe: only getrlimit and setrlimit.
unsafe fn lower_limit(resource: LimitResource, value: u64) -> io::Result<()> {
    if value == 0 {
        return Ok(());
    }
    let mut current = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid pointer to a local rlimit.
    if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let value = value as libc::rlim_t;
    let soft = value.min(current.rlim_max);
    // CPU: the hard limit a little above the soft one, so the process first gets SIGXCPU.
    let hard = if resource == libc::RLIMIT_CPU {
        value.saturating_add(5).min(current.rlim_max)
    } else {
        soft
    };
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: a valid pointer to a local rlimit.
    if unsafe { libc::setrlimit(resource, &new) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
type LimitResource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type LimitResource = libc::c_int;
