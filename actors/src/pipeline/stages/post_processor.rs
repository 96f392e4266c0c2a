//! The PostProcessor stage, tail of the chain: output economics (truncation, overflow,
//! envelopes), the loop guard's hint, `call_finished`; then each result is filed in the
//! round's [`Ledger`], which completes the round (`round_complete`) when every index has its
//! result, and ends the submission behind its last round.
//!
//! Extension point: [`PostProcessorActor::finish_item`] is where a result is made from an
//! outcome; what else a result should carry goes there (a successful edit waits for its
//! file's diagnostics in [`PostProcessorActor::finish_later`]).

use std::sync::Arc;

use actix::prelude::*;
use toolslot::event::PipelineEvent;
use toolslot::output::{FinishContext, Finished, Overflow, finish_call, needs_truncation};
use toolslot::tool::ToolError;

use crate::pipeline::chain::{CallHead, Outcomes, PostItem, RoundNo};
use crate::pipeline::round_ledger::{Completed, Ledger};
use crate::pipeline::session::{SessionShared, Stage};
use crate::pipeline::stage::guarded;

/// A result finished off the handler: one that had to be cut and saved (on the blocking
/// pool), or an edit that waited for its diagnostics.
#[derive(Message)]
#[rtype(result = "()")]
struct Later {
    round: RoundNo,
    head: CallHead,
    guard: (Vec<toolslot::notice::Notice>, Option<String>),
    duration_ms: u64,
    finished: Result<Finished, String>,
}

/// Finishes results and keeps the ledger.
pub struct PostProcessorActor {
    shared: Arc<SessionShared>,
    ledger: Ledger,
}

impl PostProcessorActor {
    /// A stage for `shared`'s session.
    pub fn new(shared: Arc<SessionShared>) -> Self {
        Self {
            shared,
            ledger: Ledger::default(),
        }
    }

    /// Finishes an item here; returns false, touching nothing, when its output must be cut and
    /// saved first or it waits for diagnostics (see [`PostProcessorActor::finish_later`]).
    fn finish_item(&mut self, round: RoundNo, item: &mut PostItem) -> bool {
        if needs_truncation(&item.result, &self.shared.config.output) || awaits_diagnostics(&self.shared, item) {
            return false;
        }
        // The outcome moves out; the item keeps the call's identity for a failure report.
        let result = std::mem::replace(&mut item.result, Err(ToolError::tool(String::new())));
        let finished = finish(&self.shared, &item.head, item.external, result);
        crate::pipeline::stage::output_cut(&item.span, &finished);
        let guard = std::mem::take(&mut item.guard);
        self.file(round, &item.head, finished, guard, item.duration_ms);
        true
    }

    /// Finishes an item off the handler, so the other sessions on this thread never wait: an
    /// edit first waits (within `lsp.wait_ms`) for the diagnostics of the version it wrote,
    /// and megabytes of output are cut and saved on the blocking pool. The result comes back
    /// as a message.
    fn finish_later(&mut self, round: RoundNo, item: PostItem, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.shared);
        let me = ctx.address();
        let diagnose = awaits_diagnostics(&shared, &item);
        let PostItem {
            head,
            mut result,
            duration_ms,
            external,
            guard,
            span,
        } = item;
        actix::spawn(async move {
            if diagnose
                && let Ok(out) = &mut result
                && let Some(text) = shared.lsp.after_edit(&head.name, &head.input, out).await
            {
                out.content.push_str("\n\n");
                out.content.push_str(&text);
            }
            let finished = if needs_truncation(&result, &shared.config.output) {
                let pool_head = head.clone();
                let pool = Arc::clone(&shared);
                tokio::task::spawn_blocking(move || finish(&pool, &pool_head, external, result))
                    .await
                    .map_err(|e| e.to_string())
            } else {
                Ok(finish(&shared, &head, external, result))
            };
            if let Ok(f) = &finished {
                crate::pipeline::stage::output_cut(&span, f);
            }
            // The call's span ends here, with its result finished.
            drop(span);
            me.do_send(Later {
                round,
                head,
                guard,
                duration_ms,
                finished,
            });
        });
    }

    /// Tells the host how a call ended and files its result.
    fn file(
        &mut self,
        round: RoundNo,
        head: &CallHead,
        mut f: Finished,
        guard: (Vec<toolslot::notice::Notice>, Option<String>),
        duration_ms: u64,
    ) {
        let shared = &self.shared;
        for n in f.notices.drain(..) {
            shared.notice(n);
        }
        let (notices, hint) = guard;
        for n in notices {
            shared.notice(n);
        }
        if let Some(h) = hint {
            f.result.content.push_str("\n\n");
            f.result.content.push_str(&h);
        }
        shared.emit(PipelineEvent::CallFinished {
            index: head.index,
            id: Arc::clone(&head.id),
            name: Arc::clone(&head.name),
            is_error: f.result.is_error,
            duration_ms,
        });
        if let Some(d) = shared.durable.get() {
            // Before the ledger takes it: the ledger refuses a second result, and the record
            // keeps the first one filed too.
            d.finished(round.0, f.result.clone());
            // A background task a call started on a worker stays reachable after a take-over.
            let owner = toolslot::tool::SessionServices::state(&*shared.memory)
                .and_then(|s| s.get_or_default::<toolslot::remote::TaskOwner>().get());
            if owner.is_some() {
                d.task_owner(owner);
            }
        }
        if !self.ledger.file(round, f.result) {
            tracing::error!(session = %shared.id, index = head.index, "a second result for a call was dropped");
        }
    }

    /// The result of a call whose post-processing failed: handed back from what is known.
    fn lost(&mut self, round: RoundNo, head: &CallHead, text: String) {
        let err = ToolError::tool(text);
        let f = finish_call(
            FinishContext {
                index: head.index,
                id: &head.id,
                name: &head.name,
                external: None,
                final_view: false,
            },
            Err(err),
            &self.shared.config.output,
            None,
        );
        self.file(round, head, f, (Vec::new(), None), 0);
    }

    /// Hands the host every round that completed, in order, and ends the submission behind
    /// its last.
    fn complete(&mut self) {
        for done in self.ledger.take_completed() {
            match done {
                Completed::Round {
                    round,
                    stop_reason,
                    text,
                    results,
                } => {
                    // Recorded before the host hears of it: a host that asks for the last
                    // round once it saw `round_complete` finds this one.
                    self.shared.round_completed(round.0, stop_reason, &text, &results);
                    self.shared.emit(PipelineEvent::RoundComplete {
                        stop_reason,
                        text,
                        results,
                    })
                }
                Completed::Submission => self.shared.submission_finished(),
            }
        }
    }
}

/// Whether the item is a successful edit of a file a configured language server handles: its
/// result carries that file's diagnostics.
fn awaits_diagnostics(shared: &SessionShared, item: &PostItem) -> bool {
    item.result.as_ref().is_ok_and(|o| !o.is_error) && shared.lsp.handles(&item.head.name, &item.head.input)
}

/// Output economics for one outcome (see [`finish_call`]).
fn finish(shared: &SessionShared, head: &CallHead, external: bool, result: Result<toolslot::tool::ToolOutput, ToolError>) -> Finished {
    let fctx = FinishContext {
        index: head.index,
        id: &head.id,
        name: &head.name,
        external: external.then_some(&*head.name),
        // A poll of a running task is cut like any output, never saved as the whole of it.
        final_view: result.as_ref().map_or(true, |o| !o.partial),
    };
    let overflow = Overflow {
        store: shared.memory.overflow(),
        session: &shared.id,
    };
    finish_call(fctx, result, &shared.config.output, Some(overflow))
}

impl Actor for PostProcessorActor {
    type Context = Context<Self>;
}

impl Supervised for PostProcessorActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The ledger is kept: the rounds it holds complete with the results still to come
        // (results finished on the blocking pool arrive as messages, which a restart keeps).
    }
}

impl Handler<Outcomes> for PostProcessorActor {
    type Result = ();
    fn handle(&mut self, msg: Outcomes, ctx: &mut Context<Self>) {
        let shared = Arc::clone(&self.shared);
        let Outcomes {
            round,
            mut items,
            end,
            closes,
        } = msg;
        // The end first: the round's book is then made at its size, and the round still
        // completes only below, once the results are in.
        if let Some(end) = end {
            self.ledger.end_round(round, end);
        }
        let mut heavy = Vec::new();
        let done = guarded::<Self, _>(Stage::PostProcessor, &shared, ctx, || {
            shared.trip(Stage::PostProcessor);
            for (pos, item) in items.iter_mut().enumerate() {
                if !self.finish_item(round, item) {
                    heavy.push(pos);
                }
            }
        });
        if done.is_ok() {
            if !heavy.is_empty() {
                let mut heavy = heavy.into_iter().peekable();
                for (pos, item) in items.into_iter().enumerate() {
                    if heavy.next_if_eq(&pos).is_some() {
                        self.finish_later(round, item, ctx);
                    }
                }
            }
        } else {
            // Every call of the message without a result gets one, from what is known.
            for item in &items {
                if !self.ledger.has(round, item.head.index) {
                    let text = format!(
                        "`{}` ran, but its result was lost when the post-processor failed. Its outcome is unknown; check before retrying.",
                        item.head.name
                    );
                    self.lost(round, &item.head, text);
                }
            }
        }
        if closes {
            self.ledger.end_submission();
        }
        self.complete();
    }
}

impl Handler<Later> for PostProcessorActor {
    type Result = ();
    fn handle(&mut self, msg: Later, _ctx: &mut Context<Self>) {
        match msg.finished {
            Ok(f) => self.file(msg.round, &msg.head, f, msg.guard, msg.duration_ms),
            Err(e) => {
                tracing::error!(session = %self.shared.id, tool = %msg.head.name, error = %e, "finishing a large output failed");
                let text = format!(
                    "`{}` ran, but its output could not be prepared (post-processing failed: {e}); it is lost. Run it again if you need it.",
                    msg.head.name
                );
                self.lost(msg.round, &msg.head, text);
            }
        }
        self.complete();
    }
}
