"""LangGraph: a node that runs an ``AIMessage``'s tool calls, where ``ToolNode`` would.

    from toolslot.adapters.langgraph import ToolslotNode, tools_for_binding

    graph.add_node("tools", ToolslotNode(session))
    model = model.bind_tools(tools_for_binding(session))

It reads the state as ``ToolNode`` does (a dict with ``messages``, or a list of messages) and
answers the same way: one ``ToolMessage`` per call of the last ``AIMessage``, in order, with
``tool_call_id`` and ``status="error"`` for an error. All of the message's calls are one round,
so read-only calls run in parallel and the loop guard sees them together. Approval requests go
to ``approve`` (rejected without one). Tested against langgraph 1.2.22.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from .._slot import Session
from ._rounds import Approver, Rounds, catalog

__all__ = ["ToolslotNode", "tools_for_binding"]


def tools_for_binding(session: Session) -> List[Dict[str, Any]]:
    """The session's tools in OpenAI's function format, for ``model.bind_tools``."""
    return session.tools("openai")


class ToolslotNode:
    """A ``ToolNode``-compatible node over a toolslot session."""

    name = "tools"

    def __init__(self, session: Session, approve: Optional[Approver] = None, messages_key: str = "messages") -> None:
        self.rounds = Rounds(session, approve)
        self.messages_key = messages_key
        self.tools_by_name = {t["name"]: t for t in catalog(session)}

    def _calls(self, state: Union[Dict[str, Any], List[AnyMessage]]) -> tuple:
        messages = state if isinstance(state, list) else state[self.messages_key]
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is None:
            raise ValueError("no AIMessage found in input")
        return tuple((c["id"], c["name"], c["args"]) for c in last.tool_calls)

    def _answer(self, state: Any, results: list) -> Any:
        out = [
            ToolMessage(content=r.content, tool_call_id=r.tool_use_id, name=r.name, status="error" if r.is_error else "success")
            for r in results
        ]
        return out if isinstance(state, list) else {self.messages_key: out}

    def invoke(self, state: Any, config: Optional[RunnableConfig] = None) -> Any:
        """Runs the calls of the last AIMessage; their ToolMessages."""
        calls = self._calls(state)
        return self._answer(state, self.rounds.run_blocking(calls) if calls else [])

    async def ainvoke(self, state: Any, config: Optional[RunnableConfig] = None) -> Any:
        """As ``invoke``, on the event loop."""
        calls = self._calls(state)
        return self._answer(state, await self.rounds.run(calls) if calls else [])

    def __call__(self, state: Any) -> Any:
        return self.invoke(state)
