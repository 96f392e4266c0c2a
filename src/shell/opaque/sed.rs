//! `sed`: its script is code, so it is read command by command for what can run a command or
//! read or write a file it names.

/// `sed`: opaque when a script comes from a file, or can run a command or write or read a file
/// it names (`e`, `s///e`, `w`, `s///w`, `r`, `R`, `W`), or an option is not known exactly.
pub(super) fn sed(name: &str, args: &[String]) -> Option<String> {
    let flags = ['n', 'r', 'E', 's', 'u', 'z', 'b'];
    let long_flags = [
        "--quiet",
        "--silent",
        "--regexp-extended",
        "--separate",
        "--unbuffered",
        "--null-data",
        "--zero-terminated",
        "--posix",
        "--debug",
        "--follow-symlinks",
        "--binary",
        "--help",
        "--version",
    ];
    let mut scripts: Vec<&str> = Vec::new();
    let mut sandbox = false;
    let mut i = 0;
    let mut options_end = false;
    let mut positional = Vec::new();
    while let Some(a) = args.get(i) {
        i += 1;
        if options_end || !a.starts_with('-') || a == "-" {
            positional.push(a.as_str());
            continue;
        }
        if a == "--" {
            options_end = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (flag, value) = match long.split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (long, None),
            };
            match flag {
                "expression" => match value {
                    Some(v) => scripts.push(v),
                    None => {
                        scripts.push(args.get(i).map_or("", String::as_str));
                        i += 1;
                    }
                },
                "file" => return Some(format!("`{name} {a}` reads its script from a file")),
                "sandbox" => sandbox = true,
                "in-place" => {}
                "line-length" => {
                    if value.is_none() {
                        i += 1;
                    }
                }
                _ if value.is_none() && long_flags.contains(&a.as_str()) => {}
                _ => return Some(format!("`{name} {a}` is an option the judgement does not know exactly")),
            }
            continue;
        }
        let cluster: Vec<char> = a[1..].chars().collect();
        for (k, c) in cluster.iter().enumerate() {
            if flags.contains(c) {
                continue;
            }
            let glued: String = cluster[k + 1..].iter().collect();
            match c {
                // `-i[SUFFIX]`: the rest of the cluster is the suffix.
                'i' => break,
                'e' | 'l' | 'f' => {
                    let value = if glued.is_empty() {
                        i += 1;
                        args.get(i - 1).map_or("", String::as_str)
                    } else {
                        a.get(a.len() - glued.len()..).unwrap_or("")
                    };
                    match c {
                        'e' => scripts.push(value),
                        'f' => return Some(format!("`{name} -f` reads its script from a file")),
                        _ => {}
                    }
                    break;
                }
                _ => return Some(format!("`{name} {a}` is an option the judgement does not know exactly")),
            }
        }
    }
    if scripts.is_empty() {
        scripts.push(positional.first().copied().unwrap_or(""));
    }
    if sandbox {
        return None;
    }
    scripts
        .iter()
        .find(|s| !sed_script_is_quiet(s))
        .map(|s| format!("the `{name}` script `{s}` can run a command or read or write a file it names (`e`, `w`, `r`, `s///e`)"))
}

/// Whether a sed script only edits its stream: no `e`, `r`, `R`, `w`, `W` command, no `e` or
/// `w` flag on `s`. Anything it does not understand is not quiet.
pub(super) fn sed_script_is_quiet(script: &str) -> bool {
    let s: Vec<char> = script.chars().collect();
    let mut i = 0;
    let at = |i: usize| s.get(i).copied();
    // Skips a delimited part (`/re/`, the parts of `s` and `y`) from just after its opening
    // delimiter; returns the index after its closing one.
    let delimited = |mut i: usize, d: char| -> Option<usize> {
        while let Some(c) = s.get(i).copied() {
            if c == '\\' {
                i += 2;
                continue;
            }
            if c == d {
                return Some(i + 1);
            }
            if c == '\n' {
                return None;
            }
            i += 1;
        }
        None
    };
    loop {
        // Separators between commands.
        while at(i).is_some_and(|c| c.is_whitespace() || c == ';') {
            i += 1;
        }
        let Some(mut c) = at(i) else { return true };
        if c == '#' {
            while at(i).is_some_and(|c| c != '\n') {
                i += 1;
            }
            continue;
        }
        // Addresses: a line number, `$`, `/re/` or `\cREc`, a step, a range, a negation.
        for _ in 0..2 {
            if c.is_ascii_digit() {
                while at(i).is_some_and(|c| c.is_ascii_digit() || c == '~') {
                    i += 1;
                }
            } else if c == '$' {
                i += 1;
            } else if c == '/' || c == '\\' {
                let d = if c == '/' {
                    '/'
                } else {
                    i += 1;
                    match at(i) {
                        Some(d) => d,
                        None => return false,
                    }
                };
                i = match delimited(i + 1, d) {
                    Some(n) => n,
                    None => return false,
                };
                while at(i).is_some_and(|c| c == 'I' || c == 'M') {
                    i += 1;
                }
            } else if (c == '+' || c == '~') && at(i + 1).is_some_and(|c| c.is_ascii_digit()) {
                i += 1;
                while at(i).is_some_and(|c| c.is_ascii_digit()) {
                    i += 1;
                }
            }
            while at(i).is_some_and(|c| c == ' ' || c == '\t') {
                i += 1;
            }
            if at(i) == Some(',') {
                i += 1;
                while at(i).is_some_and(|c| c == ' ' || c == '\t') {
                    i += 1;
                }
                match at(i) {
                    Some(n) => c = n,
                    None => return false,
                }
                continue;
            }
            break;
        }
        while at(i).is_some_and(|c| c == '!' || c == ' ' || c == '\t') {
            i += 1;
        }
        let Some(cmd) = at(i) else { return false };
        i += 1;
        match cmd {
            // A block opens: its first command follows at once.
            '{' => continue,
            '}' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {}
            'q' | 'Q' | 'l' | 'L' => {
                while at(i).is_some_and(|c| c.is_ascii_digit() || c == ' ') {
                    i += 1;
                }
            }
            'b' | 't' | 'T' | ':' | 'v' => {
                while at(i).is_some_and(|c| c != ';' && c != '\n' && (cmd == ':' || c != '}')) {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' => {
                // The text, to the end of the line (a backslash continues it).
                while let Some(c) = at(i) {
                    if c == '\\' {
                        i += 2;
                        continue;
                    }
                    if c == '\n' {
                        break;
                    }
                    i += 1;
                }
            }
            's' | 'y' => {
                let Some(d) = at(i) else { return false };
                if d == '\n' || d == '\\' {
                    return false;
                }
                i = match delimited(i + 1, d).and_then(|n| delimited(n, d)) {
                    Some(n) => n,
                    None => return false,
                };
                if cmd == 's' {
                    while let Some(f) = at(i) {
                        match f {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => i += 1,
                            f if f.is_ascii_digit() => i += 1,
                            ';' | '\n' | '}' | '#' | ' ' | '\t' => break,
                            // `e` runs the pattern space, `w` writes a file; anything else is unknown.
                            _ => return false,
                        }
                    }
                }
            }
            // `e` runs a command, `r`/`R` read and `w`/`W` write a file they name.
            _ => return false,
        }
        while at(i).is_some_and(|c| c == ' ' || c == '\t') {
            i += 1;
        }
        if !matches!(at(i), None | Some(';' | '\n' | '}' | '#')) {
            return false;
        }
    }
}
