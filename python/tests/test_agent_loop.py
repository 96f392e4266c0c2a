"""examples/python/agent_loop.py with the providers' official SDKs against its stand-in
server: the next request carries exactly the tool results it should (ids, order, errors), as
the SDK serialized them."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import QUIET, REPO, STREAMS


def example():
    spec = importlib.util.spec_from_file_location("agent_loop", REPO / "examples" / "python" / "agent_loop.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_ids(path):
    """The tool-call ids a recorded stream holds, in order, read from its bytes."""
    text = path.read_text()
    return re.findall(r'"type":"tool_use","id":"([^"]+)"', text) + re.findall(r'"tool_calls":\[\{"index":\d+,"id":"([^"]+)"', text)


@pytest.mark.parametrize("approve", ["yes", "no"])
def test_anthropic_sdk_loop_sends_back_exactly_the_results(workspace, approve):
    streams = [STREAMS / "edit-1-read.sse", STREAMS / "edit-2-edit.sse"]
    server = example().run("anthropic", [str(s) for s in streams], str(workspace), approve, QUIET)
    assert [r["path"] for r in server.requests] == ["/v1/messages"] * 3
    for n, stream in enumerate(streams, start=1):
        messages = server.requests[n]["body"]["messages"]
        assistant, results = messages[-2], messages[-1]
        ids = tool_ids(stream)
        assert [b["id"] for b in assistant["content"] if b["type"] == "tool_use"] == ids
        assert results["role"] == "user"
        assert [(b["type"], b["tool_use_id"]) for b in results["content"]] == [("tool_result", i) for i in ids]
    read = server.requests[1]["body"]["messages"][-1]["content"][0]
    assert read["is_error"] is False and "add_one" in read["content"]
    edit = server.requests[2]["body"]["messages"][-1]["content"][0]
    changed = "increment" in (workspace / "src" / "lib.rs").read_text()
    if approve == "yes":
        assert edit["is_error"] is False and changed, edit
    else:
        assert edit["is_error"] is True and "Not approved" in edit["content"] and not changed, edit


def test_openai_sdk_loop_sends_back_exactly_the_results(workspace):
    stream = STREAMS / "shell-approval.sse"
    server = example().run("openai", [str(stream)], str(workspace), "no", QUIET)
    assert [r["path"] for r in server.requests] == ["/v1/chat/completions"] * 2
    messages = server.requests[1]["body"]["messages"]
    ids = tool_ids(stream)
    assert ids == ["call_shell_1", "call_shell_2"]
    assistant = messages[-3]
    assert [c["id"] for c in assistant["tool_calls"]] == ids
    assert [(m["role"], m["tool_call_id"]) for m in messages[-2:]] == [("tool", i) for i in ids]
    assert messages[-1]["content"].startswith("Not approved"), messages[-1]
    assert not (workspace / "made-by-the-model.txt").exists()
