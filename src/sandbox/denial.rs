//! Saying in the result that the sandbox refused something, so the model (and the user) knows
//! the command did not fail on its own.

use super::{Backend, Grant};

/// Signals the resource limits end a process with.
const SIGXCPU: i32 = 24;
const SIGXFSZ: i32 = 25;

/// The line added to a failed command's result when the sandbox refused a write or a
/// connection, or a resource limit stopped it; `None` when nothing points at the sandbox.
///
/// The text is part of docs/CONTRACT.md: it starts with `[sandbox: ` and names what was refused
/// and why.
pub fn denial_note(backend: Backend, grant: Grant, stderr: &str, signal: Option<i32>) -> Option<String> {
    match signal {
        Some(SIGXCPU) => return Some("[sandbox: stopped: the command used more CPU time than shell.limit_cpu_secs allows]".into()),
        Some(SIGXFSZ) => return Some("[sandbox: stopped: the command wrote a file larger than shell.limit_file_bytes allows]".into()),
        _ => {}
    }
    if backend == Backend::None {
        return None;
    }
    let text = stderr.to_ascii_lowercase();
    // Landlock refuses a connection with EACCES, which reads like a file's "Permission denied":
    // the word "connect" nearby tells them apart.
    let refused_access = text.contains("permission denied") || text.contains("operation not permitted");
    // A unix socket the filter refused to make (`socket.rs` / `_socket`, `socket(`, `nc -U`):
    // the word "socket" next to the refusal.
    let about_connecting = text.contains("connect") || (!grant.network && text.contains("socket"));
    let connected = [
        "network is unreachable",
        "could not resolve host",
        "temporary failure in name resolution",
        "name or service not known",
        "cannot assign requested address",
        "failed to connect",
        "connection refused",
    ]
    .iter()
    .any(|s| text.contains(s))
        || (refused_access && about_connecting);
    let wrote = text.contains("read-only file system") || (refused_access && !about_connecting);
    let mut refused = Vec::new();
    if wrote {
        refused.push(if grant.write {
            "a write outside the workspace (only the workspace, /tmp and shell.writable_paths are writable)"
        } else {
            "a write (this command ran without approval because it was judged read-only, so it sees the files read-only)"
        });
    }
    if connected && !grant.network {
        refused.push(if grant.write {
            "a connection (the network is off, unix sockets included: network.policy is deny)"
        } else {
            "a connection (the network is off, unix sockets included, for commands that ran without approval)"
        });
    }
    if refused.is_empty() {
        return None;
    }
    Some(format!("[sandbox: refused {} ({})]", refused.join(" and "), backend.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_named() {
        let ro = Grant::default();
        let rw = Grant {
            write: true,
            network: false,
        };
        let note = denial_note(Backend::Bwrap, ro, "touch: cannot touch 'x': Read-only file system", None).unwrap();
        assert!(
            note.starts_with("[sandbox: refused a write") && note.contains("read-only"),
            "{note}"
        );
        let note = denial_note(Backend::Landlock, rw, "curl: (7) Failed to connect to x port 80", None).unwrap();
        assert!(note.contains("a connection") && note.contains("landlock"), "{note}");
        let python = "  File \"socket.py\", in create_connection\nPermissionError: [Errno 13] Permission denied";
        let note = denial_note(Backend::Landlock, rw, python, None).unwrap();
        assert!(note.contains("a connection") && !note.contains("a write"), "{note}");
        // A unix socket the filter refused to make is a connection, not a write.
        let unix = "    _socket.socket.__init__(self, family, type, proto, fileno)\nPermissionError: [Errno 13] Permission denied";
        let note = denial_note(Backend::Bwrap, rw, unix, None).unwrap();
        assert!(
            note.contains("a connection") && note.contains("unix sockets") && !note.contains("a write"),
            "{note}"
        );
        assert!(denial_note(Backend::Bwrap, rw, "error: no such file", None).is_none());
        assert!(denial_note(Backend::None, ro, "Read-only file system", None).is_none());
        assert!(
            denial_note(Backend::None, ro, "", Some(SIGXFSZ))
                .unwrap()
                .contains("shell.limit_file_bytes")
        );
    }
}
