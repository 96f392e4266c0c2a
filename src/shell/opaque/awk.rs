//! `awk`: its program is code, so it is read for what can run a command or open a file.

/// `awk`: opaque unless its program is given inline and can neither run a command (`system`,
/// a pipe) nor open a file it names (`getline`, `>`), nor load code (`@load`, `-f`, `-l`).
pub(super) fn awk(name: &str, args: &[String]) -> Option<String> {
    let valued = ["-F", "-v", "--field-separator", "--assign"];
    let harmless = [
        "--posix",
        "-P",
        "--traditional",
        "-c",
        "--characters-as-bytes",
        "-b",
        "--re-interval",
        "-r",
        "--lint",
        "-L",
        "-M",
        "--bignum",
        "-N",
        "--use-lc-numeric",
        "-n",
        "--non-decimal-data",
        "-O",
        "--optimize",
        "-s",
        "--no-optimize",
    ];
    let mut sandbox = false;
    let mut programs: Vec<&str> = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let flag = a.split_once('=').map_or(a.as_str(), |(f, _)| f);
        if a == "-S" || a == "--sandbox" {
            sandbox = true;
        } else if a == "-e" || a == "--source" {
            programs.push(args.get(i + 1).map_or("", String::as_str));
            i += 1;
        } else if let Some(p) = a.strip_prefix("--source=") {
            programs.push(p);
        } else if valued.contains(&flag) {
            if !a.contains('=') {
                i += 1;
            }
        } else if !((a.starts_with("-F") || a.starts_with("-v")) && a.len() > 2) && !harmless.contains(&a.as_str()) {
            return Some(format!(
                "`{name} {a}` loads code from a file, or is an option the judgement does not know exactly"
            ));
        }
        i += 1;
    }
    if programs.is_empty() {
        programs.push(args.get(i).map_or("", String::as_str));
    }
    if sandbox {
        return None;
    }
    programs
        .iter()
        .any(|p| awk_runs(p))
        .then(|| format!("the `{name}` program can run a command (`system`, a pipe) or open a file it names"))
}

/// Whether an awk program can run a command or open a file it names: `system`, `getline`, a
/// pipe (`|`, not `||`), gawk's `@load` and `@include`, or a redirection after `print` or
/// `printf` (`print > "f"`; a `>` elsewhere compares).
fn awk_runs(program: &str) -> bool {
    if ["system", "getline", "@"].iter().any(|w| program.contains(w)) {
        return true;
    }
    if program.replace("||", "").contains('|') {
        return true;
    }
    let mut rest = program;
    while let Some(at) = rest.find("print") {
        let after = &rest[at + "print".len()..];
        let statement = after.split([';', '}', '\n']).next().unwrap_or("");
        if statement.contains('>') {
            return true;
        }
        rest = after;
    }
    false
}
