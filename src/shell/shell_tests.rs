//! Properties of the shell's judgement and keys, over generated commands:
//! - no command that is not plain ever gets a loose key, or is judged Auto;
//! - adding code to an approved command (a code-bearing option in any spelling, at any place;
//!   shell syntax; a wrapper; another spelling of the program) always changes its key.

use proptest::prelude::*;

use super::*;
use crate::tool::ApprovalRequirement;

/// Commands whose keys are loose, as words.
const BASES: &[&[&str]] = &[
    &["git", "status"],
    &["git", "push", "origin", "main"],
    &["git", "log", "--oneline"],
    &["git", "commit", "-m", "msg"],
    &["cargo", "build"],
    &["cargo", "test", "-p", "core"],
    &["make", "test"],
    &["npm", "run", "build"],
    &["npm", "test"],
    &["find", ".", "-name", "*.tmp"],
    &["pytest", "tests"],
    &["ls", "-la"],
    &["go", "build", "./..."],
    &["docker", "compose", "up"],
    &["kubectl", "get", "pods"],
    &["rg", "TODO"],
    &["grep", "-r", "x", "."],
];

/// Options and words that name code (or config naming code) for each program, in several
/// spellings. Inserted anywhere after the program, each must make the key differ.
fn code_for(program: &str) -> &'static [&'static str] {
    match program {
        "git" => &[
            "-c core.fsmonitor=x",
            "-ccore.pager=x",
            "-C dir",
            "--git-dir=x",
            "--work-tree x",
            "--exec-path=x",
            "--config-env=a=b",
            "--ext-diff",
            "--output=F",
            "--outp=F",
            "--upload-pack=x",
            "--exec=x",
            "--textconv",
        ],
        "cargo" => &[
            "--config x=y",
            "--config=x",
            "-Zx",
            "-Z x",
            "+nightly",
            "--manifest-path x",
            "--manifest-path=x",
        ],
        "make" => &[
            "-f evil.mk",
            "-fevil.mk",
            "--file=evil.mk",
            "--makefile x",
            "-C dir",
            "CC=evil",
            "--eval=x",
            "-I d",
            "-e",
        ],
        "npm" => &["--prefix x", "--prefix=x", "--script-shell=sh", "--node-options=x"],
        "find" => &[
            "-exec touch x {} +",
            "-execdir x ;",
            "-delete",
            "-fprint f",
            "-fprintf f %p",
            "-ok x ;",
            "-fls f",
        ],
        "pytest" => &["-p plugin", "-pplugin", "-c cfg", "-o addopts=x", "--rootdir=d", "--override-ini=x"],
        "go" => &["-toolexec=x", "-exec x", "--ldflags=x", "-overlay=x", "-modfile x"],
        "docker" => &["-H x", "--context x", "-f x", "--file=x"],
        "kubectl" => &["--kubeconfig x", "-f x", "--server=x"],
        "rg" => &["--pre x", "-z", "--pre-glob=x"],
        "grep" => &["-f x", "--file=x"],
        _ => &[],
    }
}

/// Shell syntax that makes a command more than one literal simple command.
const SYNTAX: &[(&str, &str)] = &[
    ("", "; touch x"),
    ("", "\ntouch x"),
    ("", "\r\ntouch x"),
    ("", " && touch x"),
    ("", " || touch x"),
    ("", " | sh"),
    ("", " & touch x"),
    ("", " > f"),
    ("", " 2>&1"),
    ("", " $(touch x)"),
    ("", " `touch x`"),
    ("", " <(touch x)"),
    ("", " <<EOF\nx\nEOF"),
    ("", " $HOME"),
    ("", " {a,b}"),
    ("A=1 ", ""),
    ("(", ")"),
    ("{ ", "; }"),
    ("f() { ", "; }; f"),
    ("! ", ""),
    ("env ", ""),
    ("sudo ", ""),
    ("nice ", ""),
    ("timeout 5 ", ""),
    ("command ", ""),
    ("exec ", ""),
    ("eval ", ""),
    ("xargs ", ""),
];

fn loose(key: &str) -> bool {
    !key.starts_with("exec_shell:exact:")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn code_bearing_arguments_always_change_the_key(base in 0..BASES.len(), pick in 0usize..64, at in 0usize..8) {
        let words = BASES[base];
        let approved = words.join(" ");
        let key = approval_key(&approved);
        prop_assert!(loose(&key), "`{approved}` keys exactly: {key}");
        let code = code_for(words[0]);
        prop_assume!(!code.is_empty());
        let inserted = code[pick % code.len()];
        let at = 1 + at % words.len();
        let mut mutated: Vec<&str> = words.to_vec();
        mutated.insert(at, inserted);
        let mutated = mutated.join(" ");
        prop_assert_ne!(approval_key(&mutated), key.clone(), "`{}` shares `{}`'s key", mutated, approved);
    }

    #[test]
    fn shell_syntax_and_wrappers_always_key_exactly(base in 0..BASES.len(), pick in 0..SYNTAX.len()) {
        let (before, after) = SYNTAX[pick];
        let command = format!("{before}{}{after}", BASES[base].join(" "));
        prop_assert_eq!(approval_key(&command), exact_key(&command), "`{}`", command);
        prop_assert_eq!(judge_command(&command).requirement, ApprovalRequirement::Required, "`{}`", command);
    }

    #[test]
    fn another_spelling_of_the_program_is_another_key(base in 0..BASES.len(), pick in 0usize..4) {
        let words = BASES[base];
        let prefix = ["./", "/usr/bin/", "../", "bin/"][pick];
        let respelled = format!("{prefix}{}", words.join(" "));
        prop_assert_ne!(approval_key(&respelled), approval_key(&words.join(" ")));
    }

    #[test]
    fn only_plain_commands_key_loosely_or_run_unasked(command in "[a-z .;&|<>()$`'\"\\\\\n\r{}=*~/-]{0,40}") {
        let script = parse(&command);
        if loose(&approval_key(&command)) {
            prop_assert!(script.is_plain(), "`{command:?}` keys loosely but is not plain: {:?}", script.not_plain);
            prop_assert_eq!(script.segments.len(), 1);
            prop_assert!(script.segments[0].wrappers.is_empty());
        }
        if judge(&script).requirement == ApprovalRequirement::Auto {
            prop_assert!(script.is_plain(), "`{command:?}` judged Auto but is not plain");
        }
    }

    #[test]
    fn programs_keyed_loosely_are_keyed_with_their_words_as_written(base in 0..BASES.len(), extra in "( -v| --release| -q| x){0,3}") {
        let command = format!("{}{extra}", BASES[base].join(" "));
        let key = approval_key(&command);
        if loose(&key) {
            let program = BASES[base][0];
            let as_written = key.starts_with(&format!("exec_shell:{program} ")) || key == format!("exec_shell:{program}");
            prop_assert!(as_written, "`{}`: {}", command, key);
        }
    }
}
