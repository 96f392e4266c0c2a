//! The slot's per-call decisions, benched as plain functions: name resolution against
//! catalogs of 10, 100 and 1,000 tools, schema cleaning, catalog rendering (first and cached),
//! truncation of a 1 MiB output, loop-guard and fingerprint checks.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolslot::config::Config;
use toolslot::output::{Budget, truncate};
use toolslot::plan::canonical_json;
use toolslot::plan::loop_guard::LoopGuard;
use toolslot::registry::{CatalogFormat, RegistryBuilder};
use toolslot::repair::names::{NameIndex, NameLimits, resolve_name};
use toolslot::schema::{NullableStyle, clean_schema};
use toolslot::shell::approval_key as shell_approval_key;
use toolslot::tool::{Capability, Tool, ToolContext, ToolFuture, ToolOutput, ToolSpec};

struct Named(String);

impl Tool for Named {
    fn name(&self) -> &str {
        &self.0
    }
    fn description(&self) -> &str {
        "A tool for the catalog benches, with a description of ordinary length."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}, "required": ["path"]})
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async { Ok(ToolOutput::text("")) })
    }
}

impl ToolSpec for Named {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
}

fn catalog_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("server{}__tool_number_{i}", i % 7)).collect()
}

fn bench(c: &mut Criterion) {
    let limits = NameLimits {
        max_distance: 3,
        max_suggestions: 3,
        prefix_min_chars: 3,
    };
    let mut g = c.benchmark_group("resolve_name");
    for n in [10, 100, 1000] {
        let names = catalog_names(n);
        let exact = names[n / 2].clone();
        g.bench_with_input(BenchmarkId::new("exact", n), &names, |b, names| {
            b.iter(|| resolve_name(black_box(&exact), names, limits))
        });
        g.bench_with_input(BenchmarkId::new("camel_case", n), &names, |b, names| {
            b.iter(|| resolve_name(black_box("Server3ToolNumber10"), names, limits))
        });
        g.bench_with_input(BenchmarkId::new("unknown", n), &names, |b, names| {
            b.iter(|| resolve_name(black_box("no_such_tool_at_all"), names, limits))
        });
        // What the planner does: the registry's index, built once per generation.
        let index = NameIndex::new(names.iter().cloned());
        g.bench_with_input(BenchmarkId::new("indexed_camel_case", n), &index, |b, index| {
            b.iter(|| index.resolve(black_box("Server3ToolNumber10"), limits, &|_| true))
        });
        g.bench_with_input(BenchmarkId::new("indexed_unknown", n), &index, |b, index| {
            b.iter(|| index.resolve(black_box("no_such_tool_at_all"), limits, &|_| true))
        });
    }
    g.finish();

    let dirty = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {
        "repo_path": {"type": "string", "title": "Repo Path"},
        "max_count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "Max Count"},
        "start": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
        "edits": {"type": "array", "items": {"type": "object", "properties": {"old": {"type": "string"}, "new": {"type": "string"}}, "required": ["old", "new", "ghost"]}},
        "options": {"type": "object"}}, "required": ["repo_path"]});
    c.bench_function("clean_schema/git_like", |b| {
        b.iter(|| clean_schema(black_box(&dirty), NullableStyle::TypeArray))
    });

    let config = Arc::new(Config::builtin());
    let registry = Arc::new(
        RegistryBuilder::new(Arc::clone(&config))
            .extend((0..100).map(|i| Arc::new(Named(format!("tool_{i:03}"))) as Arc<dyn ToolSpec>))
            .build(),
    );
    let mut g = c.benchmark_group("catalog_render_100_tools");
    g.bench_function("first", |b| b.iter(|| registry.catalog().render(CatalogFormat::Anthropic)));
    let cached = registry.catalog();
    cached.render(CatalogFormat::Anthropic);
    g.bench_function("cached", |b| b.iter(|| cached.render(CatalogFormat::Anthropic)));
    g.finish();

    let log: String = (0..40_000)
        .map(|i| {
            if i == 20_000 {
                "error[E0308]: mismatched types\n".to_string()
            } else {
                format!("   Compiling crate{i} v1.0.{i}\n")
            }
        })
        .collect();
    let log = &log[..log.len().min(1 << 20)];
    let budget = Budget::shell(&config.output);
    c.bench_function("truncate/1MiB_shell_log", |b| {
        b.iter(|| truncate(black_box(log), &budget, true, Some("pointer")))
    });

    let input = json!({"path": "src/main.rs", "limit": 200, "options": {"b": [1, 2, 3], "a": null}});
    c.bench_function("canonical_json/small_args", |b| b.iter(|| canonical_json(black_box(&input))));
    let mut guard = LoopGuard::new(toolslot::config::LoopGuardConfig {
        exempt: Vec::new(),
        ..config.loop_guard.clone()
    });
    let mut i = 0u64;
    c.bench_function("loop_guard/check_and_record", |b| {
        b.iter(|| {
            i += 1;
            let args = json!({"path": "src/main.rs", "n": i});
            let _ = guard.check("read_file", black_box(&args), false);
            guard.record(0, false)
        })
    });
    c.bench_function("shell_approval_key/git_with_flags", |b| {
        b.iter(|| shell_approval_key(black_box("git -C some/dir push --set-upstream origin main")))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
