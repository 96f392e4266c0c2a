//! The normalized stream event every provider dialect decodes into.

pub use crate::event::StopReason;

/// One decoded step of a model's streamed response.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A new message (round) begins.
    MessageStart,
    /// Assistant text.
    Text(String),
    /// A client tool call begins. `slot` identifies it within the message for the dialect.
    CallStart {
        /// The dialect's key for the call within the message.
        slot: usize,
        /// The provider's call id ("" when the provider gives none).
        id: String,
        /// The tool name as the model wrote it.
        name: String,
        /// Gemini's thought signature, which must be sent back with the call.
        thought_signature: Option<String>,
    },
    /// A fragment of a call's argument text.
    CallArgs {
        /// The call.
        slot: usize,
        /// The fragment.
        fragment: String,
    },
    /// A call's whole argument text, given at once (used when no fragments arrived).
    CallArgsFull {
        /// The call.
        slot: usize,
        /// The complete arguments.
        arguments: String,
    },
    /// A call's block ended: its arguments are complete.
    CallEnd {
        /// The call.
        slot: usize,
    },
    /// The model's stop reason.
    Stop(StopReason),
    /// The message ended.
    MessageEnd,
    /// The provider reported an error, or a frame could not be decoded.
    Error(String),
}
