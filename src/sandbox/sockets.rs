//! "No network" includes unix sockets, and under Landlock every way out that is not TCP: a
//! seccomp filter, installed in the child before it runs anything, that refuses to make a
//! socket able to reach a listener on a socket file or in the abstract namespace, or (under
//! Landlock) to send anywhere but over TCP.
//!
//! A network namespace (bubblewrap) or Landlock's TCP rules stop TCP, but a socket file is
//! reached through the file system, and neither a read-only bind nor Landlock stops a
//! `connect()` to one: the kernel checks only write permission on the socket's inode, which a
//! read-only mount does not remove. So a program that has no network may not create
//! `AF_UNIX` sockets at all: `socket(AF_UNIX, …)` fails with EACCES, `socketpair` is allowed
//! only for stream pairs (a connected stream socket cannot be connected elsewhere; a datagram
//! one can), and `io_uring_setup` fails (its operations would make sockets past the filter).
//!
//! Landlock has rules for TCP alone: under it a UDP datagram (a DNS query carrying a secret)
//! or another family (`AF_VSOCK`, to the machine hosting a virtual one) would leave. So there
//! ([`NoSockets::tcp_only`]) a program without the network may make only IP stream sockets
//! (TCP, which Landlock governs) and netlink ones (the kernel's own, which address no other
//! machine). Not under bubblewrap, whose network namespace holds only a loopback no datagram
//! leaves, and which itself needs an IP datagram socket to bring that loopback up.
//!
//! Written here rather than with a seccomp crate: the maintained one (seccompiler) kills a
//! process of a foreign architecture outright and does not see x86-64's x32 system calls, both
//! of which this filter must answer precisely (refuse only the calls that make sockets).

/// The classic BPF instruction the kernel reads (`struct sock_filter`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// The filter program as the kernel takes it (`struct sock_fprog`), with the instructions it
/// points at.
#[derive(Debug)]
pub struct NoSockets {
    insns: Box<[Insn]>,
}

// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG0: u32 = 16;
const ARG1: u32 = 24;
const ARG2: u32 = 32;
const ARG3: u32 = 40;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const AND_K: u16 = 0x54;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_EACCES: u32 = 0x0005_0000 | libc::EACCES as u32;

const AF_UNIX: u32 = 1;
const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;
const AF_NETLINK: u32 = 16;
const SOCK_STREAM: u32 = 1;
const IPPROTO_TCP: u32 = 6;
/// `MSG_FASTOPEN`: data sent with the connection's first packet.
const MSG_FASTOPEN: u32 = 0x2000_0000;
/// The socket type without its flags (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`).
const SOCK_TYPE_MASK: u32 = 0xf;

#[cfg(target_arch = "x86_64")]
mod arch {
    /// AUDIT_ARCH_X86_64.
    pub const NATIVE: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    /// x32 system calls carry this bit in their number, under the native architecture.
    pub const X32_BIT: u32 = 0x4000_0000;
    /// i386, which an x86-64 kernel also runs: `socketcall` (whose arguments a filter cannot
    /// read) and `socket` are refused there whole.
    pub const FOREIGN: Option<(u32, &[u32])> = Some((3 | 0x4000_0000, &[102, 359, 360]));
}

#[cfg(target_arch = "aarch64")]
mod arch {
    /// AUDIT_ARCH_AARCH64.
    pub const NATIVE: u32 = 183 | 0x8000_0000 | 0x4000_0000;
    pub const X32_BIT: u32 = 0;
    /// 32-bit ARM (EABI): `socket`, `socketpair`.
    pub const FOREIGN: Option<(u32, &[u32])> = Some((40 | 0x4000_0000, &[281, 288]));
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    // Elsewhere the architecture check below refuses nothing it cannot read: only the native
    // calls are filtered, and a foreign one is allowed (a known gap, named in ARCHITECTURE.md).
    pub const NATIVE: u32 = 0;
    pub const X32_BIT: u32 = 0;
    pub const FOREIGN: Option<(u32, &[u32])> = None;
}

/// Whether `sock` is x32's twin of the native `socket` (the bit `x32` set).
fn x32_of(sock: u32, x32: u32) -> u32 {
    if x32 != 0 && sock & x32 != 0 { x32 } else { 0 }
}

/// The calls that send with flags, and where their flags are: `sendto`'s fourth argument,
/// `sendmsg`'s third, `sendmmsg`'s fourth. Native, or (the bit `x32` set) x32's, whose
/// `sendmsg` and `sendmmsg` have numbers of their own (518, 538: their structures differ).
fn send_calls(x32: u32) -> [(u32, u32); 3] {
    if x32 == 0 {
        [
            (libc::SYS_sendto as u32, ARG3),
            (libc::SYS_sendmsg as u32, ARG2),
            (libc::SYS_sendmmsg as u32, ARG3),
        ]
    } else {
        [(libc::SYS_sendto as u32 | x32, ARG3), (518 | x32, ARG2), (538 | x32, ARG3)]
    }
}

/// Allows the call when its second argument (a socket's type) is a stream, else refuses it.
fn stream_only() -> [Insn; 5] {
    [
        stmt(LD_W_ABS, ARG1),
        stmt(AND_K, SOCK_TYPE_MASK),
        jump(SOCK_STREAM, 0, 1),
        stmt(RET_K, RET_ALLOW),
        stmt(RET_K, RET_EACCES),
    ]
}

fn stmt(code: u16, k: u32) -> Insn {
    Insn { code, jt: 0, jf: 0, k }
}

fn jump(k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code: JEQ_K, jt, jf, k }
}

impl NoSockets {
    /// The filter for this architecture that refuses unix sockets (for a program in a network
    /// namespace of its own).
    pub fn new() -> Self {
        Self::made(false)
    }

    /// As [`NoSockets::new`], and refusing every socket but IP streams and netlink: for a
    /// program whose only fence is Landlock's, which knows TCP alone.
    pub fn tcp_only() -> Self {
        Self::made(true)
    }

    fn made(tcp_only: bool) -> Self {
        let socket = libc::SYS_socket as u32;
        let socketpair = libc::SYS_socketpair as u32;
        let io_uring = libc::SYS_io_uring_setup as u32;
        let mut p = Vec::new();
        p.push(stmt(LD_W_ABS, ARCH));
        if let Some((foreign, calls)) = arch::FOREIGN {
            // Native: skip the foreign block (its check, load, the list, two returns).
            let skip = u8::try_from(calls.len() + 4).unwrap_or(u8::MAX);
            p.push(jump(arch::NATIVE, skip, 0));
            // Neither native nor the known foreign one: nothing to read, allowed.
            p.push(jump(foreign, 0, u8::try_from(calls.len() + 1).unwrap_or(u8::MAX)));
            p.push(stmt(LD_W_ABS, NR));
            for (i, nr) in calls.iter().enumerate() {
                // On a match, jump to the refusal after the list.
                let to_refusal = u8::try_from(calls.len() - i).unwrap_or(u8::MAX);
                p.push(jump(*nr, to_refusal, 0));
            }
            p.push(stmt(RET_K, RET_ALLOW));
            p.push(stmt(RET_K, RET_EACCES));
        }
        p.extend(Self::checks(socket, socketpair, io_uring, arch::X32_BIT, tcp_only));
        Self {
            insns: p.into_boxed_slice(),
        }
    }

    /// Loads the call's number and refuses what makes a socket: for each of the native number
    /// and (on x86-64) its x32 twin.
    fn checks(socket: u32, socketpair: u32, io_uring: u32, x32: u32, tcp_only: bool) -> Vec<Insn> {
        let mut numbers = vec![(socket, socketpair, io_uring)];
        if x32 != 0 {
            // x32's socket calls share x86-64's numbers with the bit set (io_uring_setup too).
            numbers.push((socket | x32, socketpair | x32, io_uring | x32));
        }
        let mut p = vec![stmt(LD_W_ABS, NR)];
        // Each block: is it socket? socketpair? io_uring_setup? The blocks are laid out so a
        // miss falls through to the next block, and the last miss allows.
        let mut blocks: Vec<Vec<Insn>> = Vec::new();
        for (sock, pair, ring) in numbers {
            let socket_check = if tcp_only {
                // IP streams of protocol TCP (0 or IPPROTO_TCP: not MPTCP nor SCTP, whose
                // connections Landlock does not see) and netlink pass; everything else is refused.
                vec![
                    jump(sock, 0, 12),
                    stmt(LD_W_ABS, ARG0),
                    jump(AF_INET, 2, 0),
                    jump(AF_INET6, 1, 0),
                    jump(AF_NETLINK, 6, 7),
                    stmt(LD_W_ABS, ARG1),
                    stmt(AND_K, SOCK_TYPE_MASK),
                    jump(SOCK_STREAM, 0, 4),
                    stmt(LD_W_ABS, ARG2),
                    jump(0, 1, 0),
                    jump(IPPROTO_TCP, 0, 1),
                    stmt(RET_K, RET_ALLOW),
                    stmt(RET_K, RET_EACCES),
                ]
            } else {
                // Unix sockets are refused, every other family passes.
                vec![
                    jump(sock, 0, 4),
                    stmt(LD_W_ABS, ARG0),
                    jump(AF_UNIX, 0, 1),
                    stmt(RET_K, RET_EACCES),
                    stmt(RET_K, RET_ALLOW),
                ]
            };
            let mut block = socket_check;
            block.push(jump(pair, 0, 5));
            block.extend(stream_only());
            block.extend([jump(ring, 0, 1), stmt(RET_K, RET_EACCES)]);
            if tcp_only {
                // A TCP fast open connects from `sendto`/`sendmsg`, where Landlock's connect
                // rule never looks: refused.
                for (nr, flags) in send_calls(x32_of(sock, x32)) {
                    block.extend([
                        jump(nr, 0, 4),
                        stmt(LD_W_ABS, flags),
                        Insn {
                            code: JSET_K,
                            jt: 0,
                            jf: 1,
                            k: MSG_FASTOPEN,
                        },
                        stmt(RET_K, RET_EACCES),
                        stmt(RET_K, RET_ALLOW),
                    ]);
                }
            }
            blocks.push(block);
        }
        for b in blocks {
            p.extend(b);
        }
        p.push(stmt(RET_K, RET_ALLOW));
        p
    }

    /// Installs the filter on the calling thread, with no new privileges (which a filter
    /// needs without CAP_SYS_ADMIN); the filter is inherited by everything it then runs.
    ///
    /// # Safety
    /// Async-signal-safe (two `prctl` calls on memory allocated before the fork), so it may
    /// run between fork and exec.
    pub unsafe fn install(&self) -> std::io::Result<()> {
        #[repr(C)]
        struct Prog {
            len: u16,
            filter: *const Insn,
        }
        let prog = Prog {
            len: u16::try_from(self.insns.len()).unwrap_or(u16::MAX),
            filter: self.insns.as_ptr(),
        };
        // SAFETY: prctl with integer arguments and a pointer to a live `sock_fprog`.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const Prog, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

impl Default for NoSockets {
    fn default() -> Self {
        Self::new()
    }
}

/// With `shell.allow_unix_sockets` set, how a program without the network is kept to the
/// sockets listed: the filter is off (it cannot tell one socket path from another), and every
/// other socket file bound on this machine is masked in bubblewrap's view, so a `connect()` to
/// it finds `/dev/null`. `None` when that cannot be done safely (a socket bound by a relative
/// path, which cannot be found to mask): the filter then stays on and no socket is reachable.
///
/// The bound sockets are read from `/proc/net/unix` (this network namespace's, the host's) when
/// the program starts: a socket bound later is not masked from it.
pub fn masks_except(allowed: &[String]) -> Option<Vec<std::path::PathBuf>> {
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    sockets_to_mask(&table, allowed)
}

/// [`masks_except`] over the text of `/proc/net/unix`.
fn sockets_to_mask(table: &str, allowed: &[String]) -> Option<Vec<std::path::PathBuf>> {
    use std::path::{Path, PathBuf};
    let allowed: Vec<PathBuf> = allowed
        .iter()
        .map(|a| crate::config::expand_home(a))
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect();
    let mut out: Vec<PathBuf> = Vec::new();
    // Columns: Num RefCount Protocol Flags Type St Inode [Path]; a path may hold spaces.
    for line in table.lines().skip(1) {
        let Some(path) = path_field(line) else { continue };
        // Abstract names (`@…`) live in the network namespace, which bubblewrap replaces.
        if path.starts_with('@') {
            continue;
        }
        if !path.starts_with('/') {
            return None;
        }
        let real = Path::new(path).canonicalize().unwrap_or_else(|_| PathBuf::from(path));
        if allowed.contains(&real) || !real.exists() || out.contains(&real) {
            continue;
        }
        out.push(real);
    }
    Some(out)
}

/// The path of a line of `/proc/net/unix`: what follows its seven fixed columns, if anything.
fn path_field(line: &str) -> Option<&str> {
    let mut rest = line;
    for _ in 0..7 {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace)?;
        rest = &rest[end..];
    }
    let path = rest.trim();
    (!path.is_empty()).then_some(path)
}

#[cfg(test)]
mod socket_list_tests {
    use super::sockets_to_mask;

    #[test]
    fn every_bound_socket_but_the_allowed_is_masked_and_a_relative_one_keeps_the_filter() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.sock"), dir.path().join("b c.sock"));
        let _la = std::os::unix::net::UnixListener::bind(&a).unwrap();
        let _lb = std::os::unix::net::UnixListener::bind(&b).unwrap();
        let table = format!(
            "Num       RefCount Protocol Flags    Type St Inode Path\n\
             0000: 00000002 00000000 00010000 0001 01 11 {}\n\
             0000: 00000002 00000000 00010000 0001 01 12 {}\n\
             0000: 00000002 00000000 00010000 0001 01 13 @abstract\n\
             0000: 00000003 00000000 00000000 0001 03 14\n",
            a.display(),
            b.display()
        );
        let masked = sockets_to_mask(&table, &[a.display().to_string()]).unwrap();
        assert_eq!(masked, vec![b.canonicalize().unwrap()]);
        let relative = format!("{table}0000: 00000002 00000000 00010000 0001 01 15 relative.sock\n");
        assert!(sockets_to_mask(&relative, &[]).is_none());
    }
}
