//! The StreamAssembler stage: provider bytes in, complete calls and finished rounds out.

use std::sync::Arc;

use actix::prelude::*;
use toolslot::stream::{Assembler, AssemblyEvent, StreamEvent};

use crate::session::{SessionShared, Stage};
use crate::stage::{StageError, guarded};

/// Raw bytes of the provider's stream.
#[derive(Message)]
#[rtype(result = "Result<Vec<AssemblyEvent>, StageError>")]
pub struct Feed {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// The stream ends with these bytes: finish it too (one message instead of two, when the
    /// end is known with the last chunk).
    pub last: bool,
}

/// Events a host already decoded.
#[derive(Message)]
#[rtype(result = "Result<Vec<AssemblyEvent>, StageError>")]
pub struct FeedEvents(pub Vec<StreamEvent>);

/// The stream ended; the assembler is reset for the next submission.
#[derive(Message)]
#[rtype(result = "Result<Vec<AssemblyEvent>, StageError>")]
pub struct Finish;

/// The next submission is in this dialect (a per-round override of the session's).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetDialect(pub toolslot::stream::Dialect);

/// Owns the session's assembler state machine.
pub struct StreamAssemblerActor {
    shared: Arc<SessionShared>,
    assembler: Assembler,
}

impl StreamAssemblerActor {
    /// A stage for `shared`'s session.
    pub fn new(shared: Arc<SessionShared>) -> Self {
        let assembler = Assembler::new(shared.dialect);
        Self { shared, assembler }
    }
}

impl Actor for StreamAssemblerActor {
    type Context = Context<Self>;
}

impl Supervised for StreamAssemblerActor {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        // The half-read stream died with the old state; the next submission starts clean.
        self.assembler = Assembler::new(self.shared.dialect);
        self.shared.restarted(Stage::StreamAssembler);
    }
}

impl Handler<Feed> for StreamAssemblerActor {
    type Result = Result<Vec<AssemblyEvent>, StageError>;
    fn handle(&mut self, msg: Feed, ctx: &mut Context<Self>) -> Self::Result {
        let result = guarded::<Self, _>(Stage::StreamAssembler, ctx, || {
            self.shared.trip(Stage::StreamAssembler);
            let mut out = Vec::new();
            self.assembler.feed(&msg.bytes, &mut out);
            if msg.last {
                self.assembler.finish(&mut out);
            }
            out
        });
        if msg.last {
            self.assembler = Assembler::new(self.shared.dialect);
        }
        result
    }
}

impl Handler<FeedEvents> for StreamAssemblerActor {
    type Result = Result<Vec<AssemblyEvent>, StageError>;
    fn handle(&mut self, msg: FeedEvents, ctx: &mut Context<Self>) -> Self::Result {
        guarded::<Self, _>(Stage::StreamAssembler, ctx, || {
            self.shared.trip(Stage::StreamAssembler);
            let mut out = Vec::new();
            self.assembler.push_events(msg.0, &mut out);
            out
        })
    }
}

impl Handler<Finish> for StreamAssemblerActor {
    type Result = Result<Vec<AssemblyEvent>, StageError>;
    fn handle(&mut self, _msg: Finish, ctx: &mut Context<Self>) -> Self::Result {
        let result = guarded::<Self, _>(Stage::StreamAssembler, ctx, || {
            let mut out = Vec::new();
            self.assembler.finish(&mut out);
            out
        });
        self.assembler = Assembler::new(self.shared.dialect);
        result
    }
}

impl Handler<SetDialect> for StreamAssemblerActor {
    type Result = ();
    fn handle(&mut self, msg: SetDialect, _ctx: &mut Context<Self>) {
        self.assembler = Assembler::new(Some(msg.0));
    }
}
