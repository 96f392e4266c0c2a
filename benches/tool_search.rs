//! tool_search on a catalog of 500 tools, side by side: the lexical ranker alone
//! (`search.semantic = false`) and fused with the sentence model. Index time is measured cold
//! (every tool embedded) and warm (the vectors cached, as when a registry is rebuilt with one
//! more server); query time on requests of every kind. Memory is printed before the runs.
//!
//! Needs the model installed by scripts/install-test-deps.sh.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use toolslot::registry::semantic::{SentenceModel, locate_model};
use toolslot::registry::{SearchDoc, SearchIndex};

const TOOLS: usize = 500;

fn data(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).expect("test data")).expect("JSON")
}

/// 500 tools of every kind: two general-purpose catalogs and the six coding servers.
fn catalog() -> Vec<SearchDoc> {
    let mut docs = Vec::new();
    for file in [
        "tool_search_general1_tools.json",
        "tool_search_general2_tools.json",
        "mcp_tools.json",
        "tool_search_general3_tools.json",
    ] {
        for t in data(file).as_array().expect("a list of tools") {
            docs.push(
                SearchDoc::new(
                    t["name"].as_str().unwrap_or_default(),
                    t["description"].as_str().unwrap_or_default(),
                )
                .with_title(t["title"].as_str())
                .with_schema(&t["input_schema"]),
            );
        }
    }
    docs.truncate(TOOLS);
    docs
}

fn queries() -> Vec<String> {
    let mut out = Vec::new();
    for file in ["tool_search_general1.json", "tool_search_blind6.json"] {
        for q in data(file).as_array().expect("a list of queries").iter().take(50) {
            out.push(q["query"].as_str().unwrap_or_default().to_string());
        }
    }
    out
}

fn model(cache_tools: usize) -> Arc<SentenceModel> {
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".test-deps/venv");
    let dir = locate_model("", &[venv.display().to_string()]).expect("run scripts/install-test-deps.sh: the sentence model is missing");
    let max_tokens = toolslot::config::Config::builtin().search.model_max_tokens;
    Arc::new(SentenceModel::load(&dir, max_tokens, cache_tools).expect("the model loads"))
}

fn bench(c: &mut Criterion) {
    let docs = catalog();
    assert_eq!(docs.len(), TOOLS);
    let queries = queries();
    // No cache: every build embeds all 500 tools.
    let cold = model(0);
    let warm = model(10_000);
    let fused = SearchIndex::with_model(docs.clone(), Some(Arc::clone(&warm)));
    let lexical = SearchIndex::from_docs(docs.clone());
    println!(
        "memory: model weights and {TOOLS} cached tool vectors {:.1} MiB",
        warm.memory_bytes() as f64 / (1024.0 * 1024.0)
    );

    let mut g = c.benchmark_group("tool_search_index_500");
    g.sample_size(10);
    g.bench_function("lexical", |b| b.iter(|| black_box(SearchIndex::from_docs(docs.clone()))));
    g.bench_function("fused_cold", |b| {
        b.iter(|| black_box(SearchIndex::with_model(docs.clone(), Some(Arc::clone(&cold)))))
    });
    g.bench_function("fused_cached", |b| {
        b.iter(|| black_box(SearchIndex::with_model(docs.clone(), Some(Arc::clone(&warm)))))
    });
    g.finish();

    let mut g = c.benchmark_group("tool_search_query_500");
    let mut i = 0;
    g.bench_function("lexical", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            black_box(lexical.search(&queries[i], 5))
        })
    });
    g.bench_function("fused", |b| {
        b.iter(|| {
            i = (i + 1) % queries.len();
            black_box(fused.search(&queries[i], 5))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
