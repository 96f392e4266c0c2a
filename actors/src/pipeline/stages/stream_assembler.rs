//! The StreamAssembler stage, head of the chain: a submission's bytes (or decoded events) in;
//! complete calls and round ends out, to the planner's mailbox.
//!
//! The stage reads the submission's stream itself, in its own context: chunks that are already
//! there are fed at once, and it waits (without blocking the thread) only when the stream
//! does. A chunk whose stream is known to end with it is fed and finished in one step, so the
//! calls of a message that ends in the same chunk reach the planner together with the end.

use std::sync::Arc;

use actix::prelude::*;
use futures::{FutureExt, StreamExt};
use toolslot::notice::{Notice, NoticeKind};
use toolslot::stream::{Assembler, AssemblyEvent, RoundEnd, StopReason};

use crate::pipeline::chain::{Assembled, ByteStream, RoundInput, RoundNo, Submit};
use crate::pipeline::session::{SessionShared, Stage};
use crate::pipeline::stage::guarded;

/// Owns the session's assembler state machine and reads the running submission's stream.
pub struct StreamAssemblerActor {
    shared: Arc<SessionShared>,
    planner: Recipient<Assembled>,
    assembler: Assembler,
    /// The round the next calls belong to.
    round: RoundNo,
    /// Calls of the current round sent to the planner so far.
    reported: usize,
}

/// A stream being read: the next item when it was read ahead of its turn.
struct Reading {
    stream: ByteStream,
    ahead: Option<Option<Result<Vec<u8>, std::io::Error>>>,
}

impl StreamAssemblerActor {
    /// A stage for `shared`'s session, forwarding to `planner`.
    pub fn new(shared: Arc<SessionShared>, planner: Recipient<Assembled>) -> Self {
        let assembler = Assembler::new(shared.dialect);
        Self {
            shared,
            planner,
            assembler,
            round: RoundNo(0),
            reported: 0,
        }
    }

    /// Feeds what the stream has ready; hands the stream to the context when it must wait.
    fn pump(&mut self, mut reading: Reading, ctx: &mut Context<Self>) {
        loop {
            let item = match reading.ahead.take() {
                Some(item) => item,
                None => match reading.stream.next().now_or_never() {
                    Some(item) => item,
                    None => return self.wait_for(reading, ctx),
                },
            };
            match item {
                Some(Ok(chunk)) => {
                    // When the stream already knows it has ended (an in-memory body, an HTTP
                    // body whose end came with its last bytes), the chunk and the end are one
                    // step; a chunk that is already there is read ahead for the next turn.
                    let last = match reading.stream.next().now_or_never() {
                        Some(None) => true,
                        Some(next) => {
                            reading.ahead = Some(next);
                            false
                        }
                        None => false,
                    };
                    let fed = self.step(ctx, last, |a, out| {
                        a.feed(&chunk, out);
                        if last {
                            a.finish(out);
                        }
                    });
                    if !fed || last {
                        return;
                    }
                }
                Some(Err(e)) => {
                    self.shared
                        .notice(Notice::new(NoticeKind::StreamError, format!("reading the stream failed: {e}")));
                    self.step(ctx, true, |a, out| a.finish(out));
                    return;
                }
                None => {
                    self.step(ctx, true, |a, out| a.finish(out));
                    return;
                }
            }
        }
    }

    fn wait_for(&mut self, mut reading: Reading, ctx: &mut Context<Self>) {
        let next = async move {
            let item = reading.stream.next().await;
            reading.ahead = Some(item);
            reading
        };
        ctx.spawn(next.into_actor(self).map(|reading, act, ctx| act.pump(reading, ctx)));
    }

    /// Runs one step of the assembler inside the panic boundary and forwards what it produced;
    /// `closes`: the stream is over with this step. Returns false when the stage failed (the
    /// submission has then been ended).
    fn step(&mut self, ctx: &mut Context<Self>, closes: bool, body: impl FnOnce(&mut Assembler, &mut Vec<AssemblyEvent>)) -> bool {
        let mut out = Vec::new();
        let assembler = &mut self.assembler;
        let shared = &self.shared;
        let done = guarded::<Self, _>(Stage::StreamAssembler, shared, ctx, || {
            shared.trip(Stage::StreamAssembler);
            body(assembler, &mut out);
        });
        match done {
            Ok(()) => {
                self.forward(out, closes);
                if closes {
                    self.assembler = Assembler::new(self.shared.dialect);
                }
                true
            }
            Err(_) => {
                self.failed();
                false
            }
        }
    }

    /// Sends the planner one message per round the events touch; when the stream is over,
    /// the last one says so (or a message of its own, when the events end nothing).
    fn forward(&mut self, events: Vec<AssemblyEvent>, closes: bool) {
        let mut calls = Vec::new();
        // The last message is held back one step, so that the stream's end rides on it.
        let mut pending: Option<Assembled> = None;
        for ev in events {
            match ev {
                AssemblyEvent::Notice(n) => self.shared.notice(n),
                AssemblyEvent::CallReady(call) => {
                    calls.push(call);
                    self.reported += 1;
                }
                AssemblyEvent::RoundEnd(end) => {
                    if let Some(m) = pending.take() {
                        self.planner.do_send(m);
                    }
                    pending = Some(Assembled {
                        round: self.round,
                        calls: std::mem::take(&mut calls),
                        end: Some(end),
                        closes: false,
                    });
                    self.round.0 += 1;
                    self.reported = 0;
                }
            }
        }
        if !calls.is_empty() {
            if let Some(m) = pending.take() {
                self.planner.do_send(m);
            }
            pending = Some(Assembled {
                round: self.round,
                calls,
                end: None,
                closes: false,
            });
        }
        match pending {
            Some(mut m) => {
                m.closes = closes;
                self.planner.do_send(m);
            }
            None if closes => self.planner.do_send(Assembled {
                round: self.round,
                calls: Vec::new(),
                end: None,
                closes: true,
            }),
            None => {}
        }
    }

    /// The assembler failed mid-stream: what follows cannot be decoded from the middle, so
    /// the round ends with the calls that were complete, and the submission with it.
    fn failed(&mut self) {
        self.shared.notice(Notice::new(
            NoticeKind::StreamError,
            "the stream assembler failed; the round ends with the calls that were complete",
        ));
        self.planner.do_send(Assembled {
            round: self.round,
            calls: Vec::new(),
            end: Some(RoundEnd {
                text: String::new(),
                stop_reason: StopReason::Other,
                unfinished: Vec::new(),
                call_count: self.reported,
                errors: Vec::new(),
            }),
            closes: true,
        });
        self.round.0 += 1;
        self.reported = 0;
    }
}

impl Actor for StreamAssemblerActor {
    type Context = Context<Self>;
}

impl Supervised for StreamAssemblerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The half-read stream died with the old context; the next submission starts clean.
        self.assembler = Assembler::new(self.shared.dialect);
    }
}

impl Handler<Submit> for StreamAssemblerActor {
    type Result = ();
    fn handle(&mut self, msg: Submit, ctx: &mut Context<Self>) {
        let span = crate::pipeline::stage::span!("submission", session = %self.shared.id);
        let _entered = span.enter();
        self.assembler = Assembler::new(msg.dialect.or(self.shared.dialect));
        match msg.input {
            RoundInput::Events(events) => {
                self.step(ctx, true, |a, out| {
                    a.push_events(events, out);
                    a.finish(out);
                });
            }
            RoundInput::Bytes(stream) => self.pump(Reading { stream, ahead: None }, ctx),
        }
    }
}
