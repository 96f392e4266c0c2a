//! Confinement of file tools to the session's workspace root, and opening what it allows.
//!
//! A path is resolved component by component from a directory handle, as the kernel would
//! resolve it: every symlink is followed (at most [`MAX_SYMLINK_HOPS`] times), `..` climbs from
//! where the walk really is, and the result is the real path of the object the tool will open.
//! Only that path is compared with the workspace, so neither `link/.` nor `link/` nor a
//! `missing/../link` reaches what `link` points to outside. Each step is one `fstatat` from the
//! handle of the folder above (plus one `openat` to step into a folder), so resolution is linear
//! in the number of components, and [`confine_input`] refuses absurd paths before any of it
//! (`workspace.max_path_bytes`, `workspace.max_path_components`).
//!
//! Reads go through [`open_regular`]: its folders walked down from the workspace's own folder
//! with no link followed at any step ([`walk_down`], so a folder a running program swaps for a
//! link after the resolution fails the open rather than leading it out), opened without
//! following a last symlink and without blocking, refused unless the opened object is a
//! regular file inside the workspace (a FIFO would block the reader for ever, a device such as
//! /dev/zero never ends), and read to at most a limit whatever the file's size claims
//! ([`read_bounded`]). Writes take the same walk (`write_beneath.rs`).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use crate::config::WorkspaceConfig;
use crate::paths::c_name;
use crate::tool::{ToolContext, ToolError};

/// Symlinks followed at most while resolving one path: the kernel's own limit (MAXSYMLINKS),
/// so a path resolves here exactly when `open` would resolve it.
pub const MAX_SYMLINK_HOPS: usize = 40;

/// [`confine`] for a tool's input: the path is first held to the workspace limits of the
/// config (its length and component count), so an absurd path is refused at once.
///
/// # Errors
/// An `invalid_input` error on field `field` saying why, naming the limit it broke.
pub fn confine_input(ctx: &ToolContext, path: &str, field: &str) -> Result<PathBuf, ToolError> {
    check_limits(path, field, &ctx.config.workspace)?;
    confine(&ctx.workspace, path, field)
}

fn check_limits(path: &str, field: &str, cfg: &WorkspaceConfig) -> Result<(), ToolError> {
    if path.len() > cfg.max_path_bytes {
        return Err(ToolError::invalid(
            field,
            format!(
                "`{field}` is {} bytes long, over the limit of {} bytes (workspace.max_path_bytes)",
                path.len(),
                cfg.max_path_bytes
            ),
        ));
    }
    let components = path.split('/').filter(|c| !c.is_empty() && *c != ".").count();
    if components > cfg.max_path_components {
        return Err(ToolError::invalid(
            field,
            format!(
                "`{field}` has {components} components, over the limit of {} (workspace.max_path_components)",
                cfg.max_path_components
            ),
        ));
    }
    Ok(())
}

/// Resolves `path` (relative to `workspace`, or absolute) to the real path of what it names,
/// and refuses it unless that is inside the workspace. A path that does not exist yet (a new
/// file) is resolved through its nearest existing folder, so a symlinked folder cannot smuggle
/// a write out either.
///
/// # Errors
/// An `invalid_input` error on field `field` saying why.
pub fn confine(workspace: &Path, path: &str, field: &str) -> Result<PathBuf, ToolError> {
    if path.is_empty() {
        return Err(ToolError::invalid(
            field,
            format!("`{field}` is empty; give a path inside the workspace"),
        ));
    }
    if path.contains('\0') {
        return Err(ToolError::invalid(field, format!("`{field}` contains a NUL byte")));
    }
    let root = workspace
        .canonicalize()
        .map_err(|e| ToolError::tool(format!("the workspace {} is not usable: {e}", workspace.display())))?;
    let given = Path::new(path);
    let start = if given.is_absolute() { PathBuf::from("/") } else { root.clone() };
    let real = resolve(&start, given).map_err(|failure| match failure {
        Failure::Loop => ToolError::invalid(
            field,
            format!("`{path}` goes through more than {MAX_SYMLINK_HOPS} symlinks (a loop?)"),
        ),
        Failure::NotFolder(name) => ToolError::invalid(
            field,
            format!(
                "`{path}`: `{}` is not a folder, yet the path goes on after it",
                name.to_string_lossy()
            ),
        ),
        Failure::Io(e) => ToolError::invalid(field, format!("`{path}` cannot be resolved: {e}")),
    })?;
    if !real.starts_with(&root) {
        return Err(outside(field, path));
    }
    Ok(real)
}

fn outside(field: &str, path: &str) -> ToolError {
    ToolError::invalid(
        field,
        format!("`{path}` is outside the workspace; only paths inside the workspace root may be used"),
    )
}

/// Why a path did not resolve.
enum Failure {
    /// More than [`MAX_SYMLINK_HOPS`] symlinks.
    Loop,
    /// A component that is not a folder is followed by more of the path.
    NotFolder(OsString),
    /// The file system refused a step (permission, a name too long).
    Io(std::io::Error),
}

/// One step of a path still to walk.
enum Part {
    Root,
    Up,
    Name(OsString),
}

fn parts_of(path: &Path) -> impl DoubleEndedIterator<Item = Part> + '_ {
    path.components().filter_map(|c| match c {
        Component::RootDir => Some(Part::Root),
        Component::ParentDir => Some(Part::Up),
        Component::Normal(n) => Some(Part::Name(n.to_os_string())),
        Component::CurDir | Component::Prefix(_) => None,
    })
}

/// Walks `path` from `start` (a real folder), following symlinks from directory handles; the
/// real path of what it names, with any part that does not exist yet appended as written.
fn resolve(start: &Path, path: &Path) -> Result<PathBuf, Failure> {
    let mut pending: VecDeque<Part> = parts_of(path).collect();
    let mut dir = Dir::open(start).map_err(Failure::Io)?;
    let mut real = start.to_path_buf();
    // Names below `real` that do not exist: nothing there can be a symlink.
    let mut missing: Vec<OsString> = Vec::new();
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        match part {
            Part::Root => {
                dir = Dir::open(Path::new("/")).map_err(Failure::Io)?;
                real = PathBuf::from("/");
                missing.clear();
            }
            Part::Up => {
                if missing.pop().is_none() && real.pop() {
                    dir = dir.child_dir(OsStr::new("..")).map_err(Failure::Io)?;
                }
            }
            Part::Name(name) => {
                if !missing.is_empty() {
                    missing.push(name);
                    continue;
                }
                match dir.kind_of(&name) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(name),
                    Err(e) => return Err(Failure::Io(e)),
                    Ok(Kind::Symlink) => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return Err(Failure::Loop);
                        }
                        let target = PathBuf::from(dir.read_link(&name).map_err(Failure::Io)?);
                        for p in parts_of(&target).rev() {
                            pending.push_front(p);
                        }
                    }
                    Ok(Kind::Folder) => {
                        dir = dir.child_dir(&name).map_err(Failure::Io)?;
                        real.push(&name);
                    }
                    Ok(Kind::Other) => {
                        if !pending.is_empty() {
                            return Err(Failure::NotFolder(name));
                        }
                        real.push(&name);
                    }
                }
            }
        }
    }
    real.extend(missing);
    Ok(real)
}

enum Kind {
    Symlink,
    Folder,
    Other,
}

/// Refuses `path` when the session's policy hides it from `tool`: a deny rule names it by a
/// `path` glob alone, in any spelling, or names a link that leads to it.
///
/// # Errors
/// [`ToolError`] (not approved) naming the path as the model gave it (`shown`).
pub fn refuse_hidden(ctx: &ToolContext, tool: &str, path: &Path, shown: &str) -> Result<(), ToolError> {
    if ctx.screen(tool).is_some_and(|hides| hides(path)) {
        return Err(ToolError {
            field: Some("path".into()),
            ..ToolError::refused(
                crate::tool::ErrorCategory::NotApproved,
                format!("`{shown}` is denied by the policy (a deny rule names its path); {tool} was not run."),
            )
        });
    }
    Ok(())
}

/// An open folder handle (for looking up names in it, and as the folder `*at` calls work in).
pub(super) struct Dir(std::os::fd::OwnedFd);

#[cfg(target_os = "linux")]
const LOOKUP_ONLY: libc::c_int = libc::O_PATH;
#[cfg(not(target_os = "linux"))]
const LOOKUP_ONLY: libc::c_int = libc::O_RDONLY;

impl Dir {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(LOOKUP_ONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Self(file.into()))
    }

    pub(super) fn raw(&self) -> libc::c_int {
        use std::os::fd::AsRawFd;
        self.0.as_raw_fd()
    }

    fn child_dir(&self, name: &OsStr) -> std::io::Result<Self> {
        let c = c_name(name)?;
        // SAFETY: openat with a valid directory fd and a NUL-terminated name; the returned
        // fd (checked for -1) is owned by the OwnedFd from here on.
        let fd = unsafe {
            libc::openat(
                self.raw(),
                c.as_ptr(),
                LOOKUP_ONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        Ok(Self(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }))
    }

    /// Makes folder `name` here (one that is there already is fine: another call made it).
    fn make_dir(&self, name: &OsStr) -> std::io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: valid fd and NUL-terminated name.
        if unsafe { libc::mkdirat(self.raw(), c.as_ptr(), 0o777) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(e);
            }
        }
        Ok(())
    }

    fn kind_of(&self, name: &OsStr) -> std::io::Result<Kind> {
        let c = c_name(name)?;
        // SAFETY: zeroed `stat` is a valid out-parameter; fstatat fills it on success.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd, NUL-terminated name, valid pointer to `st`.
        let rc = unsafe { libc::fstatat(self.raw(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFDIR => Kind::Folder,
            _ => Kind::Other,
        })
    }

    fn read_link(&self, name: &OsStr) -> std::io::Result<OsString> {
        let c = c_name(name)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: valid fd, NUL-terminated name, `buf` is writable for its whole length.
        let n = unsafe { libc::readlinkat(self.raw(), c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(OsString::from_vec(buf))
    }
}

/// The folder `dir` (a real path inside `workspace`, as [`confine`] gives it) as a handle,
/// reached from the workspace's own folder one name at a time without following a link at
/// any step; with `make`, folders not there yet are made on the way.
///
/// `confine` resolved the path once; a program running meanwhile (a command cleared to write,
/// in the background) can swap a folder on the way for a link to anywhere between that and
/// the open. Walked this way, such a swap makes the walk fail (`ELOOP`, `ENOTDIR`) instead of
/// leading the read or the write out of the workspace.
///
/// # Errors
/// The step's error; `InvalidInput` for a path that is not inside the workspace.
pub(super) fn walk_down(workspace: &Path, dir: &Path, make: bool) -> std::io::Result<Dir> {
    walk_down_from(&workspace.canonicalize()?, dir, make)
}

/// [`walk_down`] from the workspace's real path `root`, for a caller that has it already.
pub(super) fn walk_down_from(root: &Path, dir: &Path, make: bool) -> std::io::Result<Dir> {
    // Only a real path under the real root: every caller has one (`confine`'s, or a walk
    // below it), and a path under the workspace as spelt could start the walk elsewhere.
    let rel = dir
        .strip_prefix(root)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "not inside the workspace"))?;
    let mut at = Dir::open(root)?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a resolved path"));
        };
        at = match at.child_dir(name) {
            Err(e) if make && e.raw_os_error() == Some(libc::ENOENT) => {
                at.make_dir(name)?;
                at.child_dir(name)?
            }
            other => other?,
        };
    }
    Ok(at)
}

/// The error for a path whose folders changed under a walk (`ELOOP`, `ENOTDIR`): a folder on
/// the way became a link or a file since the path was resolved.
pub(super) fn swapped(field: &str, shown: &str, e: &std::io::Error) -> Option<ToolError> {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)).then(|| {
        ToolError::invalid(
            field,
            format!("`{shown}` changed while it was opened (a folder on its way became a link or a file); nothing was done"),
        )
    })
}

/// The path of what `file` is now, as the kernel knows it (`/proc/self/fd`); `None` where
/// there is no `/proc`.
pub fn opened_path(file: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// The path shown to the model: relative to the workspace where possible.
pub fn display(workspace: &Path, path: &Path) -> String {
    let root = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    match path.strip_prefix(&root) {
        // The workspace itself, which has no relative name of its own.
        Ok(p) if p.as_os_str().is_empty() => ".".to_string(),
        Ok(p) => p.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// Opens the confined path `path` for reading: without following a symlink put there since it
/// was resolved, without blocking (a FIFO opens at once instead of waiting for a writer), and
/// only if what was opened is a regular file still inside `workspace`.
///
/// # Errors
/// An `invalid_input` error on `field` for a folder, a FIFO, a device or a socket, or a file
/// that turned out to be outside; a `tool_error` when it cannot be opened.
pub fn open_regular(workspace: &Path, path: &Path, field: &str) -> Result<std::fs::File, ToolError> {
    let shown = display(workspace, path);
    // The real root once: the walk starts there and the opened file is held to it.
    let root = workspace
        .canonicalize()
        .map_err(|e| ToolError::tool(format!("the workspace {} is not usable: {e}", workspace.display())))?;
    let (Some(parent), Some(name), false) = (path.parent(), path.file_name(), root == path) else {
        return Err(ToolError::invalid(field, format!("`{shown}` is a directory; use list_dir")));
    };
    // The folders on the way are walked from the workspace, none followed if it became a link.
    let dir = walk_down_from(&root, parent, false).map_err(|e| {
        swapped(field, &shown, &e).unwrap_or_else(|| match e.kind() {
            std::io::ErrorKind::InvalidInput => outside(field, &shown),
            _ => ToolError::tool(format!("cannot read `{shown}`: {e}")),
        })
    })?;
    let c = c_name(name).map_err(|e| ToolError::invalid(field, format!("`{shown}`: {e}")))?;
    // SAFETY: valid folder fd and NUL-terminated name; the fd returned (checked) is owned below.
    let fd = unsafe {
        libc::openat(
            dir.raw(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            // A socket cannot be opened; a symlink swapped in after resolution is refused.
            Some(libc::ENXIO) | Some(libc::ELOOP) => not_regular(field, &shown, "a socket or a symlink"),
            _ => ToolError::tool(format!("cannot read `{shown}`: {e}")),
        });
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let file: std::fs::File = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    let kind = file
        .metadata()
        .map_err(|e| ToolError::tool(format!("cannot read `{shown}`: {e}")))?
        .file_type();
    if kind.is_dir() {
        return Err(ToolError::invalid(field, format!("`{shown}` is a directory; use list_dir")));
    }
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "a socket"
        };
        return Err(not_regular(field, &shown, what));
    }
    still_inside(&root, &file, field, &shown)?;
    Ok(file)
}

/// On Linux, the opened file's own path (`/proc/self/fd`) must still be inside the workspace:
/// a folder swapped for a symlink between resolution and `open` is caught here.
#[cfg(target_os = "linux")]
fn still_inside(root: &Path, file: &std::fs::File, field: &str, shown: &str) -> Result<(), ToolError> {
    let Some(real) = opened_path(file) else {
        // No /proc (a minimal container): the resolution above stands alone.
        return Ok(());
    };
    if real.starts_with(root) {
        Ok(())
    } else {
        Err(outside(field, shown))
    }
}

#[cfg(not(target_os = "linux"))]
fn still_inside(_root: &Path, _file: &std::fs::File, _field: &str, _shown: &str) -> Result<(), ToolError> {
    Ok(())
}

fn not_regular(field: &str, shown: &str, what: &str) -> ToolError {
    ToolError::invalid(
        field,
        format!("`{shown}` is {what}, not a regular file; only regular files are read"),
    )
}

pub use crate::regular_file::read_bounded;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/a.txt"), "x").unwrap();
        let root = ws.canonicalize().unwrap();
        assert_eq!(confine(ws, "src/a.txt", "path").unwrap(), root.join("src/a.txt"));
        assert_eq!(confine(ws, "src/new/b.txt", "path").unwrap(), root.join("src/new/b.txt"));
        assert_eq!(confine(ws, "./src/../src/a.txt", "path").unwrap(), root.join("src/a.txt"));
        assert_eq!(confine(ws, "new/../src/a.txt", "path").unwrap(), root.join("src/a.txt"));
        assert_eq!(
            confine(ws, root.join("src/a.txt").to_str().unwrap(), "path").unwrap(),
            root.join("src/a.txt")
        );
        for bad in [
            "../x",
            "src/../../x",
            "/etc/passwd",
            "new/../../x",
            "",
            "src/a.txt/x",
            "src/a.txt/..",
        ] {
            let err = confine(ws, bad, "path").unwrap_err();
            assert_eq!(err.field.as_deref(), Some("path"), "{bad}");
        }
    }

    #[test]
    fn symlinks_pointing_out_are_refused_however_they_are_spelt() {
        let dir = tempfile::tempdir().unwrap();
        let outside_dir = tempfile::tempdir().unwrap();
        std::fs::write(outside_dir.path().join("secret"), "s").unwrap();
        let ws = dir.path();
        std::os::unix::fs::symlink(outside_dir.path(), ws.join("link")).unwrap();
        std::os::unix::fs::symlink(outside_dir.path().join("secret"), ws.join("file_link")).unwrap();
        std::os::unix::fs::symlink("sub/../../", ws.join("up")).unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        for bad in [
            "link/secret",
            "link/new_file",
            "file_link",
            "file_link/",
            "file_link/.",
            "./file_link/./",
            "missing/../file_link",
            "missing/../link/secret",
            "up",
            "up/x",
            "sub/../file_link",
        ] {
            assert!(confine(ws, bad, "path").is_err(), "{bad} was let out");
        }
        // A symlink that stays inside resolves to its target.
        std::fs::write(ws.join("sub/real.txt"), "r").unwrap();
        std::os::unix::fs::symlink("sub/real.txt", ws.join("inside")).unwrap();
        assert_eq!(
            confine(ws, "inside/", "path").unwrap(),
            ws.canonicalize().unwrap().join("sub/real.txt")
        );
    }

    #[test]
    fn a_symlink_loop_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("b", dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink("a", dir.path().join("b")).unwrap();
        let err = confine(dir.path(), "a/x", "path").unwrap_err();
        assert!(err.message.contains("symlinks"), "{}", err.message);
    }

    #[test]
    fn only_regular_files_are_opened_and_reads_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let fifo = ws.join("fifo");
        let c = c_name(&fifo).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = open_regular(ws, &confine(ws, "fifo", "path").unwrap(), "path").unwrap_err();
        assert!(err.message.contains("FIFO"), "{}", err.message);
        std::os::unix::fs::symlink("/dev/zero", ws.join("zero")).unwrap();
        assert!(confine(ws, "zero", "path").is_err(), "/dev/zero is outside");
        // The workspace itself is a folder, said as such.
        let err = open_regular(ws, &confine(ws, ".", "path").unwrap(), "path").unwrap_err();
        assert!(err.message.contains("is a directory"), "{}", err.message);
        // Named directly, it is not even looked at: nothing outside the workspace is opened.
        let err = open_regular(ws, Path::new("/dev/zero"), "path").unwrap_err();
        assert!(err.message.contains("outside the workspace"), "{}", err.message);
        std::fs::write(ws.join("f"), "12345").unwrap();
        let f = open_regular(ws, &ws.join("f"), "path").unwrap();
        assert_eq!(read_bounded(f, 5).unwrap().unwrap(), b"12345");
        let f = open_regular(ws, &ws.join("f"), "path").unwrap();
        assert_eq!(read_bounded(f, 4).unwrap(), None);
    }

    #[test]
    fn limits_name_their_keys() {
        let cfg = crate::config::Config::builtin().workspace;
        let long = "a/".repeat(cfg.max_path_bytes);
        assert!(
            check_limits(&long, "path", &cfg)
                .unwrap_err()
                .message
                .contains("workspace.max_path_bytes")
        );
        let many = "a/".repeat(cfg.max_path_components + 1);
        assert!(
            check_limits(&many, "path", &cfg)
                .unwrap_err()
                .message
                .contains("workspace.max_path_components")
        );
    }
}
