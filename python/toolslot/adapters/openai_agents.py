"""The OpenAI Agents SDK: a session's tools as ``FunctionTool``s.

    from agents import Agent
    from toolslot.adapters.openai_agents import function_tools

    agent = Agent(name="coder", tools=function_tools(session))

Every invocation is a round of the session (policy, approval, sandbox, truncation). A tool
whose capabilities make the session ask (``static_approval`` under its mode) has
``needs_approval`` set, so the SDK's own approval flow (``result.interruptions``,
``RunState.approve``/``reject``) decides it; what the SDK approved is approved in toolslot. A
call toolslot asks about that the SDK did not (a policy rule's ``ask``, a shell command that is
not read-only) goes to ``approve``, and is rejected without one.
Tested against openai-agents 0.24.0.
"""

from __future__ import annotations

from typing import Any, List, Optional

from agents import FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext

from .._slot import Session
from ._rounds import Approver, Rounds, catalog

__all__ = ["function_tools"]


def function_tools(session: Session, approve: Optional[Approver] = None) -> List[FunctionTool]:
    """The session's tools (as its model would see them now) as ``FunctionTool``s."""
    rounds = Rounds(session, approve)
    tools = []
    for entry in catalog(session):
        name = entry["name"]

        async def invoke(ctx: ToolContext[Any], arguments: str, _name: str = name) -> str:
            approved = {ctx.tool_call_id} if rounds.asks(_name) else ()
            (result,) = await rounds.run([(ctx.tool_call_id, _name, arguments)], approved)
            return result.content

        async def needs_approval(ctx: RunContextWrapper[Any], params: dict, call_id: str, _name: str = name) -> bool:
            return rounds.asks(_name)

        tools.append(
            FunctionTool(
                name=name,
                description=entry["description"],
                params_json_schema=entry["input_schema"],
                on_invoke_tool=invoke,
                # toolslot validates against the tool's own schema (and repairs first); the
                # SDK's strict mode would rewrite the schema the model sees.
                strict_json_schema=False,
                needs_approval=needs_approval,
            )
        )
    return tools
