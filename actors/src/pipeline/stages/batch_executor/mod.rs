//! The BatchExecutor stage: runs calls under the session's read/write gate, with timeouts,
//! cancellation and panic containment per call, and hands each outcome on to the
//! post-processor.
//!
//! Calls the planner started early run at once; the rest of a round waits for its end, then
//! for the early calls, and runs batch by batch. Work is ordered by a lane: each piece of work
//! (an early group, a round's batches) waits for the piece before it, so a later round never
//! runs ahead of an earlier one, and outcomes are counted in index order. A piece that
//! finishes on its first poll (tools that do not wait) runs inside the handler; one that waits
//! runs as a task of its own, so a restart of this stage never abandons a running call.
//!
//! When a call ends, its effects on the session are recorded here, before the next batch
//! starts: the observers (what it read, for edit freshness) and the loop guard (which may pause
//! the session). Extension point: [`execute`] is where a call runs; running it elsewhere (a
//! remote executor) changes that function only.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Context as TaskContext;
use std::time::Instant;

use actix::prelude::*;
use futures::FutureExt;
use futures::future::{Either, Shared};
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::sync::{RwLock, oneshot};
use toolslot::notice::Notice;
use toolslot::observe::{FileReadObserver, ResultObserver};
use toolslot::output::counts_as_failure;
use toolslot::plan::Action;
use toolslot::plan::batches::{Batch, plan_batches};
use toolslot::plan::loop_guard::paused_error;
use toolslot::registry::Registry;
use toolslot::tool::{ErrorCategory, ToolError};

use crate::pipeline::chain::{Outcomes, Planned, PostItem, RoundClose, RoundNo, Speculate, Ticket};
use crate::pipeline::session::{SessionShared, Stage};
use crate::pipeline::stage::guarded;

mod execute;
mod spans;
use execute::{Launch, execute, grant_of, refuse};

tokio::task_local! {
    /// The session whose tool is running on this task (its `SessionShared`'s address, which is
    /// unique while the session lives): a tool that calls tools of its own session
    /// (re-entrancy) skips the gate instead of waiting on itself.
    static IN_TOOL: usize;
}

/// Done when a piece of work has been handed on whole.
type Baton = Shared<oneshot::Receiver<()>>;

/// What a piece of work needs, shared by all of a session's work.
struct Lane {
    shared: Arc<SessionShared>,
    post: Recipient<Outcomes>,
    gate: Arc<RwLock<()>>,
    observers: Vec<Box<dyn ResultObserver>>,
    /// The session's registry generation (see [`Held`]).
    registry: std::sync::Mutex<Arc<Held>>,
    /// The span of the round whose calls run now, shared by its early calls and its batches.
    round_span: std::sync::Mutex<Option<(u64, tracing::Span)>>,
}

/// A registry generation held through a reference count of the session's own: work clones
/// this one, not the registry's, which every session on every thread shares (a cache line all
/// cores would write twice per round).
struct Held(Arc<Registry>);

impl std::ops::Deref for Held {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.0
    }
}

/// Runs the session's calls.
pub struct BatchExecutorActor {
    lane: Arc<Lane>,
    /// This round's calls that wait for its end (approved or refused), in index order.
    queued: Vec<Ticket>,
    /// Done when everything scheduled so far has been handed on.
    tail: Option<Baton>,
    /// Done when every round whose end was scheduled has been handed on.
    rounds_done: Option<Baton>,
}

impl BatchExecutorActor {
    /// A stage for `shared`'s session, forwarding to `post`.
    pub fn new(shared: Arc<SessionShared>, post: Recipient<Outcomes>) -> Self {
        Self {
            lane: Arc::new(Lane {
                registry: std::sync::Mutex::new(Arc::new(Held(shared.memory.registry()))),
                shared,
                post,
                gate: Arc::new(RwLock::new(())),
                observers: vec![Box::new(FileReadObserver)],
                round_span: std::sync::Mutex::new(None),
            }),
            queued: Vec::new(),
            tail: None,
            rounds_done: None,
        }
    }

    /// Puts `work` at the end of the lane.
    fn schedule(&mut self, work: impl Future<Output = ()> + 'static) -> Option<Baton> {
        let baton = run_or_spawn(work);
        self.tail = baton.clone();
        baton
    }

    /// The stage failed on a message: its calls (and this round's queued ones) are answered
    /// with a clear error, in the lane's order, and the round's end goes on behind them.
    fn failed(&mut self, round: RoundNo, calls: Vec<Ticket>, end: Option<RoundClose>, closes: bool) {
        let calls: Vec<Ticket> = std::mem::take(&mut self.queued).into_iter().chain(calls).collect();
        let lane = Arc::clone(&self.lane);
        let after = self.tail.take();
        let ends = end.is_some() || closes;
        let baton = self.schedule(async move {
            wait(after).await;
            let outcomes = calls
                .into_iter()
                .map(|t| match t.action {
                    // A refusal keeps its own reason: it was never going to run.
                    Action::Refuse(e) => PostItem::not_run(t.head, e),
                    Action::Run { .. } => {
                        let e = ToolError::refused(
                            ErrorCategory::Unavailable,
                            format!(
                                "Not run: the executor failed and was restarted before `{}` started; nothing was run. You may send the call again.",
                                t.head.name
                            ),
                        );
                        PostItem::not_run(t.head, e)
                    }
                })
                .collect();
            lane.hand_on(round, outcomes, end, closes);
        });
        if ends {
            self.rounds_done = baton;
        }
    }
}

/// Polls `work` once; if it is not done, it goes on as a task of its own, and the returned
/// baton says when it is.
fn run_or_spawn(work: impl Future<Output = ()> + 'static) -> Option<Baton> {
    let mut work = Box::pin(work);
    let mut cx = TaskContext::from_waker(futures::task::noop_waker_ref());
    if work.as_mut().poll(&mut cx).is_ready() {
        return None;
    }
    let (tx, rx) = oneshot::channel();
    actix::spawn(async move {
        work.await;
        let _ = tx.send(());
    });
    Some(rx.shared())
}

async fn wait(baton: Option<Baton>) {
    if let Some(b) = baton {
        // A dropped sender means the work ended without saying so (it cannot: its calls are
        // contained); either way it is over.
        let _ = b.await;
    }
}

impl Lane {
    /// The registry generation the session's catalog is on now.
    fn registry(&self) -> Arc<Held> {
        let mut held = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        if !self.shared.memory.with_catalog(|c| Arc::ptr_eq(c.registry(), &held.0)) {
            *held = Arc::new(Held(self.shared.memory.registry()));
        }
        Arc::clone(&held)
    }

    /// The round's span: made by whichever of its early calls and its batches comes first.
    fn round_span(&self, round: RoundNo) -> tracing::Span {
        let mut held = self.round_span.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((n, span)) = held.as_ref()
            && *n == round.0
        {
            return span.clone();
        }
        let span = spans::round(&self.shared, round);
        *held = Some((round.0, span.clone()));
        span
    }

    /// The round's calls have all run: its span ends when the last work holding it does.
    fn round_over(&self, round: RoundNo) {
        let mut held = self.round_span.lock().unwrap_or_else(|p| p.into_inner());
        if held.as_ref().is_some_and(|(n, _)| *n == round.0) {
            *held = None;
        }
    }

    /// Records how calls ended (observers, loop guard), in index order, and sends them on.
    fn hand_on(&self, round: RoundNo, mut items: Vec<PostItem>, end: Option<RoundClose>, closes: bool) {
        for item in &mut items {
            item.guard = self.count(item);
            spans::guarded(&item.span, &item.guard);
        }
        self.post.do_send(Outcomes { round, items, end, closes });
    }

    /// A call's effects on the session: what it read, and whether it failed.
    fn count(&self, o: &PostItem) -> (Vec<Notice>, Option<String>) {
        let shared = &self.shared;
        let counted = std::panic::catch_unwind(AssertUnwindSafe(|| {
            if o.result.as_ref().is_ok_and(|out| !out.is_error) {
                for observer in &self.observers {
                    observer.observe(&o.head.name, &o.head.input, &shared.workspace, shared.services.as_ref());
                }
                // A file just read is likely edited next: its language server starts now.
                shared.lsp.warm_up(&o.head.name, &o.head.input);
            }
            shared.guard().record(o.head.index, counts_as_failure(&o.result))
        }));
        counted.unwrap_or_else(|_| {
            // The result still goes on; only the bookkeeping of this one call is missing.
            tracing::error!(session = %shared.id, index = o.head.index, "recording a call's outcome failed");
            (Vec::new(), None)
        })
    }
}

/// Calls started before the stream ended: they run at once (once every earlier round has been
/// handed on), and their outcomes go on in index order, each as soon as it and every call
/// before it are done, after the group before this one.
async fn early(lane: Arc<Lane>, round: RoundNo, calls: Vec<Ticket>, start_after: Option<Baton>, mut prev: Option<Baton>) {
    wait(start_after).await;
    let registry = lane.registry();
    // Early calls are parallel-safe: the group shares the gate, once.
    let mut slot = Some(take_gate(&lane, true).await);
    let started = Instant::now();
    let lane = &lane;
    let span = lane.round_span(round);
    let group = async {
        let mut running: FuturesOrdered<_> = calls
            .into_iter()
            .map(|t| {
                execute(
                    lane,
                    &registry,
                    t.head,
                    grant_of(&t.action),
                    t.trace,
                    Launch {
                        round,
                        started,
                        speculative: true,
                    },
                )
            })
            .collect();
        let mut held = Vec::new();
        loop {
            let next = match prev.as_mut() {
                Some(before) => tokio::select! {
                    biased;
                    _ = before => {
                        prev = None;
                        None
                    }
                    o = running.next() => Some(o),
                },
                None => Some(running.next().await),
            };
            match next {
                Some(Some(o)) => {
                    held.push(o);
                    while let Some(Some(o)) = running.next().now_or_never() {
                        held.push(o);
                    }
                }
                Some(None) => wait(prev.take()).await,
                None => {}
            }
            if running.is_empty() {
                slot = None;
            }
            if prev.is_none() {
                if !held.is_empty() {
                    lane.hand_on(round, std::mem::take(&mut held), None, false);
                }
                if running.is_empty() {
                    return;
                }
            }
        }
    };
    traced(span, as_tools(lane, group)).await;
}

/// A round's calls that waited for its end: batch by batch, each batch's outcomes recorded
/// and handed on before the next starts; the round's end goes with the last batch.
async fn round_calls(
    lane: Arc<Lane>,
    round: RoundNo,
    tickets: Vec<Ticket>,
    batches: Vec<Batch>,
    end: Option<RoundClose>,
    closes: bool,
    after: Option<Baton>,
) {
    // A round without calls (the end of a body after its last call) is no span of its own.
    let span = if tickets.is_empty() {
        tracing::Span::none()
    } else {
        lane.round_span(round)
    };
    let over = Arc::clone(&lane);
    traced(span, round_calls_inner(lane, round, tickets, batches, end, closes, after)).await;
    over.round_over(round);
}

async fn round_calls_inner(
    lane: Arc<Lane>,
    round: RoundNo,
    tickets: Vec<Ticket>,
    batches: Vec<Batch>,
    mut end: Option<RoundClose>,
    closes: bool,
    after: Option<Baton>,
) {
    wait(after).await;
    let registry = lane.registry();
    let mut slots: Vec<Option<Ticket>> = tickets.into_iter().map(Some).collect();
    let count = batches.len();
    for (k, batch) in batches.into_iter().enumerate() {
        // A session paused (or closed) by an earlier batch runs nothing more.
        let paused = lane.shared.guard().is_paused() || lane.shared.closed.load(std::sync::atomic::Ordering::SeqCst);
        let tickets: Vec<Ticket> = batch
            .indices
            .iter()
            .filter_map(|&pos| slots.get_mut(pos).and_then(Option::take))
            .collect();
        let runs_any = !paused && tickets.iter().any(|t| matches!(t.action, Action::Run { .. }));
        // Parallel-safe calls share the gate; anything else has it alone (a serial batch is
        // one call).
        let _slot = if runs_any {
            Some(take_gate(&lane, batch.concurrent).await)
        } else {
            None
        };
        // The batch's calls start together: one reading of the clock for all of them.
        let started = Instant::now();
        let runs = tickets.into_iter().map(|t| match t.action {
            Action::Refuse(e) => Either::Left(refuse(&lane, t.head, t.trace, e)),
            Action::Run { .. } if paused => Either::Left(refuse(&lane, t.head, t.trace, paused_error())),
            Action::Run { grant, .. } => Either::Right(execute(
                &lane,
                &registry,
                t.head,
                grant,
                t.trace,
                Launch {
                    round,
                    started,
                    speculative: false,
                },
            )),
        });
        // Started in index order, outcomes in index order whatever the completion order;
        // join_all keeps the futures in one vector (no task per call).
        let batch_run = as_tools(&lane, futures::future::join_all(runs));
        let span =
            crate::pipeline::stage::span!("batch", session = %lane.shared.id, calls = batch.indices.len(), concurrent = batch.concurrent);
        let outcomes = traced(span, batch_run).await;
        let last = k + 1 == count;
        lane.hand_on(round, outcomes, if last { end.take() } else { None }, last && closes);
    }
    if count == 0 {
        lane.hand_on(round, Vec::new(), end, closes);
    }
}

/// Takes the session's gate: shared for parallel-safe calls, alone otherwise. Work started by
/// a tool of this session (re-entrancy) skips it instead of waiting on itself.
async fn take_gate(lane: &Lane, parallel: bool) -> Slot {
    let me = Arc::as_ptr(&lane.shared) as usize;
    if IN_TOOL.try_with(|s| *s == me).unwrap_or(false) {
        return Slot::Reentrant;
    }
    if parallel {
        Slot::Shared {
            _held: Arc::clone(&lane.gate).read_owned().await,
        }
    } else {
        Slot::Exclusive {
            _held: Arc::clone(&lane.gate).write_owned().await,
        }
    }
}

/// Runs `work` as the session's tools (see `IN_TOOL`).
fn as_tools<F: Future>(lane: &Lane, work: F) -> impl Future<Output = F::Output> {
    IN_TOOL.scope(Arc::as_ptr(&lane.shared) as usize, work)
}

/// `fut` inside `span` (entered on each poll; a disabled span costs a check), the span handed
/// back with the output: a call's span lives on in its outcome, and each clone of a span is a
/// look-up and a close in the subscriber's registry.
async fn in_span<F: Future>(span: tracing::Span, fut: F) -> (F::Output, tracing::Span) {
    let mut fut = std::pin::pin!(fut);
    let out = std::future::poll_fn(|cx| {
        let _entered = span.enter();
        fut.as_mut().poll(cx)
    })
    .await;
    (out, span)
}

/// `fut` inside `span`, which ends with it.
async fn traced<F: Future>(span: tracing::Span, fut: F) -> F::Output {
    in_span(span, fut).await.0
}

/// A held place in the session's gate (released on drop).
enum Slot {
    Reentrant,
    Shared { _held: tokio::sync::OwnedRwLockReadGuard<()> },
    Exclusive { _held: tokio::sync::OwnedRwLockWriteGuard<()> },
}

impl Actor for BatchExecutorActor {
    type Context = Context<Self>;
}

impl Supervised for BatchExecutorActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // Running work is made of tasks of its own and hands its outcomes on directly, so a
        // restart loses none of it; what this stage held was answered when it failed.
    }
}

/// Notes a durable session's planned calls and the response's end in its record.
fn durable_planned(shared: &SessionShared, round: RoundNo, calls: &[Ticket], end: Option<&RoundClose>) {
    let Some(d) = shared.durable.get() else { return };
    for t in calls {
        d.planned(round.0, t.head.index, &t.head.id, &t.head.name);
    }
    if let Some(end) = end {
        d.ended(round.0, end.call_count, end.stop_reason, &end.text);
    }
}

impl Handler<Speculate> for BatchExecutorActor {
    type Result = ();
    fn handle(&mut self, msg: Speculate, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.lane.shared);
        durable_planned(&shared, msg.round, &msg.calls, None);
        if guarded::<Self, _>(Stage::BatchExecutor, &shared, ctx, || shared.trip(Stage::BatchExecutor)).is_err() {
            return self.failed(msg.round, msg.calls, None, false);
        }
        let work = early(
            Arc::clone(&self.lane),
            msg.round,
            msg.calls,
            self.rounds_done.clone(),
            self.tail.take(),
        );
        self.schedule(work);
    }
}

impl Handler<Planned> for BatchExecutorActor {
    type Result = ();
    fn handle(&mut self, mut msg: Planned, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.lane.shared);
        durable_planned(&shared, msg.round, &msg.calls, msg.end.as_ref());
        let ends = msg.end.is_some() || msg.closes;
        let queued = &mut self.queued;
        let batches = guarded::<Self, _>(Stage::BatchExecutor, &shared, ctx, || {
            shared.trip(Stage::BatchExecutor);
            queued.append(&mut msg.calls);
            // Refusals run nothing, so they never split a concurrent batch.
            ends.then(|| {
                let order: Vec<(usize, bool)> = queued
                    .iter()
                    .enumerate()
                    .map(|(pos, t)| (pos, !matches!(t.action, Action::Run { parallel_safe: false, .. })))
                    .collect();
                plan_batches(&order)
            })
        });
        let batches = match batches {
            Ok(b) => b,
            Err(_) => {
                return self.failed(msg.round, msg.calls, msg.end, msg.closes);
            }
        };
        if let Some(batches) = batches {
            let tickets = std::mem::take(&mut self.queued);
            let work = round_calls(
                Arc::clone(&self.lane),
                msg.round,
                tickets,
                batches,
                msg.end,
                msg.closes,
                self.tail.take(),
            );
            self.rounds_done = self.schedule(work);
        }
    }
}
