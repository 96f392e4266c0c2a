//! The assembler: normalized events in, complete calls and finished rounds out.
//!
//! It buffers each call's argument fragments (calls may interleave), never shows raw argument
//! text as assistant text, and reports a call the moment its block ends, so the pipeline can
//! start it while the model is still speaking. A recording holding several messages back to
//! back yields one round per message.

use super::dialect::{Decoder, Dialect, decoder_for, detect};
use super::event::{StopReason, StreamEvent};
use super::sse::{SseEvent, SseParser};
use crate::forgery::ForgeryStripper;
use crate::notice::{Notice, NoticeKind};

/// A tool call as the model sent it: arguments still raw text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCall {
    /// Position of the call in the response, from 0.
    pub index: usize,
    /// The provider's call id (a positional `call_<index>` when the provider gave none).
    pub id: String,
    /// The tool name as written.
    pub name: String,
    /// The argument text, as assembled from fragments.
    pub arguments: String,
    /// Gemini's thought signature, to be sent back with the call.
    pub thought_signature: Option<String>,
    /// Whether the call's block ended (false: the stream stopped inside it).
    pub complete: bool,
    /// The assistant's text before the call began (forged calls stripped): what led to it, for
    /// a host deciding on its approval.
    pub text_before: String,
}

/// A finished round.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundEnd {
    /// The assistant's text, forged calls stripped.
    pub text: String,
    /// The normalized stop reason.
    pub stop_reason: StopReason,
    /// Calls whose block never ended (their arguments may be cut).
    pub unfinished: Vec<RawCall>,
    /// How many calls the round had in all.
    pub call_count: usize,
    /// Provider errors and undecodable frames seen in the round.
    pub errors: Vec<String>,
}

/// What the assembler reports.
#[derive(Debug, Clone, PartialEq)]
pub enum AssemblyEvent {
    /// A call's arguments are complete.
    CallReady(RawCall),
    /// Something the host should know (stream errors, forged calls).
    Notice(Notice),
    /// The round ended.
    RoundEnd(RoundEnd),
}

#[derive(Debug)]
struct CallBuf {
    call: RawCall,
    full: Option<String>,
}

#[derive(Debug, Default)]
struct Round {
    calls: Vec<CallBuf>,
    /// Slot → position in `calls` of the newest call with that slot whose block is open, so
    /// a fragment finds its call without a scan (a message may hold thousands of calls).
    open: std::collections::BTreeMap<usize, usize>,
    text: String,
    stripper: ForgeryStripper,
    stop: Option<StopReason>,
    errors: Vec<String>,
    active: bool,
}

/// Assembles one session's stream, round after round.
pub struct Assembler {
    parser: SseParser,
    decoder: Option<Box<dyn Decoder>>,
    /// Events seen before the dialect was known (auto-detection).
    pending: Vec<SseEvent>,
    round: Round,
    rounds_ended: usize,
    sse: Vec<SseEvent>,
    events: Vec<StreamEvent>,
}

impl std::fmt::Debug for Assembler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembler")
            .field("rounds_ended", &self.rounds_ended)
            .finish_non_exhaustive()
    }
}

impl Assembler {
    /// An assembler for `dialect`, or detecting it from the first events when `None`.
    pub fn new(dialect: Option<Dialect>) -> Self {
        Self {
            parser: SseParser::new(),
            decoder: dialect.map(decoder_for),
            pending: Vec::new(),
            round: Round::default(),
            rounds_ended: 0,
            sse: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Feeds raw SSE bytes; appends what they completed to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<AssemblyEvent>) {
        let mut sse = std::mem::take(&mut self.sse);
        self.parser.feed_into(bytes, &mut sse);
        for ev in sse.drain(..) {
            self.decode(ev, out);
        }
        self.sse = sse;
    }

    /// Feeds events a host already parsed.
    pub fn push_events(&mut self, events: impl IntoIterator<Item = StreamEvent>, out: &mut Vec<AssemblyEvent>) {
        for ev in events {
            self.apply(ev, out);
        }
    }

    /// Ends the stream: flushes the parser and decoder and ends the open round. A stream
    /// that held no round at all still yields one (empty) round, so every submission ends
    /// with a `RoundEnd`.
    pub fn finish(&mut self, out: &mut Vec<AssemblyEvent>) {
        for ev in self.parser.finish() {
            self.decode(ev, out);
        }
        if self.decoder.is_none() && !self.pending.is_empty() {
            self.round
                .errors
                .push("could not tell the stream's dialect from its events; pass --dialect".into());
            out.push(AssemblyEvent::Notice(Notice::new(
                NoticeKind::StreamError,
                "could not tell the stream's dialect from its events; pass --dialect",
            )));
            self.pending.clear();
        }
        let mut events = std::mem::take(&mut self.events);
        if let Some(decoder) = self.decoder.as_mut() {
            decoder.finish(&mut events);
        }
        for ev in events.drain(..) {
            self.apply(ev, out);
        }
        self.events = events;
        if self.round.active || self.rounds_ended == 0 || !self.round.calls.is_empty() {
            self.end_round(out);
        }
    }

    fn decode(&mut self, ev: SseEvent, out: &mut Vec<AssemblyEvent>) {
        if self.decoder.is_none() {
            match detect(&ev) {
                Some(dialect) => {
                    self.decoder = Some(decoder_for(dialect));
                    let pending = std::mem::take(&mut self.pending);
                    for p in pending {
                        self.decode(p, out);
                    }
                }
                None => {
                    self.pending.push(ev);
                    return;
                }
            }
        }
        let mut events = std::mem::take(&mut self.events);
        if let Some(decoder) = self.decoder.as_mut() {
            decoder.decode(&ev, &mut events);
        }
        for e in events.drain(..) {
            self.apply(e, out);
        }
        self.events = events;
    }

    fn apply(&mut self, ev: StreamEvent, out: &mut Vec<AssemblyEvent>) {
        match ev {
            StreamEvent::MessageStart => {
                if self.round.active && (self.round.stop.is_some() || !self.round.calls.is_empty() || !self.round.text.is_empty()) {
                    self.end_round(out);
                }
                self.round.active = true;
            }
            StreamEvent::Text(t) => {
                self.round.active = true;
                let kept = self.round.stripper.push(&t);
                self.round.text.push_str(&kept);
            }
            StreamEvent::CallStart {
                slot,
                id,
                name,
                thought_signature,
            } => {
                self.round.active = true;
                let index = self.round.calls.len();
                let id = if id.is_empty() { format!("call_{index}") } else { id };
                self.round.open.insert(slot, index);
                self.round.calls.push(CallBuf {
                    call: RawCall {
                        index,
                        id,
                        name,
                        arguments: String::new(),
                        thought_signature,
                        complete: false,
                        text_before: self.round.text.clone(),
                    },
                    full: None,
                });
            }
            StreamEvent::CallArgs { slot, fragment } => {
                if let Some(c) = self.open_call(slot) {
                    c.call.arguments.push_str(&fragment);
                }
            }
            StreamEvent::CallArgsFull { slot, arguments } => {
                if let Some(c) = self.open_call(slot) {
                    c.full = Some(arguments);
                }
            }
            StreamEvent::CallEnd { slot } => {
                let ended = self.round.open.remove(&slot);
                if let Some(c) = ended.and_then(|i| self.round.calls.get_mut(i)) {
                    if let Some(full) = c.full.take()
                        && !full.is_empty()
                    {
                        // The provider's final word on the arguments wins over the fragments.
                        c.call.arguments = full;
                    }
                    c.call.complete = true;
                    out.push(AssemblyEvent::CallReady(c.call.clone()));
                }
            }
            StreamEvent::Stop(reason) => self.round.stop = Some(reason),
            StreamEvent::MessageEnd => self.end_round(out),
            StreamEvent::Error(message) => {
                tracing::warn!(%message, "stream error");
                out.push(AssemblyEvent::Notice(Notice::new(NoticeKind::StreamError, message.clone())));
                self.round.errors.push(message);
            }
        }
    }

    fn open_call(&mut self, slot: usize) -> Option<&mut CallBuf> {
        let i = *self.round.open.get(&slot)?;
        self.round.calls.get_mut(i)
    }

    fn end_round(&mut self, out: &mut Vec<AssemblyEvent>) {
        let mut round = std::mem::take(&mut self.round);
        round.text.push_str(&round.stripper.finish());
        let forged = round.stripper.found();
        if forged > 0 {
            out.push(AssemblyEvent::Notice(Notice::new(
                NoticeKind::ForgedCallStripped,
                format!("{forged} tool call(s) written as text were removed from the reply and not run"),
            )));
        }
        let call_count = round.calls.len();
        let unfinished = round
            .calls
            .into_iter()
            .filter(|c| !c.call.complete)
            .map(|mut c| {
                if c.call.arguments.is_empty()
                    && let Some(full) = c.full
                {
                    c.call.arguments = full;
                }
                c.call
            })
            .collect();
        let stop_reason = round.stop.unwrap_or(StopReason::Other);
        out.push(AssemblyEvent::RoundEnd(RoundEnd {
            text: round.text,
            stop_reason,
            unfinished,
            call_count,
            errors: round.errors,
        }));
        self.rounds_ended += 1;
    }
}

#[cfg(test)]
#[path = "assembler_tests.rs"]
mod tests;
