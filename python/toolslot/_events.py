"""Typed pipeline events: one class per ``type`` of docs/CONTRACT.md's event table.

Each event keeps the exact object toolslot sent, so ``to_dict()`` is the contract's JSON
whatever fields a later version adds; the attributes are that object's fields. An event is
read (its JSON parsed) the first time one of its fields is asked for: a host that only looks
at some events pays for those alone.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Dict, List, Optional, Tuple

from . import _native

__all__ = [
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
]

Names = Tuple[Tuple[int, str, str], ...]


class Event:
    """A pipeline event. ``type`` names it; ``to_dict()`` gives the contract's JSON object;
    the object's fields are attributes (a field the event does not carry reads as its default)."""

    __slots__ = ("_json", "_dict", "_names")
    _fields: ClassVar[Dict[str, Any]] = {}

    def __init__(self, raw: Optional[Dict[str, Any]] = None, json_text: Optional[str] = None, names: Names = ()) -> None:
        self._json = json_text
        self._dict = raw
        self._names = names

    @property
    def type(self) -> str:
        """The event's ``type``."""
        return str(self._raw.get("type", ""))

    @property
    def _raw(self) -> Dict[str, Any]:
        if self._dict is None:
            self._dict = json.loads(self._json or "{}")
        return self._dict

    def __getattr__(self, name: str) -> Any:
        fields = type(self)._fields
        if name not in fields:
            raise AttributeError(f"{type(self).__name__} has no field `{name}`")
        return self._field(name, self._raw.get(name, fields[name]))

    def _field(self, name: str, value: Any) -> Any:
        return value

    def to_dict(self) -> Dict[str, Any]:
        """The event as docs/CONTRACT.md writes it (a copy)."""
        return json.loads(self._json) if self._json is not None else json.loads(json.dumps(self._dict))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Event) and self._raw == other._raw

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._raw})"


class Notice(Event):
    """Something the host should know (``kind`` is one of the contract's notice kinds)."""

    __slots__ = ()
    type = "notice"  # type: ignore[assignment]
    _fields = {"kind": "", "message": "", "index": None}
    kind: str
    message: str
    index: Optional[int]


class CallAssembled(Event):
    """A call's arguments are complete (``name`` as the model wrote it)."""

    __slots__ = ()
    type = "call_assembled"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "name": "", "input": None, "repair": None, "thought_signature": None}
    index: int
    id: str
    name: str
    input: Dict[str, Any]
    repair: Optional[str]
    thought_signature: Optional[str]


class CallStarted(Event):
    """A tool begins executing."""

    __slots__ = ()
    type = "call_started"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "name": "", "input": None, "speculative": False}
    index: int
    id: str
    name: str
    input: Dict[str, Any]
    speculative: bool


class ApprovalRequired(Event):
    """The host must decide: answer with ``session.answer(event, decision)``."""

    __slots__ = ()
    type = "approval_required"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "name": "", "requirement": "", "input": None, "request": 0}
    index: int
    id: str
    name: str
    requirement: str
    input: Dict[str, Any]
    request: int


class ApprovalDecided(Event):
    """A decision was made."""

    __slots__ = ()
    type = "approval_decided"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "decision": ""}
    index: int
    id: str
    decision: str


class ApprovalExpired(Event):
    """Nobody decided within ``approval.timeout_ms``: the call was refused."""

    __slots__ = ()
    type = "approval_expired"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "timeout_ms": 0}
    index: int
    id: str
    timeout_ms: int


class InputRewritten(Event):
    """A pre_tool_use hook rewrote the call's input."""

    __slots__ = ()
    type = "input_rewritten"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "hook": "", "original_input": None, "input": None}
    index: int
    id: str
    hook: str
    original_input: Any
    input: Any


class CallFinished(Event):
    """A tool (or its refusal) ended."""

    __slots__ = ()
    type = "call_finished"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "name": "", "is_error": False, "duration_ms": 0}
    index: int
    id: str
    name: str
    is_error: bool
    duration_ms: int


class Progress(Event):
    """A running call reported progress."""

    __slots__ = ()
    type = "progress"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "progress": 0.0, "total": None, "message": None}
    index: int
    id: str
    progress: float
    total: Optional[float]
    message: Optional[str]


class InputRequired(Event):
    """A running call's MCP server asks the user for input."""

    __slots__ = ()
    type = "input_required"  # type: ignore[assignment]
    _fields = {"n": 0, "index": 0, "id": "", "server": "", "message": "", "requested_schema": None}
    n: int
    index: int
    id: str
    server: str
    message: str
    requested_schema: Dict[str, Any]


class InputAnswered(Event):
    """An input request was answered, declined or cancelled."""

    __slots__ = ()
    type = "input_answered"  # type: ignore[assignment]
    _fields = {"n": 0, "index": 0, "action": ""}
    n: int
    index: int
    action: str


class Subagent(Event):
    """An approval event of a sub-agent's session (answer it at ``session``)."""

    __slots__ = ()
    type = "subagent"  # type: ignore[assignment]
    _fields = {"index": 0, "id": "", "session": "", "event": None}
    index: int
    id: str
    session: str
    event: Optional[Event]

    def _field(self, name: str, value: Any) -> Any:
        return event_from_dict(value) if name == "event" and isinstance(value, dict) else value


class ToolResult:
    """One call's result, as ``round_complete.results`` holds it."""

    __slots__ = ("index", "tool_use_id", "name", "is_error", "content", "blocks")

    def __init__(self, index: int, tool_use_id: str, name: str, is_error: bool, content: str, blocks: Optional[List[Dict[str, Any]]] = None) -> None:
        self.index = index
        self.tool_use_id = tool_use_id
        self.name = name
        self.is_error = is_error
        self.content = content
        self.blocks = blocks

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolResult) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return "ToolResult(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


class RoundComplete(Event):
    """The last event of a round: exactly one result per call, by index."""

    __slots__ = ()
    type = "round_complete"  # type: ignore[assignment]
    _fields = {"stop_reason": "", "text": "", "results": None}
    stop_reason: str
    text: str
    results: List[ToolResult]

    def _field(self, name: str, value: Any) -> Any:
        if name == "results":
            return [ToolResult(**{k: r.get(k) for k in ToolResult.__slots__}) for r in value or []]
        return value

    def as_messages(self, format: str) -> List[Dict[str, Any]]:
        """The results as the messages the provider's next request appends, in ``format``:
        ``anthropic``, ``openai-chat``, ``openai-responses`` or ``gemini`` (docs/CONTRACT.md,
        "Results as the provider's messages"). Empty when the round made no call."""
        results = json.dumps(self._raw.get("results", []))
        return json.loads(_native.results_as_messages(format, results, json.dumps([list(n) for n in self._names])))


_CLASSES: Dict[str, type] = {
    cls.type: cls  # type: ignore[misc]
    for cls in (
        Notice,
        CallAssembled,
        CallStarted,
        ApprovalRequired,
        ApprovalDecided,
        ApprovalExpired,
        InputRewritten,
        CallFinished,
        Progress,
        InputRequired,
        InputAnswered,
        Subagent,
        RoundComplete,
    )
}


def event_from_json(kind: str, text: str, names: Optional[List[Tuple[int, str, str]]] = None) -> Event:
    """The typed event for a contract object given as JSON text (read when first asked)."""
    return _CLASSES.get(kind, Event)(None, text, tuple(tuple(n) for n in names) if names else ())


def event_from_dict(raw: Dict[str, Any], names: Names = ()) -> Event:
    """The typed event for a contract object (an unknown ``type`` gives a plain ``Event``)."""
    return _CLASSES.get(raw.get("type", ""), Event)(raw, None, names)
