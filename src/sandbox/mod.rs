//! The OS sandbox every program the model drives runs in: exec_shell commands, background
//! tasks and extension programs.
//!
//! Approval decides whether a call runs; the sandbox bounds what it can do, whatever the judge
//! of shell commands missed:
//! - files: read-only; the workspace (and a private temporary folder) writable only for a call
//!   the gate cleared to write ([`Grant::write`]); a command that ran without approval sees only
//!   the workspace and the system's folders ([`View::Confined`]);
//! - network: off unless the call was cleared for it ([`Grant::network`]), unix sockets
//!   included (`sockets.rs`: a seccomp filter refuses to make one);
//! - processes: toolslot's own processes (and their environment) are out of sight, and the
//!   command cannot signal them;
//! - resources: CPU time, memory, process count and file size bounded (`shell.limit_*`).
//!
//! Two backends, picked by `shell.sandbox` ([`backend`]): bubblewrap (`bwrap.rs`: its own
//! mount, process and network namespaces, so everything a command started ends with it) and
//! Landlock (`landlock.rs`: the kernel's access control applied to the child itself, no extra
//! program). docs/ARCHITECTURE.md ("Security model") says why bubblewrap comes first.

mod bwrap;
mod child;
mod denial;
#[cfg(target_os = "linux")]
mod landlock;
mod mask;
mod protect;
mod sockets;
mod spawn;
mod warm;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use child::Child;
pub use denial::denial_note;
pub use protect::{Locked, Protected, written_by_toolslot};
pub use sockets::NoSockets;
pub use spawn::{Guard, Request, Sandboxed, command, secret_paths};

use crate::config::SandboxMode;
pub use crate::tool::Grant;

/// Which sandbox runs commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// bubblewrap, at the path found on the host's PATH.
    Bwrap,
    /// Landlock, applied by the child to itself before it runs the program.
    Landlock,
    /// None: programs run with the host's view and rights.
    None,
}

impl Backend {
    /// The name `shell.sandbox` uses.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Bwrap => "bwrap",
            Backend::Landlock => "landlock",
            Backend::None => "none",
        }
    }
}

/// What of the files a sandboxed program sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The workspace and the system's folders (`/usr`, `/etc`, the PATH): what a command that
    /// ran without approval may read.
    Confined,
    /// Every folder but the host's processes (`/proc` is the sandbox's own, or hidden).
    Full,
}

/// Errors setting a sandbox up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The workspace cannot be resolved.
    #[error("the workspace {path} is not usable: {reason}")]
    Workspace {
        /// The workspace as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Landlock refused the rules.
    #[error("the Landlock sandbox could not be set up: {0}")]
    Landlock(String),
    /// Landlock cannot take a path the policy denies out of a folder the program may write.
    #[error(
        "not run: the Landlock sandbox cannot hide {0} (denied by a policy rule) from a program cleared to write the folder that holds it; bubblewrap can (shell.sandbox = \"bwrap\")"
    )]
    CannotHide(String),
    /// Landlock cannot keep a writable folder above the workspace from being renamed.
    #[error(
        "not run: the Landlock sandbox cannot keep the workspace in place below `{0}` (shell.writable_paths), where a program cleared to write could move it and leave a link in its place; bubblewrap can (shell.sandbox = \"bwrap\")"
    )]
    CannotPin(String),
    /// The private temporary folder could not be made.
    #[error("the sandbox's temporary folder could not be made: {0}")]
    Temp(String),
    /// The session's sandbox could not be entered.
    #[error("the session's sandbox could not be entered: {0}")]
    Warm(String),
    /// The workspace's policy folder could not be kept read-only (see `protect.rs`).
    #[error(transparent)]
    Locked(#[from] protect::Locked),
}

/// The backend `mode` stands for on this machine, detected once per process.
///
/// `auto` is bubblewrap when it runs here (it needs user namespaces, or to be setuid), else
/// Landlock when the kernel enforces files and TCP (ABI 4, Linux 6.7), else none. A mode naming
/// a backend that does not work here is none: exec_shell then asks before every command and
/// says why ([`unavailable_notice`]).
pub fn backend(mode: SandboxMode) -> Backend {
    match mode {
        SandboxMode::None => Backend::None,
        SandboxMode::Bwrap => {
            if bwrap_path().is_some() {
                Backend::Bwrap
            } else {
                Backend::None
            }
        }
        SandboxMode::Landlock => {
            if landlock_works() {
                Backend::Landlock
            } else {
                Backend::None
            }
        }
        SandboxMode::Auto => {
            if bwrap_path().is_some() {
                Backend::Bwrap
            } else if landlock_works() {
                Backend::Landlock
            } else {
                Backend::None
            }
        }
    }
}

/// What a session is told once when exec_shell has no sandbox, or `None` when it has one.
pub fn unavailable_notice(mode: SandboxMode) -> Option<String> {
    if backend(mode) != Backend::None {
        return None;
    }
    Some(match mode {
        SandboxMode::None => "shell.sandbox is \"none\": commands run with your rights and see everything you see, so exec_shell asks before every command (nothing runs without approval)".into(),
        SandboxMode::Auto => "no OS sandbox works here (bubblewrap is missing or cannot create namespaces, and the kernel has no Landlock with TCP rules): exec_shell asks before every command".into(),
        other => format!(
            "shell.sandbox = \"{}\" does not work on this machine: commands run unsandboxed, so exec_shell asks before every command",
            serde_json::to_value(other).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
        ),
    })
}

/// The bubblewrap program, if it is on the host's PATH and can create the namespaces the
/// sandbox uses (checked once by running it).
pub fn bwrap_path() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(bwrap::find_working).as_deref()
}

/// Whether the kernel enforces the Landlock rules the sandbox needs (files and TCP).
pub fn landlock_works() -> bool {
    #[cfg(target_os = "linux")]
    {
        static WORKS: OnceLock<bool> = OnceLock::new();
        *WORKS.get_or_init(landlock::supported)
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Makes this process's memory and `/proc` entries (its `environ`, which holds the host's API
/// keys) unreadable to other processes of the same user that are not root, whatever sandbox the
/// commands run in (also with none). A host calls it once at start-up; toolslot's binary does.
///
/// Root reads them anyway, which is why the sandbox hides toolslot's processes rather than
/// relying on this.
pub fn hide_host_process() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_DUMPABLE) changes only this process's dumpable flag.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// The system's folders a confined command may read: programs, their libraries and their
/// configuration. `/proc`, `/home`, `/root`, `/tmp`, `/var`, `/run` and the rest stay hidden.
const SYSTEM_DIRS: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"];

/// The folders of a confined view: the system's, and the `bin` folders of the child's PATH
/// (a tool installed in `~/.local/bin` or `~/.cargo/bin` still runs). Only folders named `bin`
/// or `sbin`: a PATH that names a home folder or `/` must not open the whole of it.
fn confined_dirs(path_var: Option<&str>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = SYSTEM_DIRS.iter().map(PathBuf::from).collect();
    for d in path_var.unwrap_or("").split(':') {
        let p = Path::new(d);
        if p.is_absolute()
            && p.file_name().is_some_and(|n| n == "bin" || n == "sbin")
            && !dirs.iter().any(|x| p.starts_with(x))
            && p.is_dir()
            && let Ok(real) = p.canonicalize()
        {
            dirs.push(real);
        }
    }
    dirs
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "link_roots_tests.rs"]
mod link_roots_tests;
