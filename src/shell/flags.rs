//! Matching an option in every spelling a program accepts.
//!
//! `--output=F`, `--output F`, `--outp=F` (GNU getopt and git both take any unambiguous prefix
//! of a long option), `-oF`, `-xo F` (short options cluster), and `-exec` for the single-dash
//! words of `find`. A table entry names the option once; [`matches`] finds it in any of them.

/// An option as a table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    /// `--name`: matched exactly, with `=value`, or by any prefix (`--outp`, even `--o`), as
    /// getopt_long and git's parse-options accept an unambiguous one.
    Long(&'static str),
    /// `-c`: matched alone, glued to its value (`-cX`) or anywhere in a cluster (`-xc`).
    Short(char),
    /// A single-dash word matched exactly (`find -exec`, `go -toolexec`), with `=value`
    /// allowed.
    Word(&'static str),
}

/// Whether `word` is `opt` in any spelling.
pub fn matches(word: &str, opt: Opt) -> bool {
    match opt {
        Opt::Long(name) => {
            let Some(given) = word.strip_prefix("--") else {
                return false;
            };
            let given = given.split('=').next().unwrap_or("");
            let name = name.trim_start_matches('-');
            !given.is_empty() && name.starts_with(given)
        }
        Opt::Short(c) => {
            if word.starts_with("--") || !word.starts_with('-') || word.len() < 2 {
                return false;
            }
            // A negative number is a value, not a cluster.
            if word[1..].chars().all(|c| c.is_ascii_digit()) {
                return false;
            }
            word[1..].contains(c)
        }
        Opt::Word(name) => word == name || word.split_once('=').is_some_and(|(f, _)| f == name),
    }
}

/// Whether `word` is any of `opts`.
pub fn any(word: &str, opts: &[Opt]) -> bool {
    opts.iter().any(|o| matches(word, *o))
}

/// Whether `word` is an option (not `-` alone, which names stdin).
pub fn is_option(word: &str) -> bool {
    word.starts_with('-') && word != "-"
}

#[cfg(test)]
mod tests {
    use super::*;
    use Opt::*;

    #[test]
    fn every_spelling_of_an_option_matches() {
        for w in ["--output=F", "--output", "--outp=F", "--ou", "--o"] {
            assert!(matches(w, Long("--output")), "{w}");
        }
        for w in ["--oneline", "--", "-o", "--output-indicator-new"] {
            assert!(!matches(w, Long("--output")), "{w}");
        }
        for w in ["-o", "-oF", "-no", "-xo"] {
            assert!(matches(w, Short('o')), "{w}");
        }
        for w in ["--o", "o", "-", "-5"] {
            assert!(!matches(w, Short('o')), "{w}");
        }
        assert!(matches("-exec", Word("-exec")));
        assert!(matches("-toolexec=x", Word("-toolexec")));
        assert!(!matches("-execdir", Word("-exec")));
    }
}
