"""Drives toolslot's MCP server with the official MCP Python SDK, as a client would: `toolslot
mcp` over stdio (TOOLSLOT is the binary), or the `/mcp` endpoint of a running `toolslot serve`
over Streamable HTTP (TOOLSLOT is its base URL; the token, if any, is MCP_TOKEN).

Usage: python mcp_server_client.py TOOLSLOT WORKSPACE SCENARIO MODE [CONFIG]

MODE is the SDK's connect mode: `auto` (server/discover, so the newest revision both sides
know: 2026-07-28, where approvals travel as `input_required` results) or `legacy` (the
`initialize` handshake, where approvals are `elicitation/create` requests). The server runs
with this process's environment (the test sets the TOOLSLOT_* variables) and CONFIG when given.

Each scenario prints what it saw as one JSON object on stdout; the Rust test
(actors/tests/mcp_server.rs) judges it.
"""

from __future__ import annotations

import json
import os
import sys
import time

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOOLSLOT, WORKSPACE, SCENARIO, MODE = sys.argv[1:5]
CONFIG = sys.argv[5] if len(sys.argv) > 5 else None


def params() -> StdioServerParameters:
    args = ["mcp", "--workspace", WORKSPACE]
    if CONFIG:
        args += ["--config", CONFIG]
    # The SDK passes only a few variables by default; the test's TOOLSLOT_* ones must reach it.
    return StdioServerParameters(command=TOOLSLOT, args=args, env=dict(os.environ))


class Person:
    """Answers approval forms: `decision` after `delay` seconds; remembers what was asked."""

    def __init__(self, decision: str | None, delay: float = 0.0) -> None:
        self.decision = decision
        self.delay = delay
        self.asked: list[dict] = []

    async def __call__(self, context, form: types.ElicitRequestParams):
        self.asked.append({"message": form.message, "schema": form.requested_schema})
        if self.delay:
            await anyio.sleep(self.delay)
        if self.decision is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"decision": self.decision})


HTTP = TOOLSLOT.startswith("http")


def endpoint(workspace: str | None = WORKSPACE) -> str:
    from urllib.parse import quote

    url = TOOLSLOT.rstrip("/") + "/mcp"
    query = [f"workspace={quote(workspace)}"] if workspace else []
    if os.environ.get("MCP_SESSION"):
        query.append(f"session={quote(os.environ['MCP_SESSION'])}")
    return url + ("?" + "&".join(query) if query else "")


def server(workspace: str | None = WORKSPACE):
    if not HTTP:
        return params()
    token = os.environ.get("MCP_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return streamable_http_client(endpoint(workspace), http_client=create_mcp_http_client(headers=headers))


def client(person: Person | None = None, workspace: str | None = WORKSPACE, **kwargs) -> Client:
    if person is not None:
        kwargs["elicitation_callback"] = person
    return Client(server(workspace), mode=MODE, **kwargs)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def listing(tools: types.ListToolsResult) -> dict:
    out = {}
    for tool in tools.tools:
        a = tool.annotations
        out[tool.name] = {
            "readOnlyHint": a.read_only_hint if a else None,
            "destructiveHint": a.destructive_hint if a else None,
            "openWorldHint": a.open_world_hint if a else None,
            "outputSchema": tool.output_schema is not None,
        }
    return out


def running_with(needle: str) -> list[str]:
    """Command lines of this machine's processes that mention `needle`."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in line:
            found.append(line.strip())
    return found


async def scenario_list() -> dict:
    async with client(Person("reject")) as c:
        tools = await c.list_tools()
        return {
            "protocol": c.protocol_version,
            "instructions": c.session.instructions,
            "tools": listing(tools),
        }


async def scenario_read() -> dict:
    async with client() as c:
        result = await c.call_tool("read_file", {"path": "notes.txt"})
        return {"is_error": result.is_error, "text": text_of(result)}


async def approval(decision: str | None, delay: float = 0.0) -> dict:
    marker = os.path.join(WORKSPACE, "marker")
    person = Person(decision, delay)
    async with client(person) as c:
        await c.list_tools()
        started = time.monotonic()
        result = await c.call_tool("exec_shell", {"command": "touch marker"})
        took = time.monotonic() - started
        # Whatever was going to run has run by now.
        await anyio.sleep(1.0)
        return {
            "asked": person.asked,
            "is_error": result.is_error,
            "text": text_of(result),
            "marker": os.path.exists(marker),
            "seconds": took,
        }


async def scenario_approve() -> dict:
    return await approval("approve")


async def scenario_reject() -> dict:
    return await approval("reject")


async def scenario_timeout() -> dict:
    # Answers long after approval.timeout_ms (the test's config sets it short).
    return await approval("approve", delay=4.0)


async def scenario_session() -> dict:
    # Approved for the session: the same call again is not asked about.
    person = Person("approve_for_session")
    async with client(person) as c:
        first = await c.call_tool("exec_shell", {"command": "touch marker"})
        os.remove(os.path.join(WORKSPACE, "marker"))
        second = await c.call_tool("exec_shell", {"command": "touch marker"})
        return {
            "asked": len(person.asked),
            "errors": [first.is_error, second.is_error],
            "marker": os.path.exists(os.path.join(WORKSPACE, "marker")),
        }


async def scenario_ledger() -> dict:
    # The calls the test also sends in a provider stream: one that runs unasked, one a person
    # approves, one a policy rule denies.
    async with client(Person("approve")) as c:
        results = [
            await c.call_tool("read_file", {"path": "notes.txt"}),
            await c.call_tool("exec_shell", {"command": "touch marker"}),
            await c.call_tool("exec_shell", {"command": "rm -f notes.txt"}),
        ]
        return {"errors": [r.is_error for r in results]}


async def scenario_unasked() -> dict:
    # A client without elicitation: nobody can be asked.
    marker = os.path.join(WORKSPACE, "marker")
    async with client() as c:
        result = await c.call_tool("exec_shell", {"command": "touch marker"})
        await anyio.sleep(1.0)
        return {
            "instructions": c.session.instructions,
            "is_error": result.is_error,
            "text": text_of(result),
            "marker": os.path.exists(marker),
        }


async def scenario_cancel() -> dict:
    marker = os.path.join(WORKSPACE, f"marker-{os.getpid()}")
    person = Person("approve")
    async with client(person) as c:
        await c.list_tools()
        started = None
        # A bound for a call that never starts; the watcher's cancel is what ends a started one.
        with anyio.move_on_after(60.0) as scope:
            # The approval is answered first; the command then sleeps until cancelled.
            async def watch() -> None:
                nonlocal started
                while not running_with(marker):
                    await anyio.sleep(0.1)
                started = running_with(marker)
                await anyio.sleep(1.0)
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await c.call_tool("exec_shell", {"command": f"sleep 30; touch {marker}"})
        cancelled = scope.cancelled_caught
        # The process group is killed; give it a moment to go.
        alive = running_with(marker)
        for _ in range(50):
            if not alive:
                break
            await anyio.sleep(0.1)
            alive = running_with(marker)
        # The session takes the next call.
        after = await c.call_tool("read_file", {"path": "notes.txt"})
        await anyio.sleep(1.0)
        return {
            "cancelled": cancelled,
            "started": bool(started),
            "alive_after": alive,
            "marker": os.path.exists(marker),
            "next_call_ok": not after.is_error,
        }


async def scenario_deferred() -> dict:
    changes: list[str] = []

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.append("tools")

    async with client(Person("approve"), message_handler=on_message) as c:
        before = await c.list_tools()
        found = None
        if c.protocol_version >= "2026-07-28":
            async with c.listen(tools_list_changed=True) as sub:
                found = await c.call_tool("tool_search", {"query": "current time in a timezone"})
                with anyio.move_on_after(5.0):
                    async for _event in sub:
                        changes.append("tools")
                        break
        else:
            found = await c.call_tool("tool_search", {"query": "current time in a timezone"})
            with anyio.move_on_after(5.0):
                while not changes:
                    await anyio.sleep(0.05)
        after = await c.list_tools()
        # The server's structured value comes through whole; the SDK checks it against the
        # outputSchema it was listed with.
        now = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
        return {
            "protocol": c.protocol_version,
            "search": text_of(found),
            "before": listing(before),
            "changed": bool(changes),
            "after": listing(after),
            "call": {"is_error": now.is_error, "structured": now.structured_content, "text": text_of(now)},
        }


async def scenario_progress() -> dict:
    # An upstream server's long-running tool (server-everything), approved, reporting progress
    # to a client that sent a progressToken.
    seen: list[list] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append([progress, total])

    async with client(Person("approve")) as c:
        tools = await c.list_tools()
        result = await c.call_tool(
            "everything__trigger-long-running-operation",
            {"duration": 2, "steps": 4},
            progress_callback=on_progress,
        )
        return {
            "listed": "everything__trigger-long-running-operation" in [t.name for t in tools.tools],
            "is_error": result.is_error,
            "text": text_of(result),
            "progress": seen,
        }


async def scenario_noworkspace() -> dict:
    # An endpoint without a workspace, and one outside server.workspace_root: each fails at
    # its first exchange, saying why.
    out = {}
    for name, ws in (("none", None), ("outside", "/")):
        try:
            async with client(workspace=ws) as c:
                await c.list_tools()
                out[name] = "connected"
        except BaseException as e:  # the SDK raises an exception group from its task group
            out[name] = repr(e)
    return out


async def scenario_two() -> dict:
    # Four clients at once, each reading its own file: each call answered.
    async def one(i: int, results: dict) -> None:
        async with client() as c:
            r = await c.call_tool("read_file", {"path": f"notes{i}.txt"})
            results[i] = {"is_error": r.is_error, "text": text_of(r)}

    results: dict = {}
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(one, i, results)
    return {"results": [results[i] for i in range(4)]}


async def main() -> None:
    run = globals()[f"scenario_{SCENARIO}"]
    with anyio.fail_after(90):
        out = await run()
    print(json.dumps(out), flush=True)


anyio.run(main)
