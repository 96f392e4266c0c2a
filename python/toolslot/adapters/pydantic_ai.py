"""pydantic-ai: a session's tools as a toolset.

    from pydantic_ai import Agent
    from toolslot.adapters.pydantic_ai import ToolslotToolset

    agent = Agent(model, toolsets=[ToolslotToolset(session)])

Each call is a round of the session; toolslot validates (and repairs) the arguments, so the
toolset passes them through as the model sent them. An error result is returned to the model
as its text, as a tool's message would be. Approval requests go to ``approve`` (rejected
without one). Tested against pydantic-ai-slim 2.68.0.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from .._slot import Session
from ._rounds import Approver, Rounds, catalog

__all__ = ["ToolslotToolset"]

# The arguments are toolslot's to judge: any object passes here, as the model sent it.
_ANY_OBJECT = SchemaValidator(core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema()))


class ToolslotToolset(AbstractToolset[Any]):
    """The tools of a toolslot session, called through it."""

    def __init__(self, session: Session, approve: Optional[Approver] = None, id: Optional[str] = None) -> None:
        self.rounds = Rounds(session, approve)
        self.session = session
        self._id = id

    @property
    def id(self) -> Optional[str]:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> Dict[str, ToolsetTool[Any]]:
        return {
            t["name"]: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(name=t["name"], description=t["description"], parameters_json_schema=t["input_schema"]),
                max_retries=0,
                args_validator=_ANY_OBJECT,
            )
            for t in catalog(self.session)
        }

    async def call_tool(self, name: str, tool_args: Dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        call_id = ctx.tool_call_id or f"pydantic_ai_{name}"
        (result,) = await self.rounds.run([(call_id, name, tool_args)])
        return result.content
