"""The adapters against the real frameworks (pinned in scripts/install-test-deps.sh), offline:
each framework drives its own loop with a fake model implementing its model interface, and
the calls it makes run through toolslot."""

from __future__ import annotations

import asyncio
import json

import pytest
import toolslot
from conftest import QUIET


@pytest.fixture
def session(workspace):
    slot = toolslot.Slot(QUIET)
    yield slot.open_session(workspace=workspace, approval_mode="ask")
    slot.close()


# --- OpenAI Agents SDK -------------------------------------------------------------------

from agents import Agent, Runner, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

set_tracing_disabled(True)


class ScriptedModel(Model):
    """Answers each request with the next scripted output, and keeps what it was sent."""

    def __init__(self, turns):
        self.turns = list(turns)
        self.inputs = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **_):
        self.inputs.append(input)
        return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests run without streaming")


def fn_call(call_id, name, args):
    return ResponseFunctionToolCall(arguments=json.dumps(args), call_id=call_id, name=name, type="function_call", id=f"fc_{call_id}", status="completed")


def say(text):
    return ResponseOutputMessage(
        id="msg", content=[ResponseOutputText(text=text, type="output_text", annotations=[])], role="assistant", status="completed", type="message"
    )


def test_openai_agents_tools_run_through_the_session_and_its_approval(session, workspace):
    from toolslot.adapters.openai_agents import function_tools

    model = ScriptedModel(
        [
            [fn_call("call_a", "read_file", {"path": "notes.txt"}), fn_call("call_b", "write_file", {"path": "out.txt", "content": "hello\n"})],
            [say("done")],
        ]
    )
    tools = function_tools(session)
    assert {"read_file", "write_file", "exec_shell"} <= {t.name for t in tools}
    agent = Agent(name="coder", instructions="x", model=model, tools=tools)

    async def run():
        first = await Runner.run(agent, "go")
        # write_file asks in `ask` mode: the SDK's own approval flow holds the run.
        assert [i.raw_item.call_id for i in first.interruptions] == ["call_b"]
        assert not (workspace / "out.txt").exists()
        state = first.to_state()
        state.approve(first.interruptions[0])
        return await Runner.run(agent, state)

    result = asyncio.run(run())
    assert result.final_output == "done"
    assert (workspace / "out.txt").read_text() == "hello\n"
    outputs = {i["call_id"]: i["output"] for i in model.inputs[-1] if isinstance(i, dict) and i.get("type") == "function_call_output"}
    assert "TODO: rename add_one" in outputs["call_a"], outputs
    assert set(outputs) == {"call_a", "call_b"}


def test_openai_agents_a_rejected_call_never_runs(session, workspace):
    from toolslot.adapters.openai_agents import function_tools

    model = ScriptedModel([[fn_call("call_w", "write_file", {"path": "no.txt", "content": "x"})], [say("ok")]])
    agent = Agent(name="coder", instructions="x", model=model, tools=function_tools(session))

    async def run():
        first = await Runner.run(agent, "go")
        state = first.to_state()
        state.reject(first.interruptions[0])
        return await Runner.run(agent, state)

    assert asyncio.run(run()).final_output == "ok"
    assert not (workspace / "no.txt").exists()


# --- LangGraph -----------------------------------------------------------------------------

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402


def graph_with(node, model):
    def agent(state):
        return {"messages": [model.invoke(state["messages"])]}

    def route(state):
        return "tools" if state["messages"][-1].tool_calls else END

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", node)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g.compile()


def test_langgraph_node_answers_every_call_in_order(session, workspace):
    from toolslot.adapters.langgraph import ToolslotNode

    calls = [
        {"name": "read_file", "args": {"path": "notes.txt"}, "id": "c1"},
        {"name": "list_dir", "args": {}, "id": "c2"},
        {"name": "no_such_tool", "args": {}, "id": "c3"},
        {"name": "write_file", "args": {"path": "x.txt", "content": "x"}, "id": "c4"},
    ]
    model = GenericFakeChatModel(messages=iter([AIMessage(content="", tool_calls=calls), AIMessage(content="finished")]))
    graph = graph_with(ToolslotNode(session), model)
    out = graph.invoke({"messages": [HumanMessage(content="go")]})
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2", "c3", "c4"]
    assert [m.status for m in tool_messages] == ["success", "success", "error", "error"]
    assert "Unknown tool" in tool_messages[2].content
    # Asked, and rejected without an approver: nothing written.
    assert "Not approved" in tool_messages[3].content and not (workspace / "x.txt").exists()
    assert out["messages"][-1].content == "finished"


def test_langgraph_node_async_with_an_approver(session, workspace):
    from toolslot.adapters.langgraph import ToolslotNode

    asked = []

    async def approve(event):
        asked.append(event.name)
        return "approve"

    node = ToolslotNode(session, approve=approve)
    state = {"messages": [AIMessage(content="", tool_calls=[{"name": "write_file", "args": {"path": "y.txt", "content": "y"}, "id": "w1"}])]}
    out = asyncio.run(node.ainvoke(state))
    assert [m.tool_call_id for m in out["messages"]] == ["w1"] and out["messages"][0].status == "success"
    assert asked == ["write_file"] and (workspace / "y.txt").read_text() == "y"


# --- pydantic-ai ---------------------------------------------------------------------------

from pydantic_ai import Agent as PydanticAgent  # noqa: E402
from pydantic_ai.messages import ModelResponse as PAResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402


def test_pydantic_ai_toolset_runs_calls_through_the_session(session, workspace):
    from toolslot.adapters.pydantic_ai import ToolslotToolset

    seen = []

    def model(messages, info: AgentInfo):
        seen.append(messages)
        if len(seen) == 1:
            assert {"read_file", "write_file"} <= {t.name for t in info.function_tools}
            return PAResponse(parts=[ToolCallPart("read_file", {"path": "notes.txt"}, tool_call_id="p1"), ToolCallPart("read_file", {"path": "../etc/passwd"}, tool_call_id="p2")])
        return PAResponse(parts=[TextPart("done")])

    agent = PydanticAgent(FunctionModel(model), toolsets=[ToolslotToolset(session)])
    result = agent.run_sync("go")
    assert result.output == "done"
    returns = {p.tool_call_id: p.content for m in seen[-1] for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)}
    assert set(returns) == {"p1", "p2"}
    assert "workspace" in returns["p2"] or "outside" in returns["p2"], returns["p2"]
