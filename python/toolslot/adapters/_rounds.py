"""Calls a framework decided on, run as a round of a session.

A framework hands over calls it has already parsed (name, arguments, id). They are written
as the OpenAI Chat stream that would have carried them and submitted to the session, so they
take the pipeline's one path: no second way of running a tool exists for adapters.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from typing import Any, Awaitable, Callable, Collection, Dict, List, Optional, Sequence, Tuple, Union

from .._events import ApprovalRequired, RoundComplete, Subagent, ToolResult
from .._slot import Session

Call = Tuple[str, str, Any]
"""A call as a framework holds it: (id, tool name, arguments as a dict or JSON text)."""

Approver = Callable[[ApprovalRequired], Union[str, Awaitable[str]]]
"""Decides an approval request: returns ``approve``, ``reject``, … (or a coroutine of it)."""

_ASKS = {
    "read-only": set(),
    "ask": {"suggest", "required"},
    "auto-edit": {"required"},
    "full-auto": set(),
}


def stream_of(calls: Sequence[Call]) -> bytes:
    """The OpenAI Chat stream a model would have sent to make ``calls``."""
    chunks = []
    for n, (call_id, name, args) in enumerate(calls):
        arguments = args if isinstance(args, str) else json.dumps(args)
        delta = {"tool_calls": [{"index": n, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}
        chunks.append({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


class Rounds:
    """Runs calls through ``session``, one round at a time (a session runs one round at once;
    calls a framework starts together wait for each other here)."""

    def __init__(self, session: Session, approve: Optional[Approver] = None) -> None:
        self.session = session
        self.approve = approve
        self._lock = threading.Lock()
        self._approval: Dict[str, str] = {}

    def asks(self, name: str) -> bool:
        """Whether a call of ``name`` will be asked about under the session's mode (from its
        capabilities; a policy rule may still ask about any call)."""
        if name not in self._approval:
            # Read again on a name not seen: tools are only ever added.
            self._approval = {m["name"]: m["static_approval"] for m in self.session.slot.metadata()}
        asking = _ASKS.get(self.session.approval_mode, {"suggest", "required"})
        return self._approval.get(name) in asking

    async def _decide(self, event: ApprovalRequired, approved: Collection[str]) -> str:
        if event.id in approved:
            return "approve"
        if self.approve is None:
            return "reject"
        decision = self.approve(event)
        if inspect.isawaitable(decision):
            decision = await decision
        return str(decision)

    async def run(self, calls: Sequence[Call], approved: Collection[str] = ()) -> List[ToolResult]:
        """Runs ``calls`` as one round; their results, one per call, in order. A call whose id
        is in ``approved`` was approved by the framework's own flow; any other the session asks
        about goes to ``approve`` (rejected without one)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._lock.acquire)
        try:
            done: Optional[RoundComplete] = None
            async for event in self.session.submit(stream_of(calls), dialect="openai-chat"):
                if isinstance(event, ApprovalRequired):
                    await self.session.answer(event, await self._decide(event, approved))
                elif isinstance(event, Subagent) and isinstance(event.event, ApprovalRequired):
                    await self.session.answer(event, await self._decide(event.event, ()))
                elif isinstance(event, RoundComplete):
                    done = event
        finally:
            self._lock.release()
        assert done is not None, "a round always ends with round_complete"
        return done.results

    def run_blocking(self, calls: Sequence[Call], approved: Collection[str] = ()) -> List[ToolResult]:
        """As ``run``, from synchronous code."""
        with self._lock:
            done: Optional[RoundComplete] = None
            for event in self.session.submit_blocking(stream_of(calls), dialect="openai-chat"):
                if isinstance(event, ApprovalRequired):
                    self.session.answer_blocking(event, _sync(self._decide(event, approved)))
                elif isinstance(event, Subagent) and isinstance(event.event, ApprovalRequired):
                    self.session.answer_blocking(event, _sync(self._decide(event.event, ())))
                elif isinstance(event, RoundComplete):
                    done = event
        assert done is not None, "a round always ends with round_complete"
        return done.results


def _sync(coro: Awaitable[str]) -> str:
    return asyncio.run(coro)  # type: ignore[arg-type]


def catalog(session: Session) -> List[Dict[str, Any]]:
    """The session's tools: ``name``, ``description``, ``input_schema``."""
    return session.tools("anthropic")
