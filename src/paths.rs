//! Small facts about paths that several layers need alike (the policy, the sandbox, the file
//! tools), kept here so that none of them reaches into another for them.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// `paths` sorted, without duplicates and without any that lies inside another.
pub fn outermost(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut sorted = paths.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in sorted {
        // Sorted, a path comes right after the folders that hold it, so the last kept is the
        // only one that can.
        if !out.last().is_some_and(|o| p.starts_with(o)) {
            out.push(p);
        }
    }
    out
}

/// `name` as the C string an `*at` call takes.
///
/// # Errors
/// [`std::io::ErrorKind::InvalidInput`] for a name with a NUL byte, which no file can have.
pub fn c_name(name: impl AsRef<OsStr>) -> std::io::Result<CString> {
    CString::new(name.as_ref().as_bytes()).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in a name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_outermost_of_nested_paths_are_kept() {
        let p = |s: &str| PathBuf::from(s);
        let got = outermost(&[p("/a/b/c"), p("/a/b"), p("/ab"), p("/a/b"), p("/z"), p("/a/bc")]);
        assert_eq!(got, vec![p("/a/b"), p("/a/bc"), p("/ab"), p("/z")]);
        assert!(outermost(&[]).is_empty());
    }

    #[test]
    fn a_name_with_a_nul_byte_is_refused() {
        assert_eq!(c_name("a.txt").unwrap().as_bytes(), b"a.txt");
        assert_eq!(c_name("a\0b").unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    }
}
