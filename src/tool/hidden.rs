//! What a session's policy hides from every way of reading: the paths a deny rule names by a
//! `path` glob alone.
//!
//! The rules judge the words of a call, and a call can read a file without naming it
//! (`grep -r KEY .`, `tar cf - .`, grep_files with no path). So what a deny rule names is also
//! kept out of sight where the reading happens: tools that walk the workspace skip it, and the
//! OS sandbox masks what exists of it before a program starts. The policy implements this; the
//! session hands it to tools through [`SessionServices::hidden`](super::SessionServices::hidden).

use std::path::{Path, PathBuf};

/// Whether a path (absolute) is hidden, for one tool in one workspace: made once, asked per
/// file of a walk.
pub type Screen = Box<dyn Fn(&Path) -> bool + Send + Sync>;

/// Paths hidden from a tool whatever its arguments say.
pub trait HiddenPaths: Send + Sync {
    /// What is hidden from `tool` in `workspace`, as a test of one absolute path (it, or a
    /// folder holding it, is what a deny rule of `tool` names by a `path` glob alone, in the
    /// spelling its words give or the one its symlinks lead to); `None` when nothing is.
    fn screen(&self, tool: &str, workspace: &Path) -> Option<Screen>;

    /// The files and folders hidden from `tool` that exist now, absolute with their symlinks
    /// resolved, none inside another: what the sandbox masks before a program of `tool` starts.
    ///
    /// # Errors
    /// Why they could not all be found (the search passed its limit, which the text names):
    /// the program must then not start, since a mask that may miss a file hides nothing.
    fn existing(&self, tool: &str, workspace: &Path) -> Result<Vec<PathBuf>, String>;

    /// The path globs, as written, that hide paths from `tool`: what a process that runs the
    /// session's calls elsewhere (a remote worker) hides in its turn. None by default.
    fn globs(&self, _tool: &str) -> Vec<String> {
        Vec::new()
    }
}
