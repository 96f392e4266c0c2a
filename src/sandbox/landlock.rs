//! Landlock: the kernel's access control, which the child applies to itself between fork and
//! exec (see `spawn.rs`), so it needs no extra program.
//!
//! The ruleset is built here, in the parent, because building it allocates and opens files,
//! which a forked child of a threaded process must not do; the child only calls
//! `landlock_restrict_self` on the ruleset's descriptor. Files are allow-listed: reading and
//! running beneath the folders of the view, writing beneath the workspace (and the private
//! temporary folder, and `shell.writable_paths`) only for a call cleared to write. `/proc` is
//! left out of every view: Landlock does not hide other processes' `environ`, only a path
//! rule does. TCP bind and connect are refused unless the call may use the network; signals
//! and abstract unix sockets outside the sandbox are scoped away (kernels with ABI 6).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope,
};

use super::{Grant, SandboxError, View};

/// The ABI whose rights the rulesets ask for; older kernels enforce what they know (files and
/// TCP are required, see [`supported`]).
const WANTED: ABI = ABI::V6;

/// Devices every program expects to write or read, whatever the view.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Whether this kernel enforces Landlock's file and TCP rules (ABI 4, Linux 6.7).
pub(super) fn supported() -> bool {
    let required = || -> Result<(), landlock::RulesetError> {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V4))?
            .handle_access(AccessNet::from_all(ABI::V4))?
            .create()?;
        Ok(())
    };
    required().is_ok()
}

/// The folders to allow reading beneath, as they really are: a rule is made on what a path
/// leads to, and a hidden path is carved out of the folders that hold it by their real paths,
/// so a root reached through a symlink (`/home` leading to `/data/home`) would allow its whole
/// target, hidden paths and all. Each is resolved; those that are no folder, lie under one
/// of `excluded` (`/proc`, `/dev`) or hold one (a `bin` in PATH leading to `/`), or lie inside
/// another are dropped.
fn real_roots(paths: Vec<PathBuf>, excluded: &[&Path]) -> Vec<PathBuf> {
    let real: Vec<PathBuf> = paths
        .into_iter()
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| p.is_dir() && !excluded.iter().any(|x| p.starts_with(x) || x.starts_with(p)))
        .collect();
    crate::paths::outermost(&real)
}

fn err(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Landlock(e.to_string())
}

/// The ruleset for one program, as the descriptor the child restricts itself with.
pub(super) fn ruleset(
    workspace: &Path,
    grant: Grant,
    view: View,
    writable: &[PathBuf],
    temp: Option<&Path>,
    confined: &[PathBuf],
    hidden: &[PathBuf],
) -> Result<OwnedFd, SandboxError> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(WANTED)).map_err(err)?;
    if !grant.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(WANTED)).map_err(err)?;
    }
    let mut created = ruleset.scope(Scope::from_all(WANTED)).map_err(err)?.create().map_err(err)?;
    let read = AccessFs::from_read(WANTED);
    let readable: Vec<PathBuf> = match view {
        View::Confined => confined.iter().cloned().chain([workspace.to_path_buf()]).collect(),
        View::Full => std::fs::read_dir("/")
            .map_err(err)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect(),
    };
    // `/dev` is no root: a disk's device (`/dev/vda`, `/dev/mapper/…`), readable where the
    // user may read it, holds every file, hidden or not; the devices a program needs are
    // allowed one by one (`DEVICES`).
    let readable = real_roots(readable, &[Path::new("/proc"), Path::new("/dev")]);
    // Compared with the hidden paths and made rules of by their real paths too: a writable
    // folder named through a symlink (`~/.cache` under a moved `/home`) holds hidden paths
    // that must be found inside it (and the program then refused), not read through its rule.
    let writable: Vec<PathBuf> = writable.iter().filter_map(|w| w.canonicalize().ok()).collect();
    let writable = writable.as_slice();
    // Landlock allows or refuses a rename by the folder it happens in, so a folder above the
    // workspace that the call may write lets it move the workspace (the file tools would then
    // follow a link left in its place); bubblewrap pins the folders between (`mask::pins`).
    if grant.write
        && let Some(above) = writable.iter().find(|w| workspace.starts_with(w) && workspace != w.as_path())
    {
        return Err(SandboxError::CannotPin(above.display().to_string()));
    }
    // What the policy hides is carved out of the readable folders, where no write needs the
    // folder holding it whole (`mask.rs`).
    let writable_roots: Vec<PathBuf> = if grant.write {
        std::iter::once(workspace)
            .chain(writable.iter().map(PathBuf::as_path))
            .chain(temp)
            .map(Path::to_path_buf)
            .collect()
    } else {
        Vec::new()
    };
    let carved = super::mask::carve(&readable, hidden, &writable_roots);
    // Fail closed: a path deny that the sandbox cannot enforce is not left to the judgement of
    // the command's words alone.
    if !carved.unmasked.is_empty() {
        let shown: Vec<String> = carved.unmasked.iter().map(|p| format!("`{}`", p.display())).collect();
        return Err(SandboxError::CannotHide(shown.join(", ")));
    }
    for path in &carved.whole {
        let rights = if path.is_dir() { read } else { read & AccessFs::from_file(WANTED) };
        created = created
            .add_rule(PathBeneath::new(PathFd::new(path).map_err(err)?, rights))
            .map_err(err)?;
    }
    for dir in &carved.listed {
        created = created
            .add_rule(PathBeneath::new(PathFd::new(dir).map_err(err)?, AccessFs::ReadDir))
            .map_err(err)?;
    }
    let file_rw: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::WriteFile;
    for dev in DEVICES.iter().filter(|d| Path::new(d).exists()) {
        created = created
            .add_rule(PathBeneath::new(PathFd::new(dev).map_err(err)?, file_rw))
            .map_err(err)?;
    }
    if grant.write {
        let all = AccessFs::from_all(WANTED);
        for dir in std::iter::once(workspace).chain(writable.iter().map(PathBuf::as_path)).chain(temp) {
            if dir.exists() {
                created = created
                    .add_rule(PathBeneath::new(PathFd::new(dir).map_err(err)?, all))
                    .map_err(err)?;
            }
        }
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| err("this kernel does not enforce Landlock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_reached_through_a_symlink_is_allowed_by_its_real_path_so_carving_holds() {
        let top = tempfile::tempdir().unwrap();
        let top = top.path().canonicalize().unwrap();
        for d in ["data/home/u/.ssh", "proc/1", "etc"] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        std::fs::write(top.join("data/home/u/.ssh/id"), "key").unwrap();
        std::fs::write(top.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(top.join("data/home"), top.join("home")).unwrap();
        std::os::unix::fs::symlink(top.join("proc"), top.join("to-proc")).unwrap();
        // A folder holding the excluded one is no root either (it would allow all of it).
        std::os::unix::fs::symlink(&top, top.join("to-top")).unwrap();
        let listed: Vec<PathBuf> = std::fs::read_dir(&top).unwrap().map(|e| e.unwrap().path()).collect();
        let roots = real_roots(listed, &[&top.join("proc")]);
        assert_eq!(roots, vec![top.join("data"), top.join("etc")]);
        // Carved by the real paths, the hidden folder is in no rule: not under a root kept
        // whole, and every folder above it only listed.
        let hidden = [top.join("data/home/u/.ssh")];
        let carved = super::super::mask::carve(&roots, &hidden, &[]);
        assert!(!carved.whole.iter().any(|w| hidden[0].starts_with(w)), "{carved:?}");
        assert!(carved.listed.contains(&top.join("data/home/u")), "{carved:?}");
    }
}
