//! Entering a session's sandbox, between fork and exec: its namespaces, then the command
//! started as a clone that shares memory until its exec, stripped of every capability, made a
//! child of toolslot itself; the entering process reports the command's pid and exits at once.
//! Everything here runs in the forked child, so it only makes system calls on what
//! [`Prepared`] made before the fork.
//!
//! Why the entering process does not stay to wait: a fork of toolslot shares toolslot's memory
//! copy-on-write for as long as it lives, so while one waited for its command every page
//! toolslot wrote was copied, with a TLB flush on every core (under the mixed soak, a quarter of
//! toolslot's CPU; BENCHMARKS.md, "The mixed soak"). Gone after the command's exec, it holds
//! nothing; toolslot waits for the command itself (`child.rs`).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Everything the entering process and the command need, made before the fork (nothing may be
/// allocated after it): the namespaces, the folder, the program's candidate paths (its PATH
/// looked up inside the sandbox by trying each), its arguments and environment as `execve`
/// takes them, and a stack for the command's first moments.
pub(super) struct Prepared {
    namespaces: Vec<(RawFd, libc::c_int)>,
    dir: CString,
    candidates: Vec<CString>,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    not_found: Vec<u8>,
    stack: Vec<u8>,
    /// Where the entering process writes the command's pid (toolslot's end of a pipe).
    report: RawFd,
}

// SAFETY: the raw pointers point into the `CString`s beside them, which move with them and are
// never changed; the value is used by one process at a time (the child, after the fork).
unsafe impl Send for Prepared {}
// SAFETY: as above; nothing is written through a shared reference.
unsafe impl Sync for Prepared {}

/// Room for the command between its clone and its exec: a few system calls.
const COMMAND_STACK: usize = 64 * 1024;

impl Prepared {
    /// What entering `namespaces` and running `program` in `workspace` takes; the command's
    /// pid is written to `report`.
    pub(super) fn new(
        report: RawFd,
        namespaces: &[(OwnedFd, libc::c_int)],
        workspace: &Path,
        program: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> io::Result<Prepared> {
        let c = |s: &[u8], what: &str| CString::new(s).map_err(|_| io::Error::other(format!("{what} holds a NUL byte")));
        let dir = c(workspace.as_os_str().as_bytes(), "the workspace's path")?;
        let candidates = if program.contains('/') {
            vec![c(program.as_bytes(), "the program")?]
        } else {
            let path = env.iter().find(|(k, _)| k == "PATH").map_or("/usr/bin:/bin", |(_, v)| v.as_str());
            path.split(':')
                .filter(|d| !d.is_empty())
                .map(|d| c(format!("{d}/{program}").as_bytes(), "the program's path"))
                .collect::<io::Result<Vec<_>>>()?
        };
        let argv_owned = std::iter::once(program)
            .chain(args.iter().map(String::as_str))
            .map(|a| c(a.as_bytes(), "an argument"))
            .collect::<io::Result<Vec<_>>>()?;
        let envp_owned = env
            .iter()
            .map(|(k, v)| c(format!("{k}={v}").as_bytes(), "the environment"))
            .collect::<io::Result<Vec<_>>>()?;
        let pointers = |v: &[CString]| v.iter().map(|s| s.as_ptr()).chain([std::ptr::null()]).collect::<Vec<_>>();
        Ok(Prepared {
            namespaces: namespaces.iter().map(|(fd, flag)| (fd.as_raw_fd(), *flag)).collect(),
            dir,
            candidates,
            argv: pointers(&argv_owned),
            _argv: argv_owned,
            envp: pointers(&envp_owned),
            _envp: envp_owned,
            not_found: format!("toolslot: {program}: not found in the sandbox\n").into_bytes(),
            stack: vec![0; COMMAND_STACK],
            report,
        })
    }
}

/// Enters the namespaces and starts the command in them, as a child of toolslot; reports its
/// pid and exits. It never returns on success.
///
/// The command is made with `clone(CLONE_VM | CLONE_VFORK | CLONE_PARENT)`: it shares this
/// process's memory until it executes, as with `posix_spawn` (nothing is copied, and this
/// process waits until then), and its parent is this process's, toolslot, which waits for it.
///
/// # Safety
/// Called between fork and exec: async-signal-safe system calls only, no allocation.
pub(super) unsafe fn enter_child(prepared: &mut Prepared) -> io::Result<()> {
    // SAFETY: (the whole body) system calls on descriptors, paths and a stack made before the
    // fork; the clone's child runs `run_command` on that stack and never returns.
    unsafe {
        for (fd, flag) in &prepared.namespaces {
            if libc::setns(*fd, *flag) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if libc::chdir(prepared.dir.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        // The stack grows down from its end, which `clone` wants 16-byte aligned.
        let top = prepared.stack.as_mut_ptr().add(prepared.stack.len());
        let top = top.sub(top as usize % 16);
        let arg = prepared as *const Prepared as *mut libc::c_void;
        let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PARENT;
        let command = libc::clone(run_command, top.cast(), flags, arg);
        if command < 0 {
            return Err(io::Error::last_os_error());
        }
        // Toolslot reads the pid once this process is gone (spawn returns when it is).
        let pid = command.to_ne_bytes();
        if libc::write(prepared.report, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
            // Toolslot cannot wait for a command it cannot name: end it (it is this
            // process's sibling, so its group is still this session's).
            libc::kill(-command, libc::SIGKILL);
            libc::kill(command, libc::SIGKILL);
            libc::_exit(127);
        }
        libc::_exit(0)
    }
}

/// The command, from its clone to its exec: leads a group of its own (which toolslot kills when
/// it ends), has no capability, and runs the program; exit status 127 when no candidate runs.
/// It needs no death signal: it lives in the sandbox's process namespace, which ends, every
/// process in it, when toolslot does (the placeholder's pipe closes).
extern "C" fn run_command(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Prepared` of `enter_child`, alive (its process waits in the clone)
    // and only read here; only system calls follow.
    unsafe {
        let prepared = &*(arg as *const Prepared);
        if libc::setpgid(0, 0) != 0 || drop_capabilities().is_err() {
            libc::_exit(126);
        }
        for candidate in &prepared.candidates {
            libc::execve(candidate.as_ptr(), prepared.argv.as_ptr(), prepared.envp.as_ptr());
        }
        libc::write(2, prepared.not_found.as_ptr().cast(), prepared.not_found.len());
        libc::_exit(127)
    }
}

/// No capability left in any set, none to gain back, and no new privileges on exec: what
/// bubblewrap's `--cap-drop ALL` gives, which entering a namespace as its owner would undo.
///
/// # Safety
/// Called between fork and exec.
unsafe fn drop_capabilities() -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two 32-bit words of each set.
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let none = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: prctl and capset with integer arguments and pointers to live locals.
    unsafe {
        for cap in 0..64 {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        if libc::syscall(libc::SYS_capset, &header as *const Header, none.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
