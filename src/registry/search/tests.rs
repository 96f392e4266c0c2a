//! The ranking's reading rules, each on a small tool set where only that rule decides.

use super::arguments::{looks_like_identifier, looks_like_revision, quoted_text};
use super::*;

fn index() -> SearchIndex {
    SearchIndex::new(vec![
        (
            "filesystem__read_text_file".into(),
            "Read the complete contents of a file as text.".into(),
        ),
        (
            "filesystem__list_directory".into(),
            "Get a detailed listing of all files and directories in a specified path.".into(),
        ),
        ("filesystem__move_file".into(), "Move or rename files and directories.".into()),
        (
            "git__git_diff_unstaged".into(),
            "Shows changes in the working directory that are not yet staged".into(),
        ),
        ("git__git_log".into(), "Shows the commit logs".into()),
        ("time__get_current_time".into(), "Get current time in a specific timezones".into()),
        ("time__convert_time".into(), "Convert time between timezones".into()),
    ])
}

#[track_caller]
fn check(query: &str, expected_top: &str) {
    let hits = index().search(query, 3);
    assert!(
        hits.iter().any(|h| h.name == expected_top),
        "{query:?}: expected {expected_top} in the top 3, got {:?}",
        hits.iter().map(|h| &h.name).collect::<Vec<_>>()
    );
}

#[test]
fn paraphrases_find_the_tool() {
    check("show me what's in a folder", "filesystem__list_directory");
    check("rename a file", "filesystem__move_file");
    check("what changed that I haven't staged", "git__git_diff_unstaged");
    check("recent commit history", "git__git_log");
    check("what time is it in Tokyo", "time__get_current_time");
    check("open a file and show its contents", "filesystem__read_text_file");
}

#[test]
fn tokenizer_splits_names() {
    assert_eq!(
        tokenize("readFile git_diff-unstaged"),
        vec!["read", "file", "git", "diff", "unstag"]
    );
}

#[test]
fn results_are_deterministic_and_bounded() {
    let a = index().search("file", 2);
    let b = index().search("file", 2);
    assert_eq!(a, b);
    assert_eq!(a.len(), 2);
    assert!(index().search("zzzz", 5).is_empty());
}

fn top(tools: &[(&str, &str)], query: &str) -> Vec<String> {
    SearchIndex::new(tools.iter().map(|(n, d)| (n.to_string(), d.to_string())).collect())
        .search(query, 3)
        .into_iter()
        .map(|h| h.name)
        .collect()
}

const FILES_AND_PEOPLE: &[(&str, &str)] = &[
    ("read_media_file", "Read an image or audio file and return it as base64"),
    ("echo", "Echoes back the input string"),
    ("commit", "Records changes to the repository"),
    ("edit_file", "Make line-based edits to a text file. Returns a diff."),
    ("read_many", "Read the contents of multiple files simultaneously"),
    ("open_nodes", "Open specific nodes in the knowledge graph by their names"),
    ("search_nodes", "Search for nodes in the knowledge graph based on a query"),
    ("delete_entities", "Delete multiple entities from the knowledge graph"),
    ("show", "Shows the contents of a commit given as a revision"),
    ("search_files", "Recursively search for files matching a glob pattern"),
    ("list_directory", "Get a detailed listing of all files and directories"),
    ("toggle_logging", "Toggles simulated logging on or off"),
    ("subscriber_updates", "Sends resource subscriber updates"),
];

#[track_caller]
fn first(query: &str, expected: &str) {
    let hits = top(FILES_AND_PEOPLE, query);
    assert_eq!(hits.first().map(String::as_str), Some(expected), "{query:?}: {hits:?}");
}

#[test]
fn arguments_are_words_the_tool_takes() {
    // A file name, a glob and a commit id are what the tool is given: the media reader
    // answers "song.mp3" though "play back" matches `echo`'s words.
    first("play back the song.mp3", "read_media_file");
    first("find *.test.js", "search_files");
    first("what did a1b2c3 change", "show");
    // A capitalized word that no tool mentions is a name; one that a tool mentions is not.
    assert!(top(FILES_AND_PEOPLE, "anything on Alice").iter().any(|h| h.ends_with("entities")));
    first("Echo hello", "echo");
    // A sentence's first capital and its closing punctuation change nothing.
    first("Play back the song.mp3?", "read_media_file");
    first("Turn the fake logs on.", "toggle_logging");
}

#[test]
fn other_forms_and_split_phrases_are_read() {
    // `subscribe` meets `subscriber`, which no suffix rule joins.
    first("how do I subscribe", "subscriber_updates");
    // "turn the logging on" is "turn on", with its object in between.
    first("turn the fake logs on", "toggle_logging");
}

const DEV_TOOLS: &[(&str, &str)] = &[
    ("git_status", "Shows the working tree status"),
    ("git_diff", "Shows differences between branches or commits"),
    ("git_show", "Shows the contents of a commit given as a revision"),
    ("git_add", "Adds file contents to the staging area"),
    ("edit_file", "Replace an exact piece of text in a file"),
    ("move_file", "Move or rename files and directories"),
    ("read_file", "Read the complete contents of a file"),
    ("list_directory", "List the files in a directory"),
    ("grep_files", "Search the files' text for a regular expression"),
    ("search_files", "Find files whose path matches a glob pattern"),
    ("create_directory", "Create a new directory"),
    ("write_file", "Create a new file or overwrite one with new content"),
    ("fetch_url", "Fetch a web page by its url"),
    ("get_sum", "Returns the sum of two numbers"),
    ("kill_shell", "Stop a background shell task"),
];

#[track_caller]
fn dev_first(query: &str, expected: &str) {
    let hits = top(DEV_TOOLS, query);
    assert_eq!(hits.first().map(String::as_str), Some(expected), "{query:?}: {hits:?}");
}

#[test]
fn a_mistyped_word_is_read_as_the_word_it_misses() {
    // A letter left out, two letters swapped.
    dev_first("serch the text for unwrap", "grep_files");
    dev_first("lsit the directory", "list_directory");
    // A real word is not "corrected" into another one by a changed letter: `test` is not
    // `text`, so nothing here answers it.
    assert!(top(DEV_TOOLS, "test").is_empty(), "{:?}", top(DEV_TOOLS, "test"));
    assert!(one_slip_from("serch", "search") && one_slip_from("lsit", "list"));
    assert!(!one_slip_from("test", "text") && !one_slip_from("three", "tree") && !one_slip_from("olst", "list"));
}

#[test]
fn what_a_query_names_is_read_for_what_it_is() {
    // Revisions as git writes them, a short hash, a range.
    dev_first("show HEAD~3", "git_show");
    assert!(top(DEV_TOOLS, "view README.md as it was at HEAD~3").contains(&"git_show".to_string()));
    dev_first("show 9f2e1", "git_show");
    dev_first("compare main..HEAD", "git_diff");
    assert!(
        looks_like_revision("HEAD^")
            && looks_like_revision("v1.2.3")
            && looks_like_revision("main..HEAD")
            && looks_like_revision("main..feature/auth")
    );
    assert!(
        !looks_like_revision("head") && !looks_like_revision("v1") && !looks_like_revision("../src") && !looks_like_revision("src/../lib")
    );
    // A path is a place, a quoted phrase is text to find, a site is on the web, a sum is
    // arithmetic, a regular expression is a pattern to search with.
    dev_first("mkdir -p build/output/logs", "create_directory");
    let rank = |q: &str| top(DEV_TOOLS, q).iter().position(|t| t == "grep_files");
    assert_eq!(rank("look for 'connection refused'"), Some(0));
    assert!(rank("look for connection refused") != Some(0));
    dev_first("the release notes on github.com", "fetch_url");
    dev_first("what's 17 + 25", "get_sum");
    dev_first("occurrences of fn\\s+main", "grep_files");
    assert_eq!(quoted_text("don't touch the users' files"), None);
    assert_eq!(quoted_text("find \"TODO fix\" in src").as_deref(), Some("TODO fix"));
    assert_eq!(quoted_text("'a' 'b"), Some("a".to_string()));
    // A well-known file without an extension is a file, not somebody's name.
    dev_first("locate the Makefile", "search_files");
}

#[test]
fn prose_and_numbers_are_not_taken_for_arguments() {
    use super::arguments::{looks_like_arithmetic, looks_like_file_name, looks_like_host, looks_like_path, looks_like_regex};
    // A relative path to a file is a file; a site is a site, with or without a path.
    assert!(looks_like_file_name("../src/main.rs") && !looks_like_file_name("main..HEAD"));
    assert!(!looks_like_file_name("github.com") && looks_like_host("github.com/org/repo") && !looks_like_path("github.com/org"));
    // Numbers with `^`, `..` or `/` are not revisions, paths or sums; a Windows path is not a
    // regular expression.
    assert!(!looks_like_revision("2^10") && !looks_like_revision("10..20"));
    assert!(!looks_like_path("03/14/2024") && !looks_like_arithmetic("03/14/2024") && !looks_like_arithmetic("24/7"));
    assert!(!looks_like_regex("C:\\Users\\bob\\src") && looks_like_regex("\\bfoo\\b"));
    // A word and a number run together is not a short hash.
    assert!(!looks_like_identifier("dec25") && looks_like_identifier("9f2e1"));
    // A quoted file is that file, not text to find.
    let rank = |q: &str| top(DEV_TOOLS, q).iter().position(|t| t == "grep_files");
    assert_ne!(rank("open `config.yaml`"), Some(0));
    // A real word the tools lack weighs less than a mistyped one corrected: "crate" is not
    // read as "create" at full weight.
    assert_ne!(
        top(DEV_TOOLS, "add the serde crate").first().map(String::as_str),
        Some("create_directory")
    );
}

#[test]
fn edits_already_made_are_changes_to_see() {
    // Beside version control, or told of as done, edits are the diff; an imperative edit
    // is still an edit.
    dev_first("show my uncommitted edits", "git_status");
    assert!(
        top(DEV_TOOLS, "what files have I modified")
            .iter()
            .take(2)
            .any(|t| t.starts_with("git_"))
    );
    dev_first("edit the config file", "edit_file");
    // Renaming a variable is an edit of the text; renaming a file is a move.
    dev_first("rename a variable inside utils.py", "edit_file");
    dev_first("rename the file", "move_file");
    // A command's name is read as typed: `touch` creates, "touched" does not.
    assert_ne!(
        top(DEV_TOOLS, "which files have I touched").first().map(String::as_str),
        Some("write_file")
    );
}

#[test]
fn odd_queries_rank_without_failing() {
    for q in [
        "",
        " ",
        "turn",
        "turn on",
        "turn  on  ",
        "Ünïcode turn ü on é",
        "turn the ✓ on",
        ".",
        "*",
        ".tsx",
        "**/*",
        "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2",
        "Élodie and Zoë",
        "\"quoted\" 'words'",
        "set ü up up up",
        "'",
        "\"\"",
        "'a' 'b",
        "..",
        "a..",
        "HEAD~~^",
        "+",
        "1+",
        "ctrl-c",
        "é'ü'",
        "\\s\\s\\s",
        "what's 1/0",
    ] {
        let hits = top(FILES_AND_PEOPLE, q);
        assert!(hits.len() <= 3, "{q:?}");
    }
}

/// A description that says little is not a better match for it: BM25's length normalization
/// would score "Search things." 1.5× a tool of ordinary length that says what it searches,
/// on the one word they share; the floor on a description's length keeps the lift near 1.3×.
#[test]
fn a_short_description_is_not_rewarded_for_saying_little() {
    let ordinary = |name: &str, first: &str| {
        SearchDoc::new(
            name,
            format!("{first} by neighbourhood, price range and size; returns each one's address, price and photos."),
        )
    };
    let index = SearchIndex::from_docs(vec![
        SearchDoc::new("finder", "Search things."),
        ordinary("homefinder__listings", "Search the property listings"),
        ordinary("rentals__browse", "Browse flats to rent"),
        ordinary("parking__spots", "Look up parking spaces"),
        ordinary("offices__desks", "Look up shared desks"),
    ]);
    let scores = index.scores("search");
    let (short, full) = (scores.lexical[0], scores.lexical[1]);
    assert!(short > 0.0 && full > 0.0, "{scores:?}");
    assert!(short / full < 1.4, "the short description scores {:.2}× the full one", short / full);
}

#[test]
fn told_to_remember_is_a_request_to_store_and_asked_is_one_to_read() {
    // Three tools of one memory server, alike but in what they do; only the delete tool's
    // words hold "remember" itself.
    let memory: &[(&str, &str)] = &[
        ("delete_notes", "Delete remembered notes from the memory"),
        ("add_notes", "Add notes to the memory"),
        ("read_notes", "Read the notes in the memory"),
    ];
    let told = top(memory, "remember my favourite editor is vim");
    assert_eq!(told.first().map(String::as_str), Some("add_notes"), "{told:?}");
    let asked = top(memory, "do you remember my favourite editor");
    assert_eq!(asked.first().map(String::as_str), Some("read_notes"), "{asked:?}");
}
