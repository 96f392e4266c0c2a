//! Which commands are opaque, in many spellings of each class: programs that run text as
//! code, wrapper options the judgement does not model exactly, and globs.

use super::super::parse;
use super::sed::sed_script_is_quiet;
use super::*;

/// The reasons `command` is opaque (empty when its words say what runs).
fn opacity(command: &str) -> Vec<String> {
    parse(command).opacity()
}

#[track_caller]
fn opaque(commands: &[&str]) {
    for c in commands {
        assert!(!opacity(c).is_empty(), "{c:?} is not opaque: {:?}", parse(c).segments);
    }
}

#[track_caller]
fn plain(commands: &[&str]) {
    for c in commands {
        assert_eq!(opacity(c), Vec::<String>::new(), "{c:?}");
    }
}

#[track_caller]
fn says(command: &str, reason: &str) {
    let reasons = opacity(command);
    assert!(reasons.iter().any(|r| r.contains(reason)), "{command:?}: {reasons:?}");
}

#[test]
fn programs_that_run_text_as_code_are_opaque() {
    opaque(&[
        // A shell reading its input or a file.
        "echo rm victim | sh",
        "sh <<EOF\nrm victim\nEOF",
        "bash <<< 'rm victim'",
        "sh -s < script",
        "bash script.sh",
        "/bin/dash x.sh",
        "cat x | env bash",
        "fish -c 'rm victim'",
        "zsh -c 'rm victim'",
        "sh -c 'rm victim'",
        "bash -lc 'ls'",
        // Interpreters given code, a file, or their input.
        "python3 -c 'import os; os.remove(\"victim\")'",
        "python3.12 script.py",
        "python -",
        "perl -e 'unlink q(victim)'",
        "ruby -e 'File.delete(%q(victim))'",
        "node -e 'require(\"fs\").rmSync(\"victim\")'",
        "php -r 'unlink(\"victim\");'",
        "lua5.4 -e 'os.remove(\"victim\")'",
        "tclsh x.tcl",
        "awk 'BEGIN{system(\"rm victim\")}'",
        "gawk 'BEGIN{print | \"sh\"}'",
        "mawk 'BEGIN { \"rm victim\" | getline }'",
        "awk '{ print $0 > \"out\" }' x",
        "awk '{ printf \"%s\", $0 | \"sh\" }' x",
        "awk '@load \"x\"; BEGIN{}'",
        "awk -f prog.awk",
        "awk --exec prog.awk",
        "sed -n '1e rm victim' x",
        "sed 's/x/rm victim/e' x",
        "sed -e 's/a/b/' -e 'w out' x",
        "sed --expression='1e id' x",
        "sed -f script.sed x",
        "sed -ne '1e id' x",
        "dc -e '!rm victim'",
        "vim -c ':!rm victim' -c ':q'",
        // Programs that run a command for each thing they find, or from their input.
        "find . -exec rm {} +",
        "find . -name x -execdir rm {} ';'",
        "find . -ok rm {} ;",
        "find . -okdir rm {} ;",
        "fd -x rm",
        "echo victim | xargs -I{} sh -c 'rm {}'",
        "echo 'rm victim' | xargs env",
        "echo rm victim | xargs -L1 timeout 5",
        "echo victim | xargs python3",
        "parallel rm ::: victim",
        "watch -n 1 rm victim",
        "script -qc 'rm victim' /dev/null",
        "su -c 'rm victim' me",
        "sudo ls",
        "eval rm victim",
        "eval \"$X\"",
        ". ./env.sh",
        "source x",
        "alias r=rm\nr victim",
        "trap 'rm victim' EXIT",
        "f() { ls; }; f",
        "function g { ls; }",
        "tar -I 'sh -c \"rm victim\"' -xf x.tar",
        "tar --to-command='rm victim' -xf x.tar",
        "tar xIf 'rm victim' x.tar",
        "rsync -e 'sh -c \"rm victim\"' a b:",
        "sort --compress-prog=sh x",
        "rg --pre ./x y",
        "ssh localhost rm victim",
        "tmux new 'rm victim'",
        // Programs that run the commands a file names.
        "make",
        "make clean",
        "just deploy",
        "npm test",
        "npm run build",
        "npx something",
        "yarn",
        "run-parts d",
        "pytest -q t_x.py",
        "py.test",
        // Programs that run code they are given, or the program they are handed.
        "sqlite3 :memory: '.system rm victim'",
        "pydoc3 ./s.py",
        "vim.basic -es -c '!rm victim' -c q",
        "prlimit --nofile=100 rm victim",
        "setarch x86_64 rm victim",
        "linux64 rm victim",
        "x86_64 rm victim",
        "ssh-agent rm victim",
        "logsave /dev/null rm victim",
        "ld.so /usr/bin/rm victim",
        "/lib64/ld-linux-x86-64.so.2 /usr/bin/rm victim",
        // git: configuration on the line, aliases, and options that run a program.
        "git -c alias.p=push p",
        "git -c core.fsmonitor='rm victim' status",
        "git --config-env=alias.p=X p",
        "git p",
        "git --exec-path=./bin status",
        "git -C ../other status",
        "git --git-dir=evil status",
        "git config alias.p '!rm victim'",
        "git config --global core.pager 'rm victim'",
        "git rebase -x 'rm victim' HEAD~1",
        "git rebase --exe='rm victim' HEAD~1",
        "git bisect run rm victim",
        "git submodule foreach rm victim",
        "git difftool",
        "git grep -O 'rm victim' x",
        "git fetch --upload-pack='rm victim' origin",
        "git $X",
        // Arithmetic and names that evaluate a variable's value as code.
        "(( x ))",
        "echo $(( y + 1 ))",
        "let z=1",
        "[[ $x -eq 1 ]]",
        "echo ${a[$i]}",
        "echo ${!name}",
        "unset 'a[$(rm victim)]'",
        "read 'a[$(rm victim)]' < f",
        "[ -v 'a[$(rm victim)]' ]",
        // Variables that name code or where programs are found.
        "PATH=./bin ls",
        "BASH_ENV=x.sh bash -c ls",
        "LD_PRELOAD=./x.so ls",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.p GIT_CONFIG_VALUE_0=push git p",
        "export PAGER='rm victim'",
        "BASH_ALIASES[r]=rm; r victim",
        "env GIT_SSH_COMMAND='rm victim' git fetch",
        "sudo LD_PRELOAD=x ls",
    ]);
}

#[test]
fn commands_whose_words_say_what_runs_are_not() {
    plain(&[
        "ls -la",
        "rm victim",
        "git status",
        "git -C . push",
        "git --no-pager log --oneline",
        "git config --get user.name",
        "git send-email x",
        "cat README.md",
        "sed 's/a/b/g' x",
        "sed -n '1,5p' x",
        "sed -i.bak -e 's/a/b/' x",
        "sed --sandbox 's/x/y/e' x",
        "awk '{print $1}' x",
        "awk -F: -v n=1 '{print $n}' /etc/passwd",
        "awk -F: '$3 > 1000 || $1 == \"x\" {print $1}' /etc/passwd",
        "python3 --version",
        "gawk --sandbox 'BEGIN{system(\"x\")}'",
        "find . -name '*.rs'",
        "xargs rm",
        "echo victim | xargs rm -f",
        "echo victim | xargs -0 -n1 rm",
        "xargs",
        "env LANG=C ls",
        "env -i ls",
        "env -u HOME -C sub ls",
        "nice -n 5 ls",
        "nice -5 ls",
        "timeout -s KILL 5 ls",
        "timeout --signal=KILL 5 ls",
        "stdbuf -oL ls",
        "ionice -c 3 ls",
        "setsid -w ls",
        "flock -n lock ls",
        "taskset -c 1 ls",
        "command ls",
        "exec ls",
        "nohup ls",
        "time ls",
        "npm ls",
        "cargo build",
        "x=1; echo $x",
        "RUST_LOG=debug cargo test",
        "echo $((1 + 2))",
        "./build.sh",
        "ls *.rs",
        "echo 'r?'",
    ]);
}

#[test]
fn wrapper_options_the_judgement_does_not_model_exactly_are_opaque() {
    opaque(&[
        "env -S'rm victim'",
        "env -S 'rm victim'",
        "env --split-string='rm victim'",
        "env -iS'rm victim'",
        "env -i -S'rm victim'",
        "env --sp='rm victim'",
        "env --split='rm victim'",
        "env --chd=/ rm victim",
        "env -iu HOME rm victim",
        "timeout --sig KILL 5 rm victim",
        "timeout --kill=1 5 rm victim",
        "timeout -vk 1 5 rm victim",
        "nice --adj 5 rm victim",
        "nice --adjust=5 rm victim",
        "stdbuf --out L rm victim",
        "stdbuf --o=L rm victim",
        "flock --conf 1 lock rm victim",
        "flock --time 1 lock rm victim",
        "flock lock -c 'rm victim'",
        "ionice --classd 3 rm victim",
        "ionice --cl 3 rm victim",
        "setsid --wa rm victim",
        "taskset --cpu 1 rm victim",
        "time --form x rm victim",
        "env --unknown rm victim",
        "timeout $T rm victim",
        "env $X victim",
        "nice -n $N rm victim",
        "xargs --max-a 1 rm",
        "sudo -u root rm victim",
    ]);
    says("env -S'rm victim'", "`env -S` splits its argument into a command");
    says(
        "timeout --sig KILL 5 rm victim",
        "`timeout --sig` is an option the judgement does not know exactly",
    );
    says("env -iu HOME rm victim", "clusters flags with one that takes a value");
    says("echo rm victim | sh", "`sh` reads commands from its input");
    says("bash x.sh", "`bash` runs the commands of the file `x.sh`");
    says("python3 -c 'x'", "`python3 -c` runs its argument as code");
    says("git -c alias.p=push p", "`git -c` sets configuration");
    says("git p", "`git p` is not a git command");
    says("find . -exec rm {} +", "`find -exec` runs a command");
    says("alias r=rm", "`alias` defines a command name");
    says("trap 'rm victim' EXIT", "`trap` runs its argument as a script");
    says("make", "`make` runs the commands its file");
}

#[test]
fn a_glob_or_an_expansion_as_the_program_word_is_opaque() {
    opaque(&[
        "/bin/r? victim",
        "/bin/[r]m victim",
        "/bin/r* victim",
        "/usr/bin/?m victim",
        "r[m] victim",
        "env /bin/r? victim",
        "nice -n 1 /bin/r? victim",
        "sudo /bin/[r]m victim",
        "$RM victim",
        "${RM:-rm} victim",
        "\"$(printf rm)\" victim",
        "$'\\x72m' victim",
        "`echo rm` victim",
        "[r]m victim",
        "@(rm) victim",
        "{r,}m victim",
    ]);
    says("/bin/r? victim", "the program word `/bin/r?` is a glob");
    says("$RM victim", "the program word `$RM` is an expansion");
    // Quoted, the characters are the name: no glob.
    plain(&["'/bin/r?' victim", "/bin/r\\? victim", "[ -f x ]"]);
}

#[test]
fn globs_among_the_arguments_are_marked_as_patterns() {
    let s = parse("cat secret?/prod.key */x 'q?' \"*\" a\\*b [ab] [x /bin/[r]m");
    let seg = &s.segments[0];
    let patterns: Vec<&str> = seg.patterns.iter().map(|&i| seg.words[i].as_str()).collect();
    assert_eq!(patterns, vec!["secret?/prod.key", "*/x", "[ab]", "/bin/[r]m"]);
}

#[test]
fn an_opaque_command_is_never_auto() {
    for c in ["sed 's/x/y/e' f", "awk 'BEGIN{system(\"x\")}'", "/bin/l? x", "git -c a=b status"] {
        assert_eq!(
            super::super::judge_command(c).requirement,
            crate::tool::ApprovalRequirement::Required,
            "{c}"
        );
    }
}

#[test]
fn sed_scripts_that_only_edit_are_quiet() {
    for s in [
        "s/a/b/",
        "s/hello/world/g",
        "s|/usr|/opt|g",
        "1d",
        "$d",
        "/^#/d",
        "1,5p",
        "/a/,/b/s/x/y/2",
        "s/a\\/b/c/;p",
        "y/abc/xyz/",
        "1~2d",
        "/x/!d",
        "\\,x,d",
        "s/we/ew/I",
        "{ s/a/b/; p }",
        "0,/re/d",
        "2q",
        "a\\ text",
        ":a;N;$!ba;s/\\n/ /g",
        "",
    ] {
        assert!(sed_script_is_quiet(s), "{s:?}");
    }
    for s in [
        "e rm victim",
        "1e rm victim",
        "s/x/rm victim/e",
        "s/x/y/w out",
        "w out",
        "r secrets/key",
        "R f",
        "W f",
        "s/a/b/;e id",
        "/x/ e id",
        "1!e id",
        "s/a/b",
        "s/a/b/gew f",
        "{e id\n}",
        "$!{e id\n}",
    ] {
        assert!(!sed_script_is_quiet(s), "{s:?}");
    }
}

#[test]
fn globs_are_unescaped_wildcards() {
    for t in ["r?", "*", "/bin/[r]m", "a*b", "[ab]"] {
        assert!(has_glob(t), "{t}");
    }
    for t in ["rm", "\\*", "a\\?", "[", "a[b", "-"] {
        assert!(!has_glob(t), "{t}");
    }
}

#[test]
fn versions_are_the_same_program() {
    assert_eq!(family("python3.12"), "python");
    assert_eq!(family("lua5.4"), "lua");
    assert_eq!(family("perl"), "perl");
    assert_eq!(family("7z"), "7z");
    assert_eq!(family("vim.basic"), "vim");
    assert_eq!(family("pip3"), "pip");
}
