//! The round driver: moves one submission through the five stages and guarantees exactly one
//! result per call, in index order, whatever fails.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::Addr;
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use futures::{FutureExt, Stream, StreamExt};
use toolslot::event::{ApprovalDecision, PipelineEvent, ToolResult};
use toolslot::notice::{Notice, NoticeKind};
use toolslot::output::{FinishContext, finish_call};
use toolslot::plan::approval::Gate;
use toolslot::plan::batches::plan_batches;
use toolslot::plan::loop_guard::paused_error;
use toolslot::plan::{Action, PlannedCall, RepairMark, parses_strictly};
use toolslot::registry::Registry;
use toolslot::stream::{AssemblyEvent, RawCall, RoundEnd, StopReason, StreamEvent};
use toolslot::tool::{ErrorCategory, ToolError};
use tracing::Instrument;

use crate::approval::{ApprovalActor, Decide};
use crate::batch_executor::{BatchExecutorActor, ExecCall, Outcome, RunBatch, Speculate};
use crate::planner::{Plan, PlannerActor};
use crate::post_processor::{PostItem, PostProcessorActor, Process};
use crate::session::SessionShared;
use crate::stream_assembler::{Feed, FeedEvents, Finish, StreamAssemblerActor};

/// A session's five stages.
#[derive(Clone)]
pub struct Stages {
    /// StreamAssembler.
    pub assembler: Addr<StreamAssemblerActor>,
    /// Planner.
    pub planner: Addr<PlannerActor>,
    /// Approval.
    pub approval: Addr<ApprovalActor>,
    /// BatchExecutor.
    pub executor: Addr<BatchExecutorActor>,
    /// PostProcessor.
    pub post: Addr<PostProcessorActor>,
}

/// What a host submits as a round.
pub enum RoundInput {
    /// The provider's raw SSE bytes, as they arrive.
    Bytes(std::pin::Pin<Box<dyn Stream<Item = Result<Vec<u8>, std::io::Error>> + Send>>),
    /// Events the host already decoded.
    Events(Vec<StreamEvent>),
}

#[derive(Default)]
struct RoundState {
    ready: BTreeMap<usize, RawCall>,
    planned: Vec<PlannedCall>,
    next: usize,
    /// Every call so far may start early: a later call may only start early while this holds,
    /// so nothing runs ahead of an earlier call that must wait.
    leading_batch_open: bool,
    /// Calls started early, yielding their outcomes in index order.
    early: FuturesOrdered<BoxFuture<'static, Outcome>>,
    /// Results already handed back (calls started early and post-processed).
    done: BTreeMap<usize, ToolResult>,
    paused: bool,
}

impl RoundState {
    fn new() -> Self {
        Self {
            leading_batch_open: true,
            ..Self::default()
        }
    }
}

enum Step {
    Early(Outcome),
    Chunk(Option<Result<Vec<u8>, std::io::Error>>),
}

/// Runs one submission (which may hold several rounds) to its end, in `dialect` when given
/// (otherwise the session's).
pub async fn run_submission(stages: Stages, shared: Arc<SessionShared>, input: RoundInput, dialect: Option<toolslot::stream::Dialect>) {
    let span = tracing::info_span!("submission", session = %shared.id);
    async move {
        // Tools added since the last submission become visible now, never mid-round.
        shared.memory.refresh();
        for notice in shared.memory.take_session_notices() {
            shared.emit(PipelineEvent::Notice(notice));
        }
        let added = shared.memory.take_added();
        if !added.is_empty() {
            shared.emit(PipelineEvent::Notice(Notice::new(
                NoticeKind::ToolsAdded,
                format!("tools appended to the catalog: {}", added.join(", ")),
            )));
        }
        if let Some(d) = dialect {
            let _ = stages.assembler.send(crate::stream_assembler::SetDialect(d)).await;
        }
        let mut round = RoundState::new();
        let mut rounds_completed = 0usize;
        // A chunk read ahead of its turn (see below).
        let mut ahead: Option<Option<Result<Vec<u8>, std::io::Error>>> = None;
        match input {
            RoundInput::Events(events) => {
                let out = stages.assembler.send(FeedEvents(events)).await;
                let mut events = flatten(&shared, out);
                events.extend(flatten(&shared, stages.assembler.send(Finish).await));
                handle(&stages, &shared, &mut round, events, &mut rounds_completed).await;
            }
            RoundInput::Bytes(mut bytes) => loop {
                // A call started early is post-processed the moment it (and every call before
                // it) is done, while the stream goes on: the host sees it finish early.
                let step = if let Some(next) = ahead.take() {
                    Step::Chunk(next)
                } else {
                    let early = async {
                        match round.early.next().await {
                            Some(o) => o,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        biased;
                        o = early => Step::Early(o),
                        c = bytes.next() => Step::Chunk(c),
                    }
                };
                let chunk = match step {
                    Step::Early(outcome) => {
                        let outcomes = ready_early(&mut round, outcome);
                        post_early(&stages, &shared, &mut round, outcomes).await;
                        continue;
                    }
                    Step::Chunk(c) => c,
                };
                // When the stream already knows it has ended (an in-memory body, an HTTP body
                // whose end came with its last bytes), the last chunk and the end go in one
                // message; a chunk that is already there waits for the next turn.
                let (chunk, last) = match chunk {
                    Some(Ok(c)) => match bytes.next().now_or_never() {
                        Some(None) => (Some(Ok(c)), true),
                        Some(next) => {
                            ahead = Some(next);
                            (Some(Ok(c)), false)
                        }
                        None => (Some(Ok(c)), false),
                    },
                    other => (other, false),
                };
                let (events, done) = match chunk {
                    Some(Ok(chunk)) => match stages.assembler.send(Feed { bytes: chunk, last }).await {
                        Ok(Ok(events)) => (events, last),
                        // The assembler died mid-stream: what follows cannot be decoded from
                        // the middle, so the round ends with what was complete.
                        _ => (assembler_failed(&stages, &shared).await, true),
                    },
                    Some(Err(e)) => {
                        shared.notice(Notice::new(NoticeKind::StreamError, format!("reading the stream failed: {e}")));
                        (flatten(&shared, stages.assembler.send(Finish).await), true)
                    }
                    None => (flatten(&shared, stages.assembler.send(Finish).await), true),
                };
                handle(&stages, &shared, &mut round, events, &mut rounds_completed).await;
                if done {
                    break;
                }
            },
        }
        if rounds_completed == 0 {
            // Every submission ends with a round_complete, even when the stage that should
            // have produced it failed.
            let end = RoundEnd {
                text: String::new(),
                stop_reason: StopReason::Other,
                unfinished: Vec::new(),
                call_count: round.next.max(round.ready.len()),
                errors: Vec::new(),
            };
            complete_round(&stages, &shared, &mut round, end).await;
        }
    }
    .instrument(span)
    .await
}

async fn assembler_failed(stages: &Stages, shared: &SessionShared) -> Vec<AssemblyEvent> {
    shared.notice(Notice::new(
        NoticeKind::StreamError,
        "the stream assembler failed; the round ends with the calls that were complete",
    ));
    let _ = stages.assembler.send(Finish).await;
    vec![AssemblyEvent::RoundEnd(RoundEnd {
        text: String::new(),
        stop_reason: StopReason::Other,
        unfinished: Vec::new(),
        call_count: 0,
        errors: Vec::new(),
    })]
}

fn flatten<E>(shared: &SessionShared, r: Result<Result<Vec<AssemblyEvent>, crate::stage::StageError>, E>) -> Vec<AssemblyEvent> {
    match r {
        Ok(Ok(events)) => events,
        _ => {
            shared.notice(Notice::new(NoticeKind::StreamError, "the stream assembler failed"));
            Vec::new()
        }
    }
}

/// Takes the events of one chunk. Calls that became ready are planned together once the
/// chunk's events are in, not one by one: one planner message for the run, and, when the
/// message ended in the same chunk, no early start at all (the calls go out as the round's
/// first batch, together, instead of an early batch and a late one).
async fn handle(stages: &Stages, shared: &Arc<SessionShared>, round: &mut RoundState, events: Vec<AssemblyEvent>, completed: &mut usize) {
    let mut unplanned = false;
    for ev in events {
        match ev {
            AssemblyEvent::Notice(n) => shared.notice(n),
            AssemblyEvent::CallReady(call) => {
                round.ready.insert(call.index, call);
                unplanned = true;
            }
            AssemblyEvent::RoundEnd(mut end) => {
                for call in std::mem::take(&mut end.unfinished) {
                    round.ready.insert(call.index, call);
                }
                end.call_count = end.call_count.max(round.next + round.ready.len());
                complete_round(stages, shared, round, end).await;
                *completed += 1;
                *round = RoundState::new();
                unplanned = false;
            }
        }
    }
    if unplanned {
        plan_ready(stages, shared, round, None).await;
    }
}

/// Plans ready calls in index order. Before the round ends (`stop` is `None`) only calls whose
/// arguments parse strictly are planned: whether the others may be repaired depends on the
/// stop reason, which is not known yet.
async fn plan_ready(stages: &Stages, shared: &Arc<SessionShared>, round: &mut RoundState, stop: Option<StopReason>) {
    let registry = shared.memory.registry();
    loop {
        // The run of consecutive calls that can be planned now, planned in one message.
        let mut calls = Vec::new();
        while let Some(call) = round.ready.get(&(round.next + calls.len())) {
            if stop.is_none() && !parses_strictly(&call.arguments) {
                break;
            }
            let index = call.index;
            if let Some(call) = round.ready.remove(&index) {
                calls.push(call);
            }
        }
        if calls.is_empty() {
            return;
        }
        let cut = stop == Some(StopReason::MaxTokens);
        let span = tracing::debug_span!("plan", first = round.next, calls = calls.len());
        // Only what a failure result needs is kept back; the calls themselves move.
        let heads: Vec<(usize, String, String)> = calls.iter().map(|c| (c.index, c.id.clone(), c.name.clone())).collect();
        let planned_all = match stages.planner.send(Plan { calls, cut }).instrument(span).await {
            Ok(Ok(p)) if p.len() == heads.len() => p,
            _ => heads.iter().map(planner_failed).collect(),
        };
        let mut to_start = Vec::new();
        for planned in planned_all {
            for n in &planned.notices {
                shared.notice(n.clone());
            }
            shared.emit(PipelineEvent::CallAssembled {
                index: planned.index,
                id: planned.id.clone(),
                name: planned.called.clone(),
                input: planned.input.clone(),
                repair: planned.repair,
                thought_signature: planned.thought_signature.clone(),
            });
            let early = matches!(planned.action, Action::Run { speculative: true, .. }) && stop.is_none() && round.leading_batch_open;
            match exec_call(&registry, &planned) {
                Some(exec) if early => to_start.push(exec),
                _ => round.leading_batch_open = false,
            }
            round.planned.push(planned);
            round.next += 1;
        }
        if to_start.is_empty() {
            continue;
        }
        let names: Vec<(usize, String)> = to_start.iter().map(|c| (c.index, c.name.clone())).collect();
        match stages.executor.send(Speculate(to_start)).await {
            Ok(Ok(receivers)) => {
                for (rx, (index, name)) in receivers.into_iter().zip(names) {
                    round.early.push_back(
                        rx.map(move |r| {
                            r.unwrap_or_else(|_| Outcome {
                                index,
                                result: Err(ToolError::tool(format!(
                                    "`{name}` was started early and its task was lost; its outcome is unknown."
                                ))),
                                duration_ms: 0,
                            })
                        })
                        .boxed(),
                    );
                }
            }
            // Nothing started: these calls run with the round's first batch instead.
            _ => round.leading_batch_open = false,
        }
    }
}

fn planner_failed((index, id, name): &(usize, String, String)) -> PlannedCall {
    PlannedCall {
        index: *index,
        id: id.clone(),
        called: name.clone(),
        name: name.clone(),
        input: serde_json::json!({}),
        repair: RepairMark::None,
        notices: Vec::new(),
        thought_signature: None,
        trace: Default::default(),
        action: Action::Refuse(ToolError::refused(
            ErrorCategory::Unavailable,
            "Not run: the planner failed on this call and was restarted; nothing was run. You may send the call again.",
        )),
    }
}

/// Post-processes calls that were started early, in index order, in one message.
async fn post_early(stages: &Stages, shared: &Arc<SessionShared>, round: &mut RoundState, outcomes: Vec<Outcome>) {
    let registry = shared.memory.registry();
    let items: Vec<PostItem> = outcomes
        .into_iter()
        .filter_map(|o| round.planned.get_mut(o.index).map(|p| item(&registry, p, o.result, o.duration_ms)))
        .collect();
    post_process(stages, shared, round, items).await;
}

/// Post-processes one batch's items (in index order) and files their results. When the
/// post-processor fails the results are still handed back, from what is known, so no call
/// goes without one.
async fn post_process(stages: &Stages, shared: &Arc<SessionShared>, round: &mut RoundState, items: Vec<PostItem>) {
    let indices: Vec<usize> = items.iter().map(|i| i.index).collect();
    match stages.post.send(Process(items)).await {
        Ok(Ok(processed)) => {
            round.paused |= processed.paused;
            for r in processed.results {
                round.done.insert(r.index, r);
            }
        }
        _ => {
            for i in indices {
                let r = lost_result(shared, &round.planned[i]);
                round.done.insert(i, r);
            }
        }
    }
}

/// The outcomes of early calls that are already in, after `first`, without waiting.
fn ready_early(round: &mut RoundState, first: Outcome) -> Vec<Outcome> {
    let mut all = vec![first];
    while let Some(Some(o)) = round.early.next().now_or_never() {
        all.push(o);
    }
    all
}

/// The result of a call whose post-processing failed: handed back from what is known.
fn lost_result(shared: &SessionShared, p: &PlannedCall) -> ToolResult {
    let err = ToolError::tool(format!(
        "`{}` ran, but its result was lost when the post-processor failed. Its outcome is unknown; check before retrying.",
        p.name
    ));
    let f = finish_call(
        FinishContext {
            index: p.index,
            id: &p.id,
            name: &p.name,
            external: None,
            final_view: false,
        },
        Err(err),
        &shared.config.output,
        None,
    );
    shared.emit(PipelineEvent::CallFinished {
        index: p.index,
        id: p.id.clone(),
        name: p.name.clone(),
        is_error: true,
        duration_ms: 0,
    });
    f.result
}

fn exec_call(registry: &Registry, planned: &PlannedCall) -> Option<ExecCall> {
    let tool = registry.get(&planned.name)?;
    let parallel = matches!(planned.action, Action::Run { parallel_safe: true, .. });
    let grant = match planned.action {
        Action::Run { grant, .. } => grant,
        Action::Refuse(_) => Default::default(),
    };
    Some(ExecCall {
        index: planned.index,
        id: planned.id.clone(),
        name: planned.name.clone(),
        input: planned.input.clone(),
        tool: Arc::clone(&tool.spec),
        parallel,
        grant,
    })
}

/// The content of a tool comes from outside when its metadata says so (an MCP server, an
/// extension program, the network).
fn external_source(registry: &Registry, name: &str) -> Option<String> {
    registry.get(name)?.meta.external.then(|| name.to_string())
}

async fn complete_round(stages: &Stages, shared: &Arc<SessionShared>, round: &mut RoundState, end: RoundEnd) {
    let span = tracing::info_span!("round", session = %shared.id, calls = end.call_count);
    async {
        // Plan what is ready; an index the assembler never reported (a failed stage) still
        // gets a result, and does not stop the calls after it from being planned.
        loop {
            plan_ready(stages, shared, round, Some(end.stop_reason)).await;
            if round.ready.is_empty() && round.planned.len() >= end.call_count {
                break;
            }
            let index = round.next;
            round.planned.push(PlannedCall {
                index,
                id: format!("call_{index}"),
                called: String::new(),
                name: String::new(),
                input: serde_json::json!({}),
                repair: RepairMark::None,
                notices: Vec::new(),
                thought_signature: None,
                trace: Default::default(),
                action: Action::Refuse(ToolError::refused(
                    ErrorCategory::Unavailable,
                    "Not run: this call was lost when a pipeline stage failed. Send it again.",
                )),
            });
            round.next += 1;
        }
        if end.stop_reason == StopReason::MaxTokens && end.call_count > 0 {
            shared.notice(Notice::new(
                NoticeKind::RoundTruncated,
                "the model's output was cut at its limit; calls with incomplete arguments were not run",
            ));
        }
        // Calls started early finish before the rest run, in index order.
        let mut outcomes = Vec::new();
        while let Some(outcome) = round.early.next().await {
            outcomes.push(outcome);
        }
        if !outcomes.is_empty() {
            post_early(stages, shared, round, outcomes).await;
        }
        let results = execute_planned(stages, shared, round).await;
        shared.emit(PipelineEvent::RoundComplete {
            stop_reason: end.stop_reason,
            text: end.text,
            results,
        });
    }
    .instrument(span)
    .await
}

/// Approval, batches, post-processing: one result per planned call, by index.
async fn execute_planned(stages: &Stages, shared: &Arc<SessionShared>, round: &mut RoundState) -> Vec<ToolResult> {
    let registry = shared.memory.registry();
    // Approval, in index order. A call started early never needs approval (it is Auto).
    for planned in round.planned.iter_mut() {
        let Action::Run {
            gate: Gate::Ask(requirement),
            approval_key,
            ..
        } = &planned.action
        else {
            continue;
        };
        let ask = Decide {
            index: planned.index,
            id: planned.id.clone(),
            name: planned.name.clone(),
            input: planned.input.clone(),
            requirement: *requirement,
            approval_key: approval_key.clone(),
        };
        match stages.approval.send(ask).await {
            Ok(Ok(ApprovalDecision::Approved | ApprovalDecision::ApprovedForSession | ApprovalDecision::CachedApproval)) => {}
            Ok(Ok(ApprovalDecision::Rejected | ApprovalDecision::CachedRejection)) => {
                planned.action = Action::Refuse(ToolError::refused(
                    ErrorCategory::NotApproved,
                    format!(
                        "Not approved: the user did not approve `{}`; nothing was run. Do not retry it unchanged; ask the user or do something else.",
                        planned.name
                    ),
                ));
            }
            _ => {
                planned.action = Action::Refuse(ToolError::refused(
                    ErrorCategory::NotApproved,
                    "Not approved: the approval stage failed, so nothing was run.",
                ));
            }
        }
    }
    // Refusals run nothing, so they never split a concurrent batch.
    let order: Vec<(usize, bool)> = round
        .planned
        .iter()
        .filter(|p| !round.done.contains_key(&p.index))
        .map(|p| (p.index, !matches!(p.action, Action::Run { parallel_safe: false, .. })))
        .collect();
    for batch in plan_batches(&order) {
        let mut items: Vec<PostItem> = Vec::with_capacity(batch.indices.len());
        let mut exec = Vec::new();
        for &i in &batch.indices {
            let p = &mut round.planned[i];
            let refusal = match &p.action {
                Action::Refuse(e) => Some(e.clone()),
                Action::Run { .. } if round.paused || shared.closed.load(std::sync::atomic::Ordering::SeqCst) => Some(paused_error()),
                Action::Run { .. } => None,
            };
            match refusal {
                Some(e) => items.push(item(&registry, p, Err(e), 0)),
                None => match exec_call(&registry, p) {
                    Some(call) => exec.push(call),
                    None => {
                        let e = ToolError::refused(ErrorCategory::UnknownTool, format!("Unknown tool `{}`.", p.name));
                        items.push(item(&registry, p, Err(e), 0))
                    }
                },
            }
        }
        if !exec.is_empty() {
            let names: Vec<(usize, String)> = exec.iter().map(|c| (c.index, c.name.clone())).collect();
            let span = tracing::info_span!("batch", calls = exec.len(), concurrent = batch.concurrent);
            let outcomes = stages
                .executor
                .send(RunBatch {
                    calls: exec,
                    concurrent: batch.concurrent,
                })
                .instrument(span)
                .await;
            let outcomes: Vec<Outcome> = match outcomes {
                Ok(Ok(o)) => o,
                _ => names
                    .iter()
                    .map(|(index, name)| Outcome {
                        index: *index,
                        result: Err(ToolError::tool(format!(
                            "`{name}` could not be run to the end: the executor failed and was restarted. Its outcome is unknown; check before retrying."
                        ))),
                        duration_ms: 0,
                    })
                    .collect(),
            };
            for o in outcomes {
                let p = &mut round.planned[o.index];
                items.push(item(&registry, p, o.result, o.duration_ms));
            }
        }
        items.sort_by_key(|i| i.index);
        post_process(stages, shared, round, items).await;
    }
    (0..round.planned.len())
        .map(|i| {
            round.done.remove(&i).unwrap_or_else(|| {
                let p = &round.planned[i];
                ToolResult {
                    index: i,
                    tool_use_id: p.id.clone(),
                    name: p.name.clone(),
                    is_error: true,
                    content: "No result was produced for this call; it may not have run.".into(),
                }
            })
        })
        .collect()
}

/// The post-processing item of a finished call. The call's arguments move into it: nothing
/// reads them after the call has finished.
fn item(registry: &Registry, p: &mut PlannedCall, result: Result<toolslot::tool::ToolOutput, ToolError>, duration_ms: u64) -> PostItem {
    PostItem {
        index: p.index,
        id: p.id.clone(),
        name: p.name.clone(),
        input: std::mem::take(&mut p.input),
        external: if result.is_ok() { external_source(registry, &p.name) } else { None },
        result,
        duration_ms,
    }
}
