//! The wrappers the judgement knows, and how each one's options are read.

/// How a wrapper's options are read.
pub(super) struct Wrapper {
    pub(super) name: &'static str,
    /// Short options that take no value.
    pub(super) flags: &'static str,
    /// Short options that take a value: the rest of their word (`-uroot`) or the next word.
    pub(super) valued: &'static str,
    /// Long options that take no value.
    pub(super) long_flags: &'static [&'static str],
    /// Long options that take a value (`--user=root` or `--user root`).
    pub(super) long_valued: &'static [&'static str],
    /// Long options whose value is optional and only ever glued (`--block-signal[=SIG]`).
    pub(super) long_optional: &'static [&'static str],
    /// Positional words before the command (timeout's duration, taskset's mask, flock's file).
    pub(super) leading: usize,
    /// `NAME=VALUE` words before the command are assignments (env, sudo).
    pub(super) assignments: bool,
    /// Why the wrapper is opaque whatever its options, after its name: it runs text as code,
    /// or as another user, or has too many options to model. Its options are then read
    /// leniently (an unknown one taken for a flag), only to find the command for a rule.
    pub(super) opaque: Option<&'static str>,
}

/// A wrapper whose options are modelled exactly.
const fn strict(name: &'static str, flags: &'static str, valued: &'static str) -> Wrapper {
    Wrapper {
        name,
        flags,
        valued,
        long_flags: HELP,
        long_valued: &[],
        long_optional: &[],
        leading: 0,
        assignments: false,
        opaque: None,
    }
}

/// A wrapper that is always opaque; its options are read leniently.
const fn opaque(name: &'static str, valued: &'static str, why: &'static str) -> Wrapper {
    Wrapper {
        name,
        flags: "",
        valued,
        long_flags: &[],
        long_valued: &[],
        long_optional: &[],
        leading: 0,
        assignments: false,
        opaque: Some(why),
    }
}

const HELP: &[&str] = &["--help", "--version"];

/// Every wrapper the judgement peels, by name.
pub(super) const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        long_flags: &[
            "--ignore-environment",
            "--null",
            "--debug",
            "--list-signal-handling",
            "--help",
            "--version",
        ],
        long_valued: &["--unset", "--chdir", "--split-string"],
        long_optional: &["--block-signal", "--default-signal", "--ignore-signal"],
        assignments: true,
        ..strict("env", "i0v", "uCS")
    },
    Wrapper {
        long_valued: &["--adjustment"],
        ..strict("nice", "", "n")
    },
    strict("nohup", "", ""),
    Wrapper {
        long_flags: &["--foreground", "--preserve-status", "--verbose", "--help", "--version"],
        long_valued: &["--kill-after", "--signal"],
        leading: 1,
        ..strict("timeout", "fpv", "ks")
    },
    Wrapper {
        long_valued: &["--input", "--output", "--error"],
        ..strict("stdbuf", "", "ioe")
    },
    Wrapper {
        long_flags: &["--ignore", "--help", "--version"],
        long_valued: &["--class", "--classdata", "--pid", "--pgid", "--uid"],
        ..strict("ionice", "t", "cnpPu")
    },
    Wrapper {
        long_flags: &["--portability", "--verbose", "--quiet", "--append", "--help", "--version"],
        long_valued: &["--format", "--output"],
        ..strict("time", "pvqa", "fo")
    },
    strict("command", "pvV", ""),
    strict("builtin", "", ""),
    strict("exec", "cl", "a"),
    strict("coproc", "", ""),
    Wrapper {
        long_flags: &["--ctty", "--fork", "--wait", "--help", "--version"],
        ..strict("setsid", "cfw", "")
    },
    Wrapper {
        // `flock [options] FILE -c COMMAND`: the command comes after the file.
        long_flags: &[
            "--shared",
            "--exclusive",
            "--unlock",
            "--nonblock",
            "--nb",
            "--no-fork",
            "--close",
            "--verbose",
            "--fcntl",
            "--help",
            "--version",
        ],
        long_valued: &["--timeout", "--wait", "--conflict-exit-code"],
        leading: 1,
        ..strict("flock", "sxeunoF", "wE")
    },
    Wrapper {
        long_flags: &["--all-tasks", "--cpu-list", "--pid", "--help", "--version"],
        leading: 1,
        ..strict("taskset", "acp", "")
    },
    strict("busybox", "", ""),
    strict("toybox", "", ""),
    Wrapper {
        flags: "AbBEHknNPSsilvKVe",
        long_flags: &[
            "--askpass",
            "--background",
            "--bell",
            "--preserve-env",
            "--set-home",
            "--reset-timestamp",
            "--non-interactive",
            "--no-update",
            "--preserve-groups",
            "--stdin",
            "--shell",
            "--login",
            "--edit",
            "--list",
            "--validate",
            "--remove-timestamp",
            "--help",
            "--version",
        ],
        long_valued: &[
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--close-from",
            "--chdir",
            "--role",
            "--type",
            "--command-timeout",
            "--other-user",
            "--chroot",
        ],
        long_optional: &["--preserve-env"],
        assignments: true,
        ..opaque(
            "sudo",
            "ugpCDrtTUhR",
            "runs its command as another user, under rules (sudoers, that user's environment) its words do not show",
        )
    },
    Wrapper {
        flags: "nsL",
        ..opaque("doas", "uC", "runs its command as another user, under rules its words do not show")
    },
    Wrapper {
        // `-e[EOF]`, `-i[REPLACE]`, `-l[MAX]` take a value only glued to them.
        long_flags: &[
            "--null",
            "--interactive",
            "--no-run-if-empty",
            "--verbose",
            "--exit",
            "--show-limits",
            "--open-tty",
            "--help",
            "--version",
        ],
        long_valued: &[
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        ],
        long_optional: &["--eof", "--replace", "--max-lines"],
        ..strict("xargs", "0eilprtxo", "adEILnPs")
    },
    Wrapper {
        flags: "bdeEgctwxpr",
        long_valued: &["--interval", "--equexit"],
        ..opaque("watch", "nq", "runs its arguments as a shell command line")
    },
    opaque(
        "strace",
        "eopsuEPSXabIO",
        "runs a program under options the judgement does not model",
    ),
    opaque("ltrace", "eopsuaADFln", "runs a program under options the judgement does not model"),
    Wrapper {
        leading: 1,
        ..opaque("chrt", "TPD", "runs a program under options the judgement does not model")
    },
    opaque("unbuffer", "", "runs a program under options the judgement does not model"),
    opaque("caffeinate", "tw", "runs a program under options the judgement does not model"),
];

/// Shells whose `-c` argument is a script in a grammar close enough to bash's to follow.
pub(super) const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash", "lksh"];
