//! Why a Dispatcher call was refused: one variant per reason a host can act on.

/// Why a Dispatcher call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// No open session has that id.
    #[error("no open session `{0}`")]
    UnknownSession(String),
    /// The session is already running a round.
    #[error("session `{0}` is already running a round")]
    RoundRunning(String),
    /// No approval waits for that call.
    #[error("no approval is waiting for call {index} in session `{session}`")]
    NotWaiting {
        /// The session.
        session: String,
        /// The call.
        index: usize,
    },
    /// The answer did not name its question, and more than one question of the session has
    /// asked about that call index.
    #[error("session `{session}`: {reason}")]
    NeedsRequest {
        /// The session.
        session: String,
        /// What the approval stage said.
        reason: String,
    },
    /// The session's stages are gone (the system is shutting down).
    #[error("session `{0}` is shutting down")]
    Gone(String),
    /// Too many sessions are open.
    #[error("too many open sessions ({0}); close one first")]
    TooManySessions(usize),
    /// No input request with that number waits.
    #[error("no input request {n} is waiting in session `{session}`")]
    InputNotWaiting {
        /// The session.
        session: String,
        /// The request's number.
        n: u64,
    },
    /// An answer that does not match what the server asked for.
    #[error("{0}")]
    BadInput(String),
    /// A durable session another dispatcher holds (its lease has not run out), or lost to one.
    #[error("{0}")]
    LeasedElsewhere(String),
    /// A durable session whose recorded workspace this dispatcher may not use (outside its
    /// `server.workspace_root`, or gone): it is not taken over.
    #[error("{0}")]
    WorkspaceRefused(String),
    /// The session store (NATS) did not answer.
    #[error("{0}")]
    Store(String),
}
