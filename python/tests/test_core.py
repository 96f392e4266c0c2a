"""The package's core against docs/CONTRACT.md: the same rounds as `toolslot replay`, typed
events, approvals, Python tools governed as built-ins, exceptions, the GIL, fork."""

from __future__ import annotations

import asyncio
import collections.abc
import json
import os
import pathlib
import threading
import time

import pytest
import toolslot
from conftest import QUIET, STREAMS, chat_stream, replay


def drop_durations(events):
    return [{k: v for k, v in e.items() if k != "duration_ms"} for e in events]


def test_events_match_the_binary_for_the_same_round(workspace, slot):
    # The same recording through `toolslot replay` and through Python: the same events, the
    # same round_complete, object for object (timings aside).
    stream = STREAMS / "repaired.sse"
    expected = replay(["--approve", "none", "--workspace", str(workspace), "--config", str(write_quiet(workspace)), str(stream)], workspace)
    session = slot.open_session(workspace=workspace, approval_mode="ask")
    got = [e.to_dict() for e in session.submit_blocking(stream.read_bytes())]
    key = lambda e: json.dumps(e, sort_keys=True)  # noqa: E731 - calls may finish in either order
    assert sorted(map(key, drop_durations(got))) == sorted(map(key, drop_durations(expected)))
    assert got[-1]["type"] == "round_complete"
    assert got[-1] == expected[-1]


def write_quiet(dir: pathlib.Path) -> pathlib.Path:
    path = dir.parent / "quiet.toml"
    path.write_text('[audit]\nledger_dir = ""\n[mcp]\ntool_cache_dir = ""\n')
    return path


def test_events_are_typed(workspace, slot):
    session = slot.open_session(workspace=workspace)
    events = list(session.submit_blocking((STREAMS / "repaired.sse").read_bytes()))
    kinds = {type(e) for e in events}
    assert {toolslot.Notice, toolslot.CallAssembled, toolslot.CallStarted, toolslot.CallFinished, toolslot.RoundComplete} <= kinds
    assembled = [e for e in events if isinstance(e, toolslot.CallAssembled)]
    assert [(e.index, e.id, e.name, e.repair) for e in assembled] == [
        (0, "call_rep_1", "ReadFile", "trailing_commas"),
        (1, "call_rep_2", "list-dir", "close_brackets"),
        (2, "call_rep_3", "read_fiel", None),
    ]
    done = events[-1]
    assert isinstance(done, toolslot.RoundComplete) and done.type == "round_complete"
    assert [(r.index, r.tool_use_id, r.name, r.is_error) for r in done.results] == [
        (0, "call_rep_1", "read_file", False),
        (1, "call_rep_2", "list_dir", False),
        (2, "call_rep_3", "read_fiel", True),
    ]
    assert "TODO: rename add_one" in done.results[0].content


def test_async_submit_reads_an_async_iterable_in_pieces(workspace, slot):
    body = (STREAMS / "parallel-reads.sse").read_bytes()

    async def pieces():
        for i in range(0, len(body), 7):
            yield body[i : i + 7]
            await asyncio.sleep(0)

    async def run():
        session = slot.open_session(workspace=workspace)
        return [e async for e in session.submit(pieces())]

    events = asyncio.run(run())
    done = events[-1]
    assert isinstance(done, toolslot.RoundComplete)
    assert len(done.results) == 4 and not any(r.is_error for r in done.results), done
    assert "demo workspace" in done.results[0].content


def test_as_messages_answers_every_call_in_order(workspace, slot):
    session = slot.open_session(workspace=workspace)
    done = list(session.submit_blocking((STREAMS / "repaired.sse").read_bytes()))[-1]
    ids = [r.tool_use_id for r in done.results]
    anthropic = done.as_messages("anthropic")
    assert [b["tool_use_id"] for b in anthropic[0]["content"]] == ids
    assert [b["is_error"] for b in anthropic[0]["content"]] == [r.is_error for r in done.results]
    assert [m["tool_call_id"] for m in done.as_messages("openai-chat")] == ids
    assert [m["call_id"] for m in done.as_messages("openai-responses")] == ids
    parts = done.as_messages("gemini")[0]["parts"]
    # Gemini's are named as the model wrote the call, not as it was resolved.
    assert [p["functionResponse"]["name"] for p in parts] == ["ReadFile", "list-dir", "read_fiel"]
    with pytest.raises(toolslot.ConfigError, match="unknown result format `xml`"):
        done.as_messages("xml")


def test_approvals_are_answered_blocking(workspace, slot):
    session = slot.open_session(workspace=workspace, approval_mode="ask")
    asked = []
    for event in session.submit_blocking((STREAMS / "shell-approval.sse").read_bytes()):
        if isinstance(event, toolslot.ApprovalRequired):
            asked.append(event)
            session.answer_blocking(event, "approve")
    assert [e.name for e in asked] == ["exec_shell"]
    assert (workspace / "made-by-the-model.txt").exists()
    assert event.results[1].is_error is False


def test_approvals_are_answered_async_and_a_rejection_is_a_result(workspace, slot):
    async def run():
        session = slot.open_session(workspace=workspace, approval_mode="ask")
        events = []
        async for event in session.submit((STREAMS / "shell-approval.sse").read_bytes()):
            events.append(event)
            if isinstance(event, toolslot.ApprovalRequired):
                await session.answer(event, "reject")
        return events

    events = asyncio.run(run())
    assert not (workspace / "made-by-the-model.txt").exists()
    done = events[-1]
    assert done.results[1].is_error and "Not approved" in done.results[1].content, done.results[1]
    decided = [e for e in events if isinstance(e, toolslot.ApprovalDecided)]
    assert [d.decision for d in decided] == ["rejected"]


def test_python_tools_are_governed_like_built_ins(workspace):
    slot = toolslot.Slot(QUIET)
    ran = []

    @slot.tool(capabilities=["read_only"])
    def add(a: int, b: int) -> int:
        """Adds two numbers."""
        ran.append((a, b))
        return a + b

    @slot.tool(capabilities=["read_only"])
    async def shout(text: str) -> str:
        await asyncio.sleep(0)
        return text.upper()

    @slot.tool(capabilities=["read_only"])
    def broken() -> str:
        raise ValueError("the disk is on fire")

    @slot.tool
    def launch(target: str) -> str:
        ran.append(("launch", target))
        return "launched"

    listed = {t["name"]: t for t in slot.catalog()}
    assert listed["add"]["input_schema"]["required"] == ["a", "b"]
    assert listed["add"]["description"] == "Adds two numbers."
    session = slot.open_session(workspace=workspace, approval_mode="ask")
    body = chat_stream([("add", {"a": 1, "b": 2}), ("add", {"a": "one", "b": 2}), ("shout", {"text": "hi"}), ("broken", {}), ("launch", {"target": "moon"})])
    events = []
    for event in session.submit_blocking(body):
        events.append(event)
        if isinstance(event, toolslot.ApprovalRequired):
            # Undeclared capabilities are unknown: the tool asks, as an extension would.
            assert event.name == "launch"
            session.answer_blocking(event, "reject")
    results = events[-1].results
    assert [r.tool_use_id for r in results] == ["call_0", "call_1", "call_2", "call_3", "call_4"]
    assert (results[0].is_error, results[0].content) == (False, "3")
    # Validation refused the string before the function ran.
    assert results[1].is_error and '"field":"a"' in results[1].content, results[1]
    assert (results[2].is_error, results[2].content) == (False, "HI")
    assert results[3].is_error and "ValueError: the disk is on fire" in results[3].content
    assert results[4].is_error and "Not approved" in results[4].content
    assert ran == [(1, 2)]
    slot.close()


def test_python_tools_run_on_the_loop_in_async_rounds(workspace):
    slot = toolslot.Slot(QUIET)
    loops = []

    @slot.tool(capabilities=["read_only"])
    async def where() -> str:
        loops.append(asyncio.get_running_loop())
        return "here"

    async def run():
        session = slot.open_session(workspace=workspace)
        events = [e async for e in session.submit(chat_stream([("where", {}), ("where", {})]))]
        return asyncio.get_running_loop(), events

    loop, events = asyncio.run(run())
    assert loops == [loop, loop]
    assert [r.content for r in events[-1].results] == ["here", "here"]
    slot.close()


def test_a_blocking_sync_tool_leaves_the_loop_free(workspace):
    slot = toolslot.Slot(QUIET)
    released = threading.Event()
    threads = []

    @slot.tool(capabilities=["read_only"], blocking=True)
    def wait_for_the_loop() -> str:
        threads.append(threading.get_ident())
        # Set by a task of the loop: if this ran on the loop, nothing could set it.
        return "released" if released.wait(timeout=5) else "the loop was blocked"

    async def release_soon():
        await asyncio.sleep(0.05)
        released.set()

    async def run():
        session = slot.open_session(workspace=workspace)
        setter = asyncio.get_running_loop().create_task(release_soon())
        events = [e async for e in session.submit(chat_stream([("wait_for_the_loop", {})]))]
        await setter
        return events

    events = asyncio.run(run())
    assert [r.content for r in events[-1].results] == ["released"]
    assert threads and threads[0] != threading.get_ident()
    assert slot.tools["wait_for_the_loop"].blocking
    slot.close()


def test_a_taken_name_or_an_unknown_capability_is_a_config_error(slot):
    with pytest.raises(toolslot.ConfigError, match="read_file.*taken"):

        @slot.tool(name="read_file", capabilities=["read_only"])
        def mine(path: str) -> str:
            return path

    with pytest.raises(toolslot.ConfigError, match="unknown capability `teleports`"):

        @slot.tool(capabilities=["teleports"])
        def beam() -> str:
            return ""


def test_what_a_tool_returns_or_raises_always_gives_its_call_one_result(tmp_path, slot):
    @slot.tool(capabilities=["read_only"])
    def odd_name() -> str:
        # A file name read with surrogateescape: a str that is no UTF-8.
        return b"report-\xff.txt".decode("utf-8", "surrogateescape")

    @slot.tool(capabilities=["read_only"])
    def interrupted() -> str:
        raise KeyboardInterrupt()

    @slot.tool(capabilities=["read_only"])
    def circular() -> list:
        loop = []
        loop.append(loop)
        return loop

    session = slot.open_session(workspace=tmp_path, approval_mode="full-auto")
    events = list(session.submit_blocking(chat_stream([("odd_name", {})])))
    result = events[-1].results[0]
    assert not result.is_error and result.content.startswith("report-\ufffd") and result.content.endswith(".txt"), result
    # What cannot be written as text is the call's error, not an exception out of the round,
    # whether the tool ran on the caller's thread or as a task of an asyncio round.
    @slot.tool(capabilities=["read_only"])
    async def circular_later() -> list:
        return circular()

    async def asyncio_round():
        return [e async for e in session.submit(chat_stream([("circular_later", {})]))]

    for events in [list(session.submit_blocking(chat_stream([("circular", {})]))), asyncio.run(asyncio_round())]:
        result = events[-1].results[0]
        assert result.is_error and "Circular reference" in result.content, result
    # An interrupt goes on to the caller, after its call got a result: the session's next
    # round runs, and the interrupted call was finished (not left running).
    with pytest.raises(KeyboardInterrupt):
        list(session.submit_blocking(chat_stream([("interrupted", {})])))
    events = list(session.submit_blocking(chat_stream([("odd_name", {"again": 1})])))
    assert isinstance(events[-1], toolslot.RoundComplete), events
    session.close()


def test_a_round_left_early_is_ended_before_the_next(tmp_path, slot):
    # The caller stops reading (break, an exception) while a tool still runs: the session's
    # next round starts at once, not "already running a round", and the tool left running
    # was cancelled, its call answered, whether the round ran on an event loop or blocking.
    seen = []

    @slot.tool(capabilities=["read_only"])
    async def slow_left(n: int) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.append(("cancelled", n))
            raise
        return "late"

    @slot.tool(capabilities=["read_only"])
    def quick_left(n: int) -> str:
        seen.append(("quick", n))
        return "ok"

    session = slot.open_session(workspace=tmp_path, approval_mode="full-auto")
    calls = lambda n: chat_stream([("slow_left", {"n": n}), ("quick_left", {"n": n})])  # noqa: E731

    async def rounds():
        async for e in session.submit(calls(0)):
            if isinstance(e, toolslot.CallStarted):
                break
        try:
            async for e in session.submit(calls(1)):
                if isinstance(e, toolslot.CallStarted):
                    raise LookupError("the caller's own error")
        except LookupError:
            pass
        # Closed by the caller: ended before aclose returns.
        events = session.submit(calls(2))
        async for e in events:
            if isinstance(e, toolslot.CallStarted):
                break
        await events.aclose()
        assert ("cancelled", 2) in seen, seen
        # Driven as async generators are (asend, athrow): thrown in, the round is ended too.
        events = session.submit(calls(3))
        assert isinstance(events, collections.abc.AsyncGenerator)
        while not isinstance(await events.asend(None), toolslot.CallStarted):
            pass
        with pytest.raises(LookupError, match="thrown in"):
            await events.athrow(LookupError("thrown in"))
        assert ("cancelled", 3) in seen, seen
        # A round another task is reading is not let go of by a caller that cannot close it.
        release = asyncio.Event()

        async def held_back():
            await release.wait()
            yield chat_stream([("quick_left", {"n": 4})])

        reading = session.submit(held_back())
        first = asyncio.ensure_future(reading.__anext__())
        for _ in range(5):
            await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match="already running"):
            await reading.aclose()
        # Still held by its reader: the next round is refused, not the held one ended.
        with pytest.raises(Exception, match="already running a round"):
            await session.submit(chat_stream([("quick_left", {"n": 5})])).__anext__()
        release.set()
        e = await first
        async for e in reading:
            pass
        assert isinstance(e, toolslot.RoundComplete) and not e.results[0].is_error, e
        return [e async for e in session.submit(chat_stream([("quick_left", {"n": 40})]))]

    events = asyncio.run(asyncio.wait_for(rounds(), 30))
    assert isinstance(events[-1], toolslot.RoundComplete), events
    assert [r.is_error for r in events[-1].results] == [False]
    assert {("cancelled", 0), ("cancelled", 1), ("cancelled", 2), ("cancelled", 3)} <= set(seen), seen
    assert ("quick", 4) in seen, seen
    for _ in session.submit_blocking(chat_stream([("quick_left", {"n": 5}), ("quick_left", {"n": 6})])):
        break
    events = list(session.submit_blocking(chat_stream([("quick_left", {"n": 7})])))
    assert isinstance(events[-1], toolslot.RoundComplete) and not events[-1].results[0].is_error, events
    session.close()


def test_a_round_left_at_its_approval_is_ended_and_runs_nothing(workspace, slot):
    # The caller stops reading at the question (approvals wait for ever by default): the
    # round is cancelled, its approval rejected, and the session's next round runs, on an
    # event loop and blocking alike; the command asked about never ran.
    session = slot.open_session(workspace=workspace, approval_mode="ask")
    stream = (STREAMS / "shell-approval.sse").read_bytes()

    async def rounds():
        async for e in session.submit(stream):
            if isinstance(e, toolslot.ApprovalRequired):
                break
        return [e async for e in session.submit(chat_stream([]))]

    events = asyncio.run(asyncio.wait_for(rounds(), 30))
    assert isinstance(events[-1], toolslot.RoundComplete), events

    def blocking(out):
        for e in session.submit_blocking(stream):
            if isinstance(e, toolslot.ApprovalRequired):
                break
        out.extend(session.submit_blocking(chat_stream([])))

    out: list = []
    thread = threading.Thread(target=blocking, args=(out,), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "a blocking round left at its approval never ended"
    assert isinstance(out[-1], toolslot.RoundComplete), out
    assert not (workspace / "made-by-the-model.txt").exists()
    session.close()


def test_a_tool_that_cannot_be_listed_is_refused_whole(tmp_path, slot):
    # A name no provider accepts fails closed: the error says why, and the model never sees
    # a tool of that name (or its sanitized form) that could not run.
    before = {t["name"] for t in slot.catalog()}
    with pytest.raises(toolslot.ConfigError, match="does not match"):

        @slot.tool(name="bad name!", capabilities=["read_only"])
        def bad() -> str:
            return "x"

    after = {t["name"] for t in slot.catalog()}
    assert after == before, after - before
    assert "bad name!" not in slot.tools
    session = slot.open_session(workspace=tmp_path)
    assert not {t["name"] for t in session.tools()} - before
    session.close()


def test_errors_are_typed_and_name_the_problem(tmp_path, slot):
    with pytest.raises(toolslot.ConfigError, match="unknown field `mood`"):
        toolslot.Slot({"approval": {"mood": "ask"}})
    with pytest.raises(toolslot.ConfigError, match="nope.toml"):
        toolslot.Slot(tmp_path / "nope.toml")
    with pytest.raises(toolslot.ConfigError, match="yolo"):
        slot.open_session(workspace=tmp_path, approval_mode="yolo")
    with pytest.raises(toolslot.ConfigError, match="not a folder"):
        slot.open_session(workspace=tmp_path / "missing")
    session = slot.open_session(workspace=tmp_path)
    with pytest.raises(toolslot.SessionError, match="no approval is waiting"):
        session.answer_blocking(3, "approve")
    # Indexes no call can have wait for nothing, like any other: no OverflowError.
    for index in (-1, 2**64, 10**30):
        with pytest.raises(toolslot.SessionError, match=f"no approval is waiting for call {index}"):
            session.answer_blocking(index, "approve")
    with pytest.raises(TypeError, match="or a call index"):
        session.answer_blocking(True, "approve")
    forged = toolslot.ApprovalRequired({"type": "approval_required", "index": 0, "id": "c", "request": -5})
    with pytest.raises(toolslot.SessionError, match="no approval question -5"):
        session.answer_blocking(forged, "approve")
    with pytest.raises(ValueError, match="unknown decision `maybe`"):
        session.answer_blocking(3, "maybe")
    assert issubclass(toolslot.ConfigError, toolslot.ToolslotError)
    assert issubclass(toolslot.ForkError, toolslot.ToolslotError)
    session.close()
    with pytest.raises(toolslot.SessionError):
        list(session.submit_blocking(b""))


def test_blocking_waits_release_the_gil(workspace, slot):
    # The response is fed by a thread that sleeps between pieces: if waiting for events held
    # the GIL, the feeder could never run and the round would never end.
    body = (STREAMS / "parallel-reads.sse").read_bytes()
    ticks = []

    def slow():
        for i in range(0, len(body), 200):
            ticks.append(time.monotonic())
            time.sleep(0.002)
            yield body[i : i + 200]

    session = slot.open_session(workspace=workspace)
    events = list(session.submit_blocking(slow()))
    assert len(ticks) > 5
    assert len(events[-1].results) == 4


def test_a_forked_child_is_refused(workspace, slot):
    session = slot.open_session(workspace=workspace)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        try:
            slot.open_session(workspace=workspace)
            message = "no error"
        except toolslot.ForkError as e:
            message = str(e)
        except BaseException as e:  # anything else is a failure to report
            message = f"{type(e).__name__}: {e}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        message = f.read()
    os.waitpid(pid, 0)
    assert "cannot be used in process" in message and "fork" in message, message
    # The parent goes on as before.
    assert list(session.submit_blocking(chat_stream([])))[-1].results == []


def test_closing_twice_is_no_error(tmp_path):
    slot = toolslot.Slot(QUIET)
    with slot.open_session(workspace=tmp_path) as session:
        session.close()
    session.close()
    with pytest.raises(toolslot.SessionError, match="no open session"):
        list(session.submit_blocking(chat_stream([])))
    other = slot.open_session(workspace=tmp_path)
    slot.close()
    other.close()
    slot.close()
    with pytest.raises(toolslot.StoppedError):
        list(other.submit_blocking(chat_stream([])))


def test_a_closed_slot_says_so(tmp_path):
    slot = toolslot.Slot(QUIET)
    session = slot.open_session(workspace=tmp_path)
    slot.close()
    with pytest.raises(toolslot.StoppedError, match="runtime has stopped"):
        slot.open_session(workspace=tmp_path)
    with pytest.raises(toolslot.StoppedError):
        list(session.submit_blocking(chat_stream([])))
