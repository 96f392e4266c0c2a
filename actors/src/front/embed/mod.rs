//! The pipeline embedded in another program's process, driven from threads that are not the
//! runtime's: the front end the Python package (`python/`) stands on.
//!
//! The CLI and the server run inside an actix system; a host written in another language
//! calls from its own threads, which cannot. [`Embedded`] starts one runtime thread that holds
//! the [`Dispatcher`] and the toolset, and answers commands sent to it; what a round yields
//! comes back on a crossbeam channel ([`Submission`]), which the caller waits on with whatever
//! lock of its own (Python's GIL) released.
//!
//! Tools the host writes itself ([`HostToolDef`]) join the same registry as the built-ins and
//! are governed exactly like them (validation, approval, loop guard, truncation, one result
//! per call); only their body runs in the host, which is asked through the submission's
//! channel ([`Item::Call`]) and answers with [`HostCall::finish`].
//!
//! # Example
//!
//! ```no_run
//! use toolslot_actors::front::embed::{Embedded, Item, OpenOptions};
//!
//! let slot = Embedded::start(toolslot::config::Config::builtin(), Vec::new()).unwrap();
//! let session = slot.open_session(OpenOptions::default()).unwrap();
//! let round = slot.submit(&session, None).unwrap();
//! round.push(std::fs::read("response.sse").unwrap());
//! round.finish();
//! while let Some(item) = round.next() {
//!     if let Item::Event(event) = item {
//!         println!("{}", serde_json::to_string(&event).unwrap());
//!     }
//! }
//! ```

mod host_tool;
mod runtime;
mod wake;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};
use toolslot::config::Config;
use toolslot::event::PipelineEvent;
use toolslot::registry::CatalogFormat;
use toolslot::stream::Dialect;

pub use host_tool::{HostCall, HostToolDef};
pub use wake::WakePipe;

use crate::host::dispatcher::Dispatcher;
use crate::pipeline::stages::approval::HostDecision;
use runtime::Command;
use wake::CallPort;

/// Why an embedded call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// The configuration, a policy or an option is unusable.
    #[error("{0}")]
    Config(String),
    /// A session, round or approval the dispatcher refused (unknown session, a round already
    /// running, nothing waiting).
    #[error("{0}")]
    Dispatch(String),
    /// The runtime thread is gone (closed, or it failed).
    #[error("the toolslot runtime has stopped{0}")]
    Stopped(String),
}

/// A session's options, as the host gives them.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Workspace root for file tools (default: the current folder).
    pub workspace: Option<PathBuf>,
    /// `read-only`, `ask`, `auto-edit` or `full-auto` (default: the config's).
    pub approval_mode: Option<String>,
    /// The dialect of the session's streams (default: detected per round).
    pub dialect: Option<Dialect>,
}

/// What a submission yields, in order.
#[derive(Debug)]
pub enum Item {
    /// A pipeline event, as docs/CONTRACT.md describes it.
    Event(PipelineEvent),
    /// A host tool must run: run it and answer with [`HostCall::finish`].
    Call(HostCall),
}

/// The pipeline embedded in this process: one runtime thread, its dispatcher and toolset.
///
/// Dropping it stops the runtime (its sessions are closed and its MCP servers stopped)
/// without waiting; [`Embedded::close`] waits.
pub struct Embedded {
    commands: tokio::sync::mpsc::UnboundedSender<Command>,
    calls: Receiver<HostCall>,
    port: CallPort,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    config: Arc<Config>,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded").finish_non_exhaustive()
    }
}

impl Embedded {
    /// Starts the runtime thread with `config`: builds the toolset (MCP servers, extensions,
    /// built-ins) and adds `tools`, then waits until it is ready.
    ///
    /// # Errors
    /// [`EmbedError::Config`] when the toolset does not build (a required MCP server that
    /// does not start) or a host tool is refused; [`EmbedError::Stopped`] when the thread
    /// cannot start.
    pub fn start(config: Config, tools: Vec<HostToolDef>) -> Result<Embedded, EmbedError> {
        let config = Arc::new(config);
        let (call_sender, calls) = crossbeam_channel::unbounded();
        let port = CallPort::new(call_sender);
        let (commands, thread) = runtime::spawn(Arc::clone(&config), tools, port.clone())?;
        Ok(Embedded {
            commands,
            calls,
            port,
            thread: Mutex::new(Some(thread)),
            config,
        })
    }

    /// The configuration the runtime runs with.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    fn ask<T: Send + 'static>(&self, command: impl FnOnce(Sender<T>) -> Command) -> Result<T, EmbedError> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.commands.send(command(tx)).map_err(|_| stopped())?;
        rx.recv().map_err(|_| stopped())
    }

    /// Opens a session; its policy is loaded now, so one that does not load (or forbids the
    /// mode) is refused here rather than on every call.
    ///
    /// # Errors
    /// [`EmbedError::Config`] for a workspace that is not a folder, an unknown mode or a
    /// policy that does not load.
    pub fn open_session(&self, options: OpenOptions) -> Result<String, EmbedError> {
        let options = runtime::session_options(&self.config, options)?;
        self.ask(|reply| Command::Open { options, reply })
    }

    /// Starts a round of `session`: push the provider's raw bytes into the returned
    /// [`Submission`] as they arrive, [`Submission::finish`] at the end, and read its items.
    ///
    /// # Errors
    /// [`EmbedError::Dispatch`] for an unknown session or one already running a round.
    pub fn submit(&self, session: &str, dialect: Option<Dialect>) -> Result<Submission, EmbedError> {
        let (chunks, chunk_rx) = tokio::sync::mpsc::unbounded_channel();
        let (events_tx, events) = crossbeam_channel::unbounded();
        let wake = WakePipe::new().map_err(|e| EmbedError::Stopped(format!(": no pipe for a round: {e}")))?;
        self.port.watch(&wake);
        self.ask(|reply| Command::Submit {
            session: session.to_string(),
            dialect,
            chunks: chunk_rx,
            events: events_tx,
            wake: Arc::clone(&wake),
            reply,
        })??;
        Ok(Submission {
            chunks: Mutex::new(Some(chunks)),
            events,
            calls: self.calls.clone(),
            wake,
        })
    }

    /// Answers approval request `request` (the `approval_required` event's) about call `index`
    /// of `session`.
    ///
    /// # Errors
    /// [`EmbedError::Dispatch`] when nothing waits for that answer.
    pub fn answer(&self, session: &str, index: usize, request: Option<u64>, decision: HostDecision) -> Result<(), EmbedError> {
        self.ask(|reply| Command::Answer {
            session: session.to_string(),
            index,
            request,
            decision,
            reply,
        })?
    }

    /// Cancels `session`'s running round, for a host that stopped reading it: waiting approvals
    /// end as rejections, running calls stop with a `cancelled` result, and the round still
    /// completes, so its items can be drained.
    ///
    /// # Errors
    /// [`EmbedError::Dispatch`] for an unknown session.
    pub fn cancel_round(&self, session: &str) -> Result<(), EmbedError> {
        self.dispatcher()?
            .cancel_round(session)
            .map_err(|e| EmbedError::Dispatch(e.to_string()))
    }

    /// The catalog in `format`: the session's (what its model sees now) or, without one, the
    /// registry's, as a JSON array.
    ///
    /// # Errors
    /// [`EmbedError::Dispatch`] for an unknown session.
    pub fn catalog(&self, session: Option<&str>, format: CatalogFormat) -> Result<String, EmbedError> {
        self.ask(|reply| Command::Catalog {
            session: session.map(str::to_string),
            format,
            reply,
        })?
    }

    /// Every tool's metadata (capabilities, the approval they derive, parallel safety), sorted by
    /// name, as JSON: what a framework adapter needs to know which calls will ask.
    ///
    /// # Errors
    /// [`EmbedError::Stopped`] once the runtime stopped.
    pub fn metadata(&self) -> Result<String, EmbedError> {
        self.ask(|reply| Command::Metadata { reply })
    }

    /// Adds host tools to the registry: sessions see them from their next round on (with a
    /// `tools_added` notice).
    ///
    /// # Errors
    /// [`EmbedError::Config`] naming the tools the registry refused (a taken name, a bad
    /// schema).
    pub fn add_tools(&self, tools: Vec<HostToolDef>) -> Result<(), EmbedError> {
        let port = self.port.clone();
        self.ask(|reply| Command::AddTools { tools, port, reply })?
    }

    /// Closes a session: a running round is cancelled, its ledger sealed.
    ///
    /// # Errors
    /// [`EmbedError::Dispatch`] for an unknown session.
    pub fn close_session(&self, session: &str) -> Result<(), EmbedError> {
        self.ask(|reply| Command::Close {
            session: session.to_string(),
            reply,
        })?
    }

    /// Stops the runtime and waits for it: every session closed, every MCP server stopped.
    pub fn close(&self) {
        let _ = self.commands.send(Command::Shutdown);
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// The dispatcher, for a host that runs its own actix code beside the embedding (a
    /// benchmark comparing the two); `None` once the runtime stopped.
    ///
    /// # Errors
    /// [`EmbedError::Stopped`] once the runtime stopped.
    pub fn dispatcher(&self) -> Result<Arc<Dispatcher>, EmbedError> {
        self.ask(|reply| Command::Dispatcher { reply })
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Shutdown);
    }
}

fn stopped() -> EmbedError {
    EmbedError::Stopped(String::new())
}

/// Where a round's bytes go: the session's input, until the host says the response ended.
type ChunkSender = tokio::sync::mpsc::UnboundedSender<Result<Vec<u8>, std::io::Error>>;

/// A round in flight: the provider's bytes go in, events and host tool calls come out.
pub struct Submission {
    chunks: Mutex<Option<ChunkSender>>,
    events: Receiver<PipelineEvent>,
    calls: Receiver<HostCall>,
    wake: Arc<WakePipe>,
}

impl std::fmt::Debug for Submission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Submission").finish_non_exhaustive()
    }
}

impl Submission {
    /// Hands the pipeline the next bytes of the provider's response (any chunking).
    /// Bytes pushed after [`Submission::finish`] are ignored.
    pub fn push(&self, bytes: Vec<u8>) {
        if let Some(tx) = self.chunks.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = tx.send(Ok(bytes));
        }
    }

    /// Ends the response with a read error (the host's stream failed): the pipeline reports it
    /// as a `stream_error` and completes the round.
    pub fn fail(&self, reason: String) {
        if let Some(tx) = self.chunks.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(Err(std::io::Error::other(reason)));
        }
    }

    /// The pipe that gets a byte whenever this round may have something to read (an event,
    /// a host tool call, its end): an event loop watches it instead of waiting on a thread.
    pub fn wake_pipe(&self) -> &WakePipe {
        &self.wake
    }

    /// The response has ended.
    pub fn finish(&self) {
        self.chunks.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// The next item, waiting for it; `None` after the last `round_complete`.
    pub fn next(&self) -> Option<Item> {
        crossbeam_channel::select_biased! {
            recv(self.calls) -> call => call.ok().map(Item::Call).or_else(|| self.events.recv().ok().map(Item::Event)),
            recv(self.events) -> event => event.ok().map(Item::Event),
        }
    }

    /// The next item if one is ready (`Ok(None)`), without waiting; `Err(())` after the last.
    ///
    /// # Errors
    /// `Err(())` once the submission has ended and everything was read.
    #[expect(clippy::result_unit_err, reason = "the end is the only way it fails")]
    pub fn try_next(&self) -> Result<Option<Item>, ()> {
        if let Ok(call) = self.calls.try_recv() {
            return Ok(Some(Item::Call(call)));
        }
        match self.events.try_recv() {
            Ok(event) => Ok(Some(Item::Event(event))),
            Err(crossbeam_channel::TryRecvError::Empty) => Ok(None),
            Err(crossbeam_channel::TryRecvError::Disconnected) => Err(()),
        }
    }

    /// As [`Submission::next`], giving up after `timeout` (`Ok(None)`).
    ///
    /// # Errors
    /// `Err(())` once the submission has ended and everything was read.
    #[expect(clippy::result_unit_err, reason = "the end is the only way it fails")]
    pub fn next_timeout(&self, timeout: std::time::Duration) -> Result<Option<Item>, ()> {
        crossbeam_channel::select_biased! {
            recv(self.calls) -> call => Ok(call.ok().map(Item::Call)),
            recv(self.events) -> event => event.map(|e| Some(Item::Event(e))).map_err(|_| ()),
            default(timeout) => Ok(None),
        }
    }
}

#[cfg(test)]
#[path = "embed_tests.rs"]
mod tests;
