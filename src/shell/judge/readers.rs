//! The allow-list: the programs (and git and cargo subcommands) that only read, and the options
//! that would make each one do more.

use crate::shell::flags::Opt;

/// How a reader's positional arguments are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Args {
    /// Every positional argument is a file or folder read.
    Paths,
    /// The first is a pattern (unless an option gave it), the rest are paths.
    PatternThenPaths,
    /// `find`: starting points until the expression begins.
    FindStarts,
    /// Not paths: printed, or looked up by name.
    NotPaths,
    /// At most one path; a second would be written (`uniq IN OUT`).
    OnePath,
}

/// A program that only reads, and the options that would make it do more.
pub(super) struct Reader {
    pub(super) program: &'static str,
    pub(super) forbidden: &'static [Opt],
    pub(super) args: Args,
}

use Opt::{Long, Short, Word};

/// The read-only programs. Each `forbidden` list holds the options that write a file, run a
/// program, or read a file named in a way the path check does not see.
pub(super) const READERS: &[Reader] = &[
    Reader {
        program: "cat",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "head",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "tail",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "wc",
        forbidden: &[Long("--files0-from")],
        args: Args::Paths,
    },
    Reader {
        program: "ls",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "tree",
        // -o writes the listing to a file; -R with -H writes HTML files; --fromfile reads names.
        forbidden: &[Short('o'), Short('R'), Long("--fromfile")],
        args: Args::Paths,
    },
    Reader {
        program: "stat",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "file",
        // -C compiles a magic file (writes), -f reads names from a file, -m reads a magic file,
        // -z and -Z run decompressors.
        forbidden: &[
            Short('C'),
            Long("--compile"),
            Short('f'),
            Long("--files-from"),
            Short('m'),
            Long("--magic-file"),
            Short('z'),
            Short('Z'),
            Long("--uncompress"),
        ],
        args: Args::Paths,
    },
    Reader {
        program: "du",
        forbidden: &[Long("--files0-from"), Short('X'), Long("--exclude-from")],
        args: Args::Paths,
    },
    Reader {
        program: "df",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "grep",
        forbidden: &[Short('f'), Long("--file"), Long("--exclude-from")],
        args: Args::PatternThenPaths,
    },
    Reader {
        program: "egrep",
        forbidden: &[Short('f'), Long("--file"), Long("--exclude-from")],
        args: Args::PatternThenPaths,
    },
    Reader {
        program: "fgrep",
        forbidden: &[Short('f'), Long("--file"), Long("--exclude-from")],
        args: Args::PatternThenPaths,
    },
    Reader {
        program: "rg",
        // --pre runs a program per file, -z runs decompressors, --hostname-bin runs a program.
        forbidden: &[
            Long("--pre"),
            Long("--pre-glob"),
            Short('z'),
            Long("--search-zip"),
            Long("--hostname-bin"),
            Short('f'),
            Long("--file"),
            Long("--ignore-file"),
        ],
        args: Args::PatternThenPaths,
    },
    Reader {
        program: "find",
        forbidden: &[
            Word("-exec"),
            Word("-execdir"),
            Word("-ok"),
            Word("-okdir"),
            Word("-delete"),
            Word("-fprint"),
            Word("-fprint0"),
            Word("-fprintf"),
            Word("-fls"),
            Word("-files0-from"),
        ],
        args: Args::FindStarts,
    },
    Reader {
        program: "sort",
        // --compress-program runs a program; -T writes temporary files where it is told.
        forbidden: &[
            Short('o'),
            Long("--output"),
            Long("--compress-program"),
            Short('T'),
            Long("--temporary-directory"),
            Long("--files0-from"),
            Long("--random-source"),
        ],
        args: Args::Paths,
    },
    Reader {
        program: "uniq",
        forbidden: &[],
        args: Args::OnePath,
    },
    Reader {
        program: "cut",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "nl",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "diff",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "cmp",
        forbidden: &[],
        args: Args::Paths,
    },
    Reader {
        program: "md5sum",
        // --check reads file names from a file.
        forbidden: &[Short('c'), Long("--check")],
        args: Args::Paths,
    },
    Reader {
        program: "sha1sum",
        forbidden: &[Short('c'), Long("--check")],
        args: Args::Paths,
    },
    Reader {
        program: "sha256sum",
        forbidden: &[Short('c'), Long("--check")],
        args: Args::Paths,
    },
    Reader {
        program: "sha512sum",
        forbidden: &[Short('c'), Long("--check")],
        args: Args::Paths,
    },
    Reader {
        program: "echo",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "pwd",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "basename",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "dirname",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "tr",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "which",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "uname",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "whoami",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "true",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "false",
        forbidden: &[],
        args: Args::NotPaths,
    },
    Reader {
        program: "date",
        // -s sets the clock (as root); -f reads dates from a file.
        forbidden: &[Short('s'), Long("--set"), Short('f'), Long("--file")],
        args: Args::NotPaths,
    },
];

/// git subcommands that only read.
pub(super) const GIT_READERS: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "blame",
    "ls-files",
    "ls-tree",
    "rev-parse",
    "describe",
];

/// git options before the subcommand that change nothing but output (`-C` is path-checked).
pub(super) const GIT_GLOBAL_OK: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-optional-locks",
    "--literal-pathspecs",
    "--no-replace-objects",
];

/// Options of git's reading subcommands that write (`--output`), run a program (`--ext-diff`,
/// `--textconv`, signature checks run gpg, `-O` opens a pager program) or read outside the
/// repository (`--no-index`, `blame --contents`).
pub(super) const GIT_FORBIDDEN: &[Opt] = &[
    Long("--output"),
    Long("--output-directory"),
    Long("--ext-diff"),
    Long("--textconv"),
    Long("--show-signature"),
    Short('O'),
    Long("--open-files-in-pager"),
    Long("--no-index"),
    Long("--contents"),
    Long("--exec"),
    Long("--upload-pack"),
    Long("--paginate"),
];

/// cargo subcommands that only read (the lock file they may write is refused by the sandbox).
pub(super) const CARGO_READERS: &[&str] = &["metadata", "tree"];

/// cargo options that run other code (`--config` can name a rustc wrapper) or another toolchain.
pub(super) const CARGO_FORBIDDEN: &[Opt] = &[Long("--config"), Short('Z'), Long("--lockfile-path")];
