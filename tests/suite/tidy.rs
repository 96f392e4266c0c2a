//! Architecture checks that read the source as text, as rust-analyzer's tidy tests do.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_slot_never_imports_actix() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    assert!(files.len() > 10, "found the slot's sources");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            assert!(
                !code.contains("actix") || code.starts_with("//"),
                "{}:{}: the slot must not use actix: {line}",
                file.display(),
                n + 1
            );
            assert!(
                !code.contains("tokio::spawn") && !code.contains("task::spawn("),
                "{}:{}: the slot must not spawn tasks: {line}",
                file.display(),
                n + 1
            );
        }
    }
}

/// The slot's floors, lowest first: a module may use only modules on lower floors (never one
/// on its own floor or above), so the layers docs/ARCHITECTURE.md describes are the layers the
/// code has. Written once, here; ARCHITECTURE.md states the same order.
const FLOORS: &[&[&str]] = &[
    // Ground: configuration and pure helpers every layer uses.
    &[
        "config",
        "canonical",
        "hex",
        "tool_name",
        "schema",
        "tls",
        "telemetry",
        "regular_file",
        "paths",
    ],
    // The ground of the tool contract (capabilities and the approval they derive), which the
    // event vocabulary names: one file of `tool`, below the rest of it.
    &["notice", "child_env", "child_group", "tool::capability"],
    // The ledger of decisions: plain file IO over canonical JSON.
    &["ledger"],
    // Plain data the contract serializes.
    &["event"],
    // A round's results as each provider's messages: plain data over the events.
    &["results"],
    // The trait layer: what a tool is, and the services it may ask its host for.
    &["tool"],
    // Input: what the model sent, made usable.
    &["forgery", "repair", "shell"],
    // What a team allows, asks about and denies, read against the input as the shell reads it.
    &["stream", "policy"],
    &["registry"],
    // The economics of results (and what a language server adds to them) and the OS sandbox
    // programs run in; then decisions about calls, which may read what results kept (handles).
    &["output", "lsp", "sandbox"],
    &["plan"],
    // Tools of each source.
    &["builtin", "mcp", "extension", "remote", "hooks"],
    // What holds a session together.
    &["session", "observe", "project_policy"],
];

/// The floor of a slot module (top-level, or a file FLOORS names on its own).
fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// `first::second` where FLOORS gives that file a floor of its own, else `first`.
fn unit_of(first: &str, second: Option<&str>) -> String {
    if let Some(second) = second {
        let sub = format!("{first}::{}", second.trim_end_matches(".rs"));
        if floor_of(&sub).is_some() {
            return sub;
        }
    }
    first.trim_end_matches(".rs").to_string()
}

/// The module a file of `src/` belongs to (`src/plan/call.rs` → `plan`).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root().join("src")).ok()?;
    let mut parts = rel.components().map(|c| c.as_os_str().to_str().unwrap_or(""));
    let first = parts.next()?;
    Some(unit_of(first, parts.next()))
}

/// Every `crate::…` path a line names outside comments, as written (`crate::{…}` as `{`, so a
/// grouped import cannot hide what it names).
fn crate_path_texts(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        out.push(if path.is_empty() { "{".to_string() } else { path });
    }
    out
}

/// Every `crate::<module>` a line names outside comments.
fn crate_paths(line: &str) -> Vec<String> {
    crate_path_texts(line)
        .iter()
        .filter_map(|path| {
            let mut parts = path.split("::").filter(|s| !s.is_empty());
            let first = parts.next().filter(|f| *f != "{")?;
            Some(unit_of(first, parts.next()))
        })
        .collect()
}

#[test]
fn the_slot_imports_only_downward() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut upward = Vec::new();
    for file in &files {
        let Some(module) = module_of(file) else { continue };
        // Tests may use anything: they sit above the code they test.
        if module == "lib" || file.to_string_lossy().ends_with("_tests.rs") {
            continue;
        }
        let floor = floor_of(&module).unwrap_or_else(|| panic!("src/{module} has no floor in tidy.rs FLOORS: give it one"));
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let next = lines.get(n + 1).map_or("", |l| l.trim());
            if line.trim() == "#[cfg(test)]" && (next.starts_with("mod ") || next.starts_with("#[path")) {
                break;
            }
            for target in crate_paths(line) {
                if target == module {
                    continue;
                }
                let Some(target_floor) = floor_of(&target) else {
                    upward.push(format!("{}:{}: `crate::{target}` has no floor in FLOORS", file.display(), n + 1));
                    continue;
                };
                if target_floor >= floor {
                    upward.push(format!(
                        "{}:{}: `{module}` (floor {floor}) uses `crate::{target}` (floor {target_floor}): {}",
                        file.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports that run upward or sideways:\n{}", upward.join("\n"));
}

/// The actors crate's rooms, lowest first, each with its own files' floors, lowest first: a
/// file may use another room only if that room is lower, and another file of its own room
/// only if that file stands on a lower floor. So the crate has no import circle, and
/// docs/ARCHITECTURE.md's order of rooms is the order the code has.
const ROOMS: &[(&str, &[&[&str]])] = &[
    // What lies outside the process: none of them knows another.
    ("sources", &[&["lsp", "mcp", "remote"]]),
    // The chain: its messages and what a session's stages share, the stages, then the one
    // file that wires them and a submission's life from the host's side.
    (
        "pipeline",
        &[
            &["chain", "turn", "sink"],
            &["audit", "inputs"],
            &["session"],
            &["stage"],
            &["hooking", "round_ledger"],
            &["stages"],
            &["wiring"],
            &["submission"],
        ],
    ),
    // What a host holds: sub-agents are child sessions on the dispatcher.
    (
        "host",
        &[&["session_table", "workspace"], &["dispatcher"], &["subagent"], &["toolset"]],
    ),
    // The front ends: the command line starts the servers (HTTP, MCP, the embedding), which
    // stand side by side in front of the same dispatcher; the HTTP server also answers MCP at
    // `/mcp`, so it stands on the MCP server's floor, not beside it.
    ("front", &[&["mcp_server", "embed", "telemetry"], &["server"], &["cli"]]),
];

/// The room and file (first component inside the room) of a path of `actors/src/`, or of a
/// `crate::` path's segments.
fn room_and_file<'a>(mut parts: impl Iterator<Item = &'a str>) -> Option<(String, String)> {
    let room = parts.next()?.trim_end_matches(".rs").to_string();
    let file = parts.next().unwrap_or("mod.rs").trim_end_matches(".rs").to_string();
    Some((room, file))
}

/// Every `crate::a::b` a line names outside comments, as its first two segments.
fn crate_paths2(line: &str) -> Vec<(String, String)> {
    crate_path_texts(line)
        .iter()
        .filter_map(|path| room_and_file(path.split("::").filter(|s| !s.is_empty())))
        .collect()
}

fn room_rank(room: &str) -> Option<usize> {
    ROOMS.iter().position(|(name, _)| *name == room)
}

fn floor_in_room(room: &str, file: &str) -> Option<usize> {
    let (_, floors) = ROOMS.iter().find(|(name, _)| *name == room)?;
    floors.iter().position(|floor| floor.contains(&file))
}

#[test]
fn the_actors_crate_imports_only_down_its_rooms() {
    let src = root().join("actors/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 30, "found the actors crate's sources");
    let mut upward = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap().to_string_lossy().to_string();
        if rel == "lib.rs" || rel == "main.rs" {
            continue;
        }
        let (room, own) = room_and_file(rel.split('/')).unwrap();
        let rank = room_rank(&room).unwrap_or_else(|| panic!("actors/src/{room} has no place in tidy.rs ROOMS: give it one"));
        let own_floor = if own == "mod" {
            None
        } else {
            Some(floor_in_room(&room, &own).unwrap_or_else(|| panic!("actors/src/{room}/{own} has no floor in tidy.rs ROOMS: give it one")))
        };
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let next = lines.get(n + 1).map_or("", |l| l.trim());
            // Unit tests sit above the code they test.
            if line.trim() == "#[cfg(test)]" && (next.starts_with("mod ") || next.starts_with("#[path")) {
                break;
            }
            for (target_room, target_file) in crate_paths2(line) {
                let at = format!("{}:{}: {}", file.display(), n + 1, line.trim());
                let Some(target_rank) = room_rank(&target_room) else {
                    upward.push(format!(
                        "{at}: `crate::{target_room}` has no place in ROOMS (name the room, not a re-export)"
                    ));
                    continue;
                };
                if target_room != room {
                    if target_rank > rank {
                        upward.push(format!("{at}: room `{room}` uses the higher room `{target_room}`"));
                    }
                    continue;
                }
                let (Some(own_floor), Some(target_floor)) = (own_floor, floor_in_room(&room, &target_file)) else {
                    continue;
                };
                if target_file != own && target_floor >= own_floor {
                    upward.push(format!(
                        "{at}: `{room}::{own}` uses `{room}::{target_file}`, which is not on a lower floor"
                    ));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run up or sideways in the actors crate:\n{}",
        upward.join("\n")
    );
}

#[test]
fn a_stage_names_no_other_stage() {
    // Only pipeline/wiring.rs knows which stage follows which: a stage holds a `Recipient` of
    // the message the next mailbox takes, so the chain's order can change in one file.
    let dir = root().join("actors/src/pipeline/stages");
    // A stage is a file, or a folder of files, of pipeline/stages/.
    let mut stages: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if name == "mod" {
            continue;
        }
        let mut files = Vec::new();
        if path.is_dir() {
            rust_files(&path, &mut files);
        } else {
            files.push(path);
        }
        stages.push((name, files));
    }
    let names: Vec<&str> = stages.iter().map(|(name, _)| name.as_str()).collect();
    assert!(stages.len() >= 5, "found the stages: {names:?}");
    let mut named = Vec::new();
    for (stage, files) in &stages {
        for file in files {
            let text = std::fs::read_to_string(file).unwrap();
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                let at = format!("{}:{}: {}", file.display(), n + 1, line.trim());
                for other in names.iter().filter(|s| *s != stage) {
                    if [format!("stages::{other}"), format!("super::{other}")]
                        .iter()
                        .any(|s| code.contains(s))
                    {
                        named.push(format!("{at}: names the stage `{other}`"));
                    }
                }
                if code.contains("Addr<") {
                    named.push(format!("{at}: holds an `Addr` (hold a `Recipient` of the next mailbox's message)"));
                }
            }
        }
    }
    assert!(named.is_empty(), "stages that name another stage:\n{}", named.join("\n"));
}

/// The longest a source file of either crate may be: past it a reader loses the file's one
/// concern, and it is split by what its parts do (a folder per concern when it grows).
const MAX_LINES: usize = 650;

#[test]
fn every_source_file_is_short_enough_to_read() {
    let mut files = Vec::new();
    for dir in ["src", "actors/src"] {
        rust_files(&root().join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(file).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", file.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by concern):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_merge_leftovers() {
    // A merge's `.orig` and `.rej` files, and conflict markers, never land.
    let mut files = Vec::new();
    for dir in [
        "src", "actors", "tests", "benches", "scripts", "examples", "fuzz", "docs", "config", ".ci",
    ] {
        all_files(&root().join(dir), &mut files);
    }
    for name in ["README.md", "BENCHMARKS.md", "Cargo.toml"] {
        files.push(root().join(name));
    }
    let mut found = Vec::new();
    for file in files {
        let name = file.to_string_lossy().to_string();
        if name.ends_with(".orig") || name.ends_with(".rej") {
            found.push(format!("{name}: a merge leftover"));
            continue;
        }
        // This file names the markers in order to forbid them.
        if file.ends_with("tidy.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (n, line) in text.lines().enumerate() {
            if ["<<<<<<< ", ">>>>>>> "].iter().any(|m| line.starts_with(m)) || line == "=======" {
                found.push(format!("{name}:{}: a conflict marker", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "merge leftovers:\n{}", found.join("\n"));
}

#[test]
fn the_slot_has_no_actor_dependencies() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table in the root Cargo.toml");
    for line in deps.lines() {
        assert!(
            !line.contains("actix") && !line.contains("toolslot-actors"),
            "root [dependencies] holds `{line}`"
        );
    }
}

#[test]
fn no_should_panic_or_ignore() {
    let mut files = Vec::new();
    for dir in ["src", "actors/src", "tests"] {
        rust_files(&root().join(dir), &mut files);
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for attr in ["#[should_panic", "#[ignore"] {
            let needle = attr.to_string();
            // This file names the attributes in order to forbid them.
            if file.ends_with("tidy.rs") {
                continue;
            }
            assert!(!text.contains(&needle), "{} uses {attr}", file.display());
        }
    }
}

#[test]
fn every_config_key_has_a_reason() {
    // Each key line in default.toml is preceded by a comment line (or another key of the same
    // commented group).
    let text = std::fs::read_to_string(root().join("config/default.toml")).unwrap();
    let mut prev_comment = false;
    let mut prev_key = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            prev_comment = true;
            continue;
        }
        if t.is_empty() || t.starts_with('[') {
            prev_comment = false;
            prev_key = false;
            continue;
        }
        if t.contains('=') {
            assert!(prev_comment || prev_key, "config key without a reason: {t}");
            prev_key = true;
            prev_comment = false;
        }
    }
}

#[test]
fn nothing_reads_outside_the_repository() {
    // A fresh clone must build and pass alone: no source, bench, script or example may name a
    // folder beside the checkout (the recorded streams live in tests/data/recorded).
    let mut files = Vec::new();
    for dir in ["src", "actors", "tests", "benches", "scripts", "examples", "fuzz", ".ci"] {
        all_files(&root().join(dir), &mut files);
    }
    let outside = ["../shared", "../../shared", "../.library"];
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        // This file names the forbidden paths in order to forbid them.
        if file.ends_with("tidy.rs") {
            continue;
        }
        for needle in outside {
            assert!(
                !text.contains(needle),
                "{} names `{needle}`, outside the repository",
                file.display()
            );
        }
    }
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "node_modules" || name == ".test-deps" {
            continue;
        }
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push(path);
        }
    }
}
