//! Shared by the benches: tools of known cost, recorded-format rounds, and "the same logic
//! called directly" — the slot's functions in one task, with the pipeline's batching.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolslot::config::Config;
use toolslot::event::{PipelineEvent, ToolResult};
use toolslot::output::{FinishContext, Overflow, finish_call};
use toolslot::plan::batches::plan_batches;
use toolslot::plan::loop_guard::LoopGuard;
use toolslot::plan::{Action, PlanContext, plan_call};
use toolslot::registry::{Registry, RegistryBuilder};
use toolslot::session::SessionMemory;
use toolslot::stream::{Assembler, AssemblyEvent, StopReason};
use toolslot::tool::{Capability, Tool, ToolContext, ToolFuture, ToolOutput, ToolSpec};

pub mod http_stub;
pub mod proc_stat;
pub mod remote;

/// A read-only, parallel tool that does nothing (`noop`) or sleeps (`sleep1ms`, `sleep20ms`,
/// the latter standing for a slow read such as a large grep).
pub struct Cost(pub &'static str);

impl Tool for Cost {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "A tool of known cost"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"i": {"type": "integer"}}})
    }
    fn run<'a>(&'a self, _input: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.0 {
                "sleep1ms" => tokio::time::sleep(Duration::from_millis(1)).await,
                "sleep10ms" => tokio::time::sleep(Duration::from_millis(10)).await,
                "sleep20ms" => tokio::time::sleep(Duration::from_millis(20)).await,
                _ => {}
            }
            Ok(ToolOutput::text("ok"))
        })
    }
}

impl ToolSpec for Cost {
    fn capabilities(&self) -> &[Capability] {
        &[Capability::ReadOnly]
    }
    fn supports_parallel(&self) -> bool {
        true
    }
}

/// The bench config: `workers` worker threads (0: the bench's own thread), repeated identical calls allowed (every iteration
/// sends the same round), saved outputs in a temporary folder.
pub fn config(overflow: &std::path::Path, workers: usize) -> Arc<Config> {
    config_with(None, overflow, workers)
}

/// [`config`] over the overlay `file` (the tables the environment cannot give, such as
/// `[[extensions]]`).
pub fn config_with(file: Option<&std::path::Path>, overflow: &std::path::Path, workers: usize) -> Arc<Config> {
    // TOOLSLOT_* variables of the environment override these, to bench other settings.
    let mut env: Vec<(String, String)> = vec![
        ("TOOLSLOT_EXECUTION__WORKERS".to_string(), workers.to_string()),
        (
            "TOOLSLOT_LOOP_GUARD__EXEMPT".to_string(),
            "noop,sleep1ms,sleep20ms,read_file,exec_shell,count_bytes".to_string(),
        ),
        ("TOOLSLOT_OVERFLOW__DIR".to_string(), overflow.display().to_string()),
        ("TOOLSLOT_APPROVAL__MODE".to_string(), "full-auto".to_string()),
        // The pipeline's own cost, without a synced ledger write per call (a disk's fsync time,
        // not ours): set TOOLSLOT_AUDIT__LEDGER_DIR to bench with it.
        ("TOOLSLOT_AUDIT__LEDGER_DIR".to_string(), String::new()),
    ];
    env.extend(std::env::vars().filter(|(k, _)| k.starts_with("TOOLSLOT_")));
    Arc::new(Config::load_with_env(file, env).expect("bench config loads"))
}

pub fn registry(config: &Arc<Config>) -> Arc<Registry> {
    Arc::new(
        toolslot::extension::add_declared(RegistryBuilder::new(Arc::clone(config)), config)
            .extend(toolslot::builtin::enabled(config))
            .with_tool(Arc::new(Cost("noop")))
            .with_tool(Arc::new(Cost("sleep1ms")))
            .with_tool(Arc::new(Cost("sleep20ms")))
            .build(),
    )
}

/// An OpenAI Chat round of `k` calls to `tool`, as the provider's SSE bytes.
pub fn round(tool: &str, k: usize, args: impl Fn(usize) -> Value) -> Vec<u8> {
    round_of(k, |n| (tool, args(n)))
}

/// An OpenAI Chat round of `k` calls, call `n` being `call(n)` (its tool and arguments).
pub fn round_of<'a>(k: usize, call: impl Fn(usize) -> (&'a str, Value)) -> Vec<u8> {
    let mut out = String::new();
    for n in 0..k {
        let (tool, args) = call(n);
        let head = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": n, "id": format!("call_{n}"), "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}, "finish_reason": null}]});
        out.push_str(&format!("data: {head}\n\n"));
    }
    out.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

/// A call's id, name and arguments, shared by the events about it.
type Head = (Arc<str>, Arc<str>, Arc<Value>);

/// The pipeline's logic as plain calls in one task: assemble, plan each call in order, batch,
/// run each batch (concurrently where the pipeline would), post-process in order.
pub async fn direct_round(
    config: &Arc<Config>,
    memory: &Arc<SessionMemory>,
    guard: &mut LoopGuard,
    workspace: &std::path::Path,
    body: &[u8],
    host: Option<&tokio::sync::mpsc::UnboundedSender<PipelineEvent>>,
) -> Vec<ToolResult> {
    // With `host`, the host hears what the pipeline would tell it: the same events, built
    // the same way, through the same kind of channel.
    // Built only when someone listens: without `host`, this is the bare logic.
    let emit = |e: &dyn Fn() -> PipelineEvent| {
        if let Some(tx) = host {
            let _ = tx.send(e());
        }
    };
    let mut assembler = Assembler::new(None);
    let mut events = Vec::new();
    assembler.feed(body, &mut events);
    assembler.finish(&mut events);
    let mut calls = Vec::new();
    let mut stop = StopReason::Other;
    for e in events {
        match e {
            AssemblyEvent::CallReady(c) => calls.push(c),
            AssemblyEvent::RoundEnd(end) => {
                calls.extend(end.unfinished);
                stop = end.stop_reason;
            }
            AssemblyEvent::Notice(_) => {}
        }
    }
    let catalog = memory.catalog();
    let policy = toolslot::policy::Policy::empty();
    let ctx = PlanContext {
        registry: catalog.registry(),
        catalog: &catalog,
        config,
        mode: config.approval.mode,
        services: Some(memory.as_ref()),
        policy: &policy,
        workspace: std::path::Path::new("."),
    };
    let planned: Vec<_> = calls
        .iter()
        .map(|c| plan_call(ctx, c, stop == StopReason::MaxTokens, guard))
        .collect();
    // With a host, each call's identity is made shareable once and handed to every event
    // about it, as the pipeline does.
    let heads: Vec<Option<Head>> = planned
        .iter()
        .map(|p| host.map(|_| (Arc::from(p.id.as_str()), Arc::from(p.name.as_str()), Arc::new(p.input.clone()))))
        .collect();
    for (p, head) in planned.iter().zip(&heads) {
        if let Some((id, name, input)) = head {
            emit(&|| PipelineEvent::CallAssembled {
                index: p.index,
                id: Arc::clone(id),
                name: Arc::clone(name),
                input: Arc::clone(input),
                repair: p.repair,
                thought_signature: p.thought_signature.clone(),
            });
        }
    }
    let order: Vec<(usize, bool)> = planned
        .iter()
        .map(|p| (p.index, !matches!(p.action, Action::Run { parallel_safe: false, .. })))
        .collect();
    let mut results = Vec::with_capacity(planned.len());
    let registry = catalog.registry();
    let heads = &heads;
    for batch in plan_batches(&order) {
        let runs = batch.indices.iter().map(|&i| {
            let p = &planned[i];
            async move {
                match &p.action {
                    Action::Refuse(e) => Err(e.clone()),
                    Action::Run { grant, .. } => {
                        let tool = registry.get(&p.name).expect("planned tools exist");
                        if let Some((id, name, input)) = &heads[i] {
                            emit(&|| PipelineEvent::CallStarted {
                                index: p.index,
                                id: Arc::clone(id),
                                name: Arc::clone(name),
                                input: Arc::clone(input),
                                speculative: false,
                            });
                        }
                        let tctx = ToolContext {
                            session_id: memory.id().to_string(),
                            workspace: workspace.to_path_buf(),
                            call_id: p.id.clone(),
                            index: p.index,
                            config: Arc::clone(config),
                            services: memory.clone(),
                            grant: *grant,
                        };
                        tool.spec.run(p.input.clone(), &tctx).await
                    }
                }
            }
        });
        let outcomes = futures::future::join_all(runs).await;
        for (&i, outcome) in batch.indices.iter().zip(outcomes) {
            let p = &planned[i];
            let f = finish_call(
                FinishContext {
                    index: i,
                    id: &p.id,
                    name: &p.name,
                    external: None,
                    final_view: true,
                },
                outcome,
                &config.output,
                Some(Overflow {
                    store: memory.overflow(),
                    session: memory.id(),
                }),
            );
            guard.record(i, f.failed);
            if let Some((id, name, _)) = &heads[i] {
                emit(&|| PipelineEvent::CallFinished {
                    index: i,
                    id: Arc::clone(id),
                    name: Arc::clone(name),
                    is_error: f.result.is_error,
                    duration_ms: 0,
                });
            }
            results.push(f.result);
        }
    }
    // As in the pipeline, the results go to the host inside `round_complete`.
    match host {
        Some(tx) => {
            let _ = tx.send(PipelineEvent::RoundComplete {
                stop_reason: stop,
                text: String::new(),
                results,
            });
            Vec::new()
        }
        None => results,
    }
}

/// The pipeline on this thread (`execution.workers = 0`): the configuration and registry of
/// [`config`] and [`registry`] over `dir`, a dispatcher on `system`, and one session in `dir`.
pub fn one_thread_pipeline(
    dir: &std::path::Path,
    system: &actix_rt::SystemRunner,
) -> (Arc<Config>, Arc<Registry>, toolslot_actors::Dispatcher, String) {
    let config = config(&dir.join("overflow"), 0);
    let registry = registry(&config);
    let dispatcher = system.block_on(async { toolslot_actors::Dispatcher::new(Arc::clone(&config), Arc::clone(&registry)) });
    let session = dispatcher.open_session(toolslot_actors::SessionOptions {
        workspace: Some(dir.to_path_buf()),
        ..Default::default()
    });
    (config, registry, dispatcher, session)
}

/// Times `iters` rounds of `body` through the actor pipeline (session `session` of
/// `dispatcher`), each read to its `round_complete`, which must hold `calls` results.
pub async fn actor_rounds(dispatcher: &toolslot_actors::Dispatcher, session: &str, body: &[u8], calls: usize, iters: u64) -> Duration {
    let start = std::time::Instant::now();
    for _ in 0..iters {
        let input = toolslot_actors::RoundInput::Bytes(Box::pin(futures::stream::iter([Ok(body.to_vec())])));
        let mut rx = dispatcher.submit_round(session, input).unwrap();
        let mut n = 0;
        while let Some(e) = rx.recv().await {
            if let PipelineEvent::RoundComplete { results, .. } = e {
                n = results.len();
            }
        }
        assert_eq!(n, calls);
    }
    start.elapsed()
}
