"""toolslot for Python: an LLM agent's tool calls governed inside a Python agent service.

The provider's raw streamed response goes in; toolslot assembles the calls, repairs what the
model broke, refuses forgeries, guards against loops, asks for approval, runs the calls
(Python tools too) and hands back exactly one result per call, in the provider's own format.

    slot = toolslot.Slot()
    session = slot.open_session(workspace=".", approval_mode="ask")
    async for event in session.submit(raw_sse_bytes):
        ...

See docs/CONTRACT.md ("Python") for the whole API.
"""

from ._events import (
    ApprovalDecided,
    ApprovalExpired,
    ApprovalRequired,
    CallAssembled,
    CallFinished,
    CallStarted,
    Event,
    InputAnswered,
    InputRequired,
    InputRewritten,
    Notice,
    Progress,
    RoundComplete,
    Subagent,
    ToolResult,
    event_from_dict,
    event_from_json,
)
from ._native import ConfigError, ForkError, InternalError, SessionError, StoppedError, ToolslotError
from ._slot import PythonTool, Session, Slot

__all__ = [
    "Slot",
    "Session",
    "PythonTool",
    "Event",
    "Notice",
    "CallAssembled",
    "CallStarted",
    "ApprovalRequired",
    "ApprovalDecided",
    "ApprovalExpired",
    "InputRewritten",
    "CallFinished",
    "Progress",
    "InputRequired",
    "InputAnswered",
    "Subagent",
    "ToolResult",
    "RoundComplete",
    "event_from_dict",
    "event_from_json",
    "ToolslotError",
    "ConfigError",
    "SessionError",
    "StoppedError",
    "ForkError",
    "InternalError",
]
