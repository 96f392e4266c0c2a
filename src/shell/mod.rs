//! Shell commands as a shell reads them, and what they need before they run.
//!
//! Three slot functions, pure and unit-tested, that exec_shell, its approval key and policy
//! rules share:
//! - [`parse`]: the command line through a maintained bash grammar (tree-sitter-bash) into its
//!   simple commands ([`Segment`]), every wrapper peeled and visible (`env`, `sh -c`, `sudo`,
//!   `xargs`, …, see [`Runs`]), and the reasons it is not plain;
//! - [`judge`]: Auto only for a plain command whose every segment only reads inside the
//!   workspace; Required otherwise, with the reasons;
//! - [`approval_key`]: what "approve for session" covers; loose only where dropping the other
//!   arguments cannot change which program runs or what code it runs.
//!
//! A rule such as `command = ["git", "push"]` should be matched against
//! [`Script::all_segments`] (each segment's [`Segment::command`] and its words as written), so
//! that `(git push)`, `env git push`, `sh -c 'git push'` and `x && git push` are all seen.
//!
//! Some commands run what no word shows: a shell reading its input, an interpreter given code,
//! `find -exec`, an alias, a git alias, `make`, a wrapper option the model does not know, a
//! program word that is a glob. They are *opaque* ([`Segment::opaque`], [`Script::opacity`]):
//! never Auto, and never a certain "no" for a rule that restricts.

mod flags;
mod grammar;
mod judge;
mod key;
mod opaque;
mod wrappers;

pub use flags::{Opt, matches as option_matches};
pub use grammar::{Script, Segment, parse};
pub use judge::{Judgement, escapes, judge};
pub use key::{approval_key, approval_key_of, exact_key};
pub use opaque::has_glob;
pub use wrappers::{Runs, base_name};

/// Parses and judges `command` in one call.
pub fn judge_command(command: &str) -> Judgement {
    judge(&parse(command))
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
