//! The project's policy folder (`.toolslot` in the workspace) stays as it was, whatever a
//! program cleared to write the workspace does.
//!
//! bubblewrap binds it read-only over the writable workspace (or, when there is none, an empty
//! read-only folder in its place, so none can be made). Landlock cannot take a folder out of a
//! writable one, and no sandbox at all protects nothing, so for every backend the policy file is
//! also read before the program starts and put back as it was when it ends
//! ([`Protected`]'s drop): a change survives only while the program runs.

use std::path::{Path, PathBuf};

use crate::policy::PROJECT_FILE;

/// The project's policy file and its folder, as they were before a program ran.
#[derive(Debug)]
pub struct Protected {
    file: PathBuf,
    before: Option<Vec<u8>>,
    folder: PathBuf,
    folder_existed: bool,
    /// Whether the folder held anything: an empty one may be another call's mount point, gone
    /// when that call ends, so it is never bound itself (a read-only stand-in is mounted).
    folder_filled: bool,
}

impl Protected {
    /// Reads what must be put back: `workspace`'s policy file, and whether its folder exists.
    pub fn snapshot(workspace: &Path) -> Self {
        let file = workspace.join(PROJECT_FILE);
        let folder = file.parent().map(Path::to_path_buf).unwrap_or_else(|| workspace.to_path_buf());
        Self {
            before: std::fs::read(&file).ok(),
            folder_existed: folder.is_dir(),
            folder_filled: std::fs::read_dir(&folder).is_ok_and(|mut entries| entries.next().is_some()),
            file,
            folder,
        }
    }

    /// The folder bubblewrap keeps read-only, and whether to bind it as it is: a folder with
    /// something in it is bound; where there is none, or an empty one, an empty read-only folder
    /// is mounted in its place while the program runs (bubblewrap makes the mount point again
    /// if another call's cleanup removed it meanwhile).
    pub fn folder(&self) -> (&Path, bool) {
        (&self.folder, self.folder_filled)
    }
}

impl Drop for Protected {
    fn drop(&mut self) {
        let now = std::fs::read(&self.file).ok();
        if now != self.before {
            tracing::warn!(file = %self.file.display(), "a sandboxed program changed the project's policy file; it is put back");
            match &self.before {
                Some(bytes) => {
                    // Whatever now stands at the folder's place (a file, a link) goes first.
                    if !self.folder.is_dir() || self.folder.is_symlink() {
                        let _ = std::fs::remove_file(&self.folder);
                    }
                    let _ = std::fs::create_dir_all(&self.folder);
                    let _ = std::fs::remove_file(&self.file);
                    let _ = std::fs::write(&self.file, bytes);
                }
                None => {
                    let _ = std::fs::remove_file(&self.file);
                    if std::fs::remove_dir_all(&self.file).is_ok() {
                        tracing::warn!(file = %self.file.display(), "a folder in the policy file's place was removed");
                    }
                }
            }
        }
        if !self.folder_existed {
            // The empty folder bubblewrap made as a mount point, or one the program made.
            let _ = std::fs::remove_dir(&self.folder);
        }
    }
}
