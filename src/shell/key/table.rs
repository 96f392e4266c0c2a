//! The programs whose approval may carry over to calls with other harmless arguments, and
//! what makes each call exact. Kept apart from the matching in `key` so that teaching the key
//! a program is a change to data the matching does not need to know about.

use crate::shell::flags::Opt;

use Opt::{Long, Short, Word};

/// Which positional arguments after the subcommand name code.
#[derive(Debug, Clone, Copy)]
pub(super) enum Positional {
    /// None: they are files, targets, test names of the workspace's own code.
    Free,
    /// `make CC=…`: a variable assignment overrides what a rule runs.
    NoAssignments,
    /// For these subcommands any positional names a package to fetch and run.
    Packages(&'static [&'static str]),
}

/// A program whose approval may carry over to calls that differ in harmless arguments.
pub(super) struct Loose {
    pub(super) program: &'static str,
    /// Words in the key: the program and this many subcommands, less one.
    pub(super) arity: usize,
    /// Subcommands keyed one word deeper (`git stash pop`, `npm run test`).
    pub(super) deeper: &'static [&'static str],
    /// When given, only these subcommands key loosely; any other is exact.
    pub(super) subcommands: Option<&'static [&'static str]>,
    /// Subcommands that are always exact (they run what they are given).
    pub(super) exact_subcommands: &'static [&'static str],
    /// Options before the subcommand that take a value and change no code (skipped).
    pub(super) valued: &'static [&'static str],
    /// Options that name code, config or another program: exact.
    pub(super) code: &'static [Opt],
    /// Positional arguments that name code.
    pub(super) positional: Positional,
}

const fn simple(program: &'static str, code: &'static [Opt]) -> Loose {
    Loose {
        program,
        arity: 1,
        deeper: &[],
        subcommands: None,
        exact_subcommands: &[],
        valued: &[],
        code,
        positional: Positional::Free,
    }
}

/// Programs that key loosely, with what makes them exact.
pub(super) const LOOSE: &[Loose] = &[
    Loose {
        program: "git",
        arity: 2,
        deeper: &["stash", "remote", "worktree"],
        subcommands: Some(&[
            "status",
            "diff",
            "log",
            "show",
            "add",
            "commit",
            "push",
            "pull",
            "fetch",
            "checkout",
            "switch",
            "branch",
            "stash",
            "remote",
            "tag",
            "merge",
            "restore",
            "reset",
            "blame",
            "ls-files",
            "ls-tree",
            "rev-parse",
            "init",
            "clone",
            "cherry-pick",
            "revert",
            "mv",
            "rm",
            "grep",
            "describe",
            "shortlog",
            "reflog",
            "worktree",
            "show-ref",
            "rebase",
        ]),
        exact_subcommands: &[],
        valued: &[],
        // Global options are handled apart: every one but a few harmless ones is exact. After
        // the subcommand, the global ones still count (a subcommand may pass them on), and
        // those that run a program.
        code: &[
            Short('c'),
            Short('C'),
            Long("--config-env"),
            Long("--exec"),
            Long("--upload-pack"),
            Long("--receive-pack"),
            Long("--ext-diff"),
            Long("--textconv"),
            Long("--output"),
            Long("--config"),
            Long("--template"),
            Long("--git-dir"),
            Long("--work-tree"),
            Long("--separate-git-dir"),
            Long("--exec-path"),
            Long("--tool"),
            Long("--extcmd"),
            Long("--open-files-in-pager"),
            Short('O'),
        ],
        positional: Positional::Free,
    },
    Loose {
        program: "cargo",
        arity: 2,
        deeper: &[],
        subcommands: None,
        exact_subcommands: &[],
        valued: &["--color"],
        code: &[
            Long("--config"),
            Short('Z'),
            Long("--manifest-path"),
            Long("--lockfile-path"),
            Short('C'),
        ],
        positional: Positional::Packages(&["install", "add"]),
    },
    Loose {
        program: "npm",
        arity: 2,
        deeper: &["run", "run-script"],
        subcommands: None,
        exact_subcommands: &["exec", "x", "explore"],
        valued: &[],
        code: NODE_PM_CODE,
        positional: Positional::Packages(NODE_PM_INSTALL),
    },
    Loose {
        program: "pnpm",
        arity: 2,
        deeper: &["run"],
        subcommands: None,
        exact_subcommands: &["exec", "dlx", "x"],
        valued: &[],
        code: NODE_PM_CODE,
        positional: Positional::Packages(NODE_PM_INSTALL),
    },
    Loose {
        program: "yarn",
        arity: 2,
        deeper: &["run"],
        subcommands: None,
        exact_subcommands: &["exec", "dlx"],
        valued: &[],
        code: NODE_PM_CODE,
        positional: Positional::Packages(NODE_PM_INSTALL),
    },
    Loose {
        program: "go",
        arity: 2,
        deeper: &["mod"],
        subcommands: None,
        exact_subcommands: &["tool"],
        valued: &[],
        code: &[
            Word("-C"),
            Word("-exec"),
            Long("--exec"),
            Word("-toolexec"),
            Long("--toolexec"),
            Word("-overlay"),
            Long("--overlay"),
            Word("-modfile"),
            Long("--modfile"),
            Word("-ldflags"),
            Long("--ldflags"),
            Word("-gcflags"),
            Long("--gcflags"),
            Word("-asmflags"),
            Word("-gccgoflags"),
        ],
        positional: Positional::Packages(&["run", "install", "get", "generate"]),
    },
    Loose {
        program: "docker",
        arity: 2,
        deeper: &["compose"],
        subcommands: None,
        exact_subcommands: &["run", "exec", "create", "plugin", "buildx"],
        valued: &["-l", "--log-level"],
        code: &[
            Short('H'),
            Long("--host"),
            Long("--context"),
            Long("--config"),
            Short('f'),
            Long("--file"),
            Long("--project-directory"),
            Long("--env-file"),
        ],
        positional: Positional::Free,
    },
    Loose {
        program: "kubectl",
        arity: 2,
        deeper: &[],
        subcommands: None,
        exact_subcommands: &[
            "exec",
            "run",
            "cp",
            "port-forward",
            "debug",
            "attach",
            "plugin",
            "proxy",
            "apply",
            "create",
            "replace",
            "patch",
        ],
        valued: &["-n", "--namespace"],
        code: &[
            Short('f'),
            Long("--filename"),
            Short('k'),
            Long("--kustomize"),
            Long("--kubeconfig"),
            Short('s'),
            Long("--server"),
            Long("--context"),
        ],
        positional: Positional::Free,
    },
    Loose {
        program: "make",
        arity: 2,
        deeper: &[],
        subcommands: None,
        exact_subcommands: &[],
        valued: &["-j", "--jobs", "-l", "--load-average"],
        code: &[
            Short('f'),
            Long("--file"),
            Long("--makefile"),
            Short('C'),
            Long("--directory"),
            Short('I'),
            Long("--include-dir"),
            Long("--eval"),
            Short('E'),
            Short('e'),
            Long("--environment-overrides"),
        ],
        positional: Positional::NoAssignments,
    },
    Loose {
        program: "pip",
        arity: 2,
        deeper: &[],
        subcommands: Some(&["list", "show", "freeze", "check"]),
        exact_subcommands: &[],
        valued: &[],
        code: &[],
        positional: Positional::Free,
    },
    Loose {
        program: "pip3",
        arity: 2,
        deeper: &[],
        subcommands: Some(&["list", "show", "freeze", "check"]),
        exact_subcommands: &[],
        valued: &[],
        code: &[],
        positional: Positional::Free,
    },
    Loose {
        program: "uv",
        arity: 2,
        deeper: &[],
        subcommands: Some(&["sync", "lock", "tree", "venv"]),
        exact_subcommands: &[],
        valued: &[],
        code: &[Long("--config-file"), Long("--directory"), Long("--project")],
        positional: Positional::Free,
    },
    Loose {
        program: "poetry",
        arity: 2,
        deeper: &[],
        subcommands: Some(&["install", "lock", "show", "check", "build"]),
        exact_subcommands: &[],
        valued: &[],
        code: &[Short('C'), Long("--directory"), Short('P'), Long("--project")],
        positional: Positional::Free,
    },
    Loose {
        program: "rustup",
        arity: 2,
        deeper: &["component", "target"],
        subcommands: Some(&["show", "update", "component", "target", "default"]),
        exact_subcommands: &[],
        valued: &[],
        code: &[],
        positional: Positional::Free,
    },
    simple(
        "pytest",
        &[
            Short('p'),
            Short('c'),
            Long("--config-file"),
            Short('o'),
            Long("--override-ini"),
            Long("--rootdir"),
            Long("--confcutdir"),
            Long("--pyargs"),
        ],
    ),
    simple("ls", &[]),
    simple("cat", &[]),
    simple("head", &[]),
    simple("tail", &[]),
    simple("wc", &[Long("--files0-from")]),
    simple("grep", &[Short('f'), Long("--file")]),
    simple(
        "rg",
        &[
            Long("--pre"),
            Long("--pre-glob"),
            Short('z'),
            Long("--search-zip"),
            Long("--hostname-bin"),
        ],
    ),
    simple(
        "find",
        &[
            Word("-exec"),
            Word("-execdir"),
            Word("-ok"),
            Word("-okdir"),
            Word("-delete"),
            Word("-fprint"),
            Word("-fprint0"),
            Word("-fprintf"),
            Word("-fls"),
        ],
    ),
    simple("echo", &[]),
    simple("pwd", &[]),
    simple("tree", &[Short('o'), Short('R')]),
];

/// Options of npm, pnpm and yarn that point them at other code or another shell.
const NODE_PM_CODE: &[Opt] = &[
    Long("--prefix"),
    Short('C'),
    Long("--dir"),
    Long("--cwd"),
    Long("--node-options"),
    Long("--script-shell"),
    Long("--userconfig"),
    Long("--globalconfig"),
];

/// Subcommands of npm, pnpm and yarn whose positional arguments are packages to install.
const NODE_PM_INSTALL: &[&str] = &["install", "i", "add", "update", "up", "upgrade", "create", "init", "link"];

/// git options before the subcommand that change nothing about what runs.
pub(super) const GIT_GLOBAL_OK: &[&str] = &["--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs"];

/// git subcommands and the options of each that run a program (`rebase -x`, a merge strategy
/// `-s` is a `git-merge-<name>` program, `clone -u` an upload-pack command).
pub(super) const GIT_SUB_CODE: &[(&[&str], &[Opt])] = &[
    (&["rebase"], &[Short('x'), Long("--exec"), Short('s'), Long("--strategy")]),
    (&["merge", "pull", "cherry-pick", "revert"], &[Short('s'), Long("--strategy")]),
    (&["clone", "fetch", "pull"], &[Short('u'), Short('c')]),
];

/// Options of a subcommand that destroy work: each such call is approved on its own.
pub(super) const DESTRUCTIVE: &[(&str, &str, &[Opt])] = &[
    (
        "git",
        "push",
        &[
            Long("--force"),
            Short('f'),
            Long("--force-with-lease"),
            Long("--mirror"),
            Long("--delete"),
            Short('d'),
            Long("--prune"),
        ],
    ),
    ("git", "reset", &[Long("--hard"), Long("--merge"), Long("--keep")]),
    ("git", "checkout", &[Short('f'), Long("--force")]),
    (
        "git",
        "branch",
        &[Short('D'), Short('d'), Long("--delete"), Short('f'), Long("--force")],
    ),
    ("git", "tag", &[Short('d'), Long("--delete"), Short('f'), Long("--force")]),
    ("git", "stash", &[]),
    ("git", "rm", &[Short('r'), Short('f'), Long("--force")]),
];
