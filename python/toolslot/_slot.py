"""``Slot`` and ``Session``: the embedded runtime, as a Python agent service holds it."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
from dataclasses import dataclass
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Coroutine, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _native
from ._chunks import Chunks, feed_async, feed_blocking
from ._events import ApprovalRequired, Event, RoundComplete, Subagent, event_from_json
from ._schema import description_of, schema_of

Decision = str
"""``approve``, ``approve_for_session``, ``approve_for_project``, ``reject`` or ``reject_for_session``."""

_NOTHING, _EVENT, _CALL, _END = 0, 1, 2, 3


@dataclass(frozen=True)
class PythonTool:
    """A function registered with ``@slot.tool``."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    capabilities: Tuple[str, ...]
    schema: Dict[str, Any]
    description: str
    blocking: bool = False


def _text(value: Any) -> str:
    """What a tool returned, as the text the model reads."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _failure(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class Slot:
    """The toolslot runtime embedded in this process: its tools, its config, its sessions.

    ``config`` is a path to a TOML file or a dict of the same tables; both overlay the built-in
    defaults, and ``TOOLSLOT_*`` variables overlay both, as for the ``toolslot`` binary.
    Raises ``ConfigError`` when the config does not load.
    """

    def __init__(self, config: Union[str, "os.PathLike[str]", Dict[str, Any], None] = None) -> None:
        if isinstance(config, dict):
            self._native = _native.NativeSlot(config_json=json.dumps(config))
        elif config is None:
            self._native = _native.NativeSlot()
        else:
            self._native = _native.NativeSlot(path=os.fspath(config))
        self._tools: Dict[str, PythonTool] = {}
        self._closed = False

    def open_session(
        self,
        workspace: Union[str, "os.PathLike[str]", None] = None,
        approval_mode: Optional[str] = None,
        dialect: Optional[str] = None,
    ) -> "Session":
        """Opens a session on ``workspace`` (default: the current folder) in ``approval_mode``
        (``read-only``, ``ask``, ``auto-edit``, ``full-auto``; default: the config's).
        ``dialect`` fixes the provider format of its rounds (default: detected)."""
        ws = os.fspath(workspace) if workspace is not None else None
        sid = self._native.open_session(ws, approval_mode, dialect)
        return Session(self, sid, approval_mode or self._native.default_mode())

    def catalog(self, format: str = "anthropic") -> List[Dict[str, Any]]:
        """The tools as the provider's request lists them: ``anthropic`` or ``openai``."""
        return json.loads(self._native.catalog(format))

    def metadata(self) -> List[Dict[str, Any]]:
        """Every tool's metadata: ``name``, ``read_only``, ``parallel_safe``,
        ``static_approval`` (``auto``, ``suggest``, ``required``, ``refused``), …"""
        return json.loads(self._native.metadata())

    def tool(
        self,
        fn: Optional[Callable[..., Any]] = None,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        capabilities: Optional[Sequence[str]] = None,
        schema: Optional[Dict[str, Any]] = None,
        blocking: bool = False,
    ) -> Any:
        """Registers a function (sync or async) as a tool, governed as a built-in is.

        ``capabilities`` (``read_only``, ``writes_files``, ``executes_code``, ``network``,
        ``interactive``, ``requires_approval``) decide approval and parallelism; without them
        the tool is ``requires_approval``, since what was not declared is unknown. The schema
        comes from the type hints unless given. An exception the function raises becomes the
        call's ``tool_error`` result. Raises ``ConfigError`` for a taken name, a bad schema or
        an unknown capability.

        ``blocking=True`` says a sync function waits (on the network, a disk, a lock): in an
        asyncio round (``submit``) it then runs on the loop's default executor, so the loop
        serves its other tasks meanwhile and such calls of a batch overlap; otherwise a sync
        function runs on the loop between events (cheapest for quick work). In
        ``submit_blocking`` every tool runs on the calling thread either way.
        """

        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            caps = tuple(capabilities) if capabilities is not None else ("requires_approval",)
            tool = PythonTool(
                name=name or f.__name__,
                fn=f,
                is_async=inspect.iscoroutinefunction(f),
                capabilities=caps,
                schema=schema if schema is not None else schema_of(f),
                description=description or description_of(f),
                blocking=blocking and not inspect.iscoroutinefunction(f),
            )
            self._native.add_tool(tool.name, tool.description, json.dumps(tool.schema), list(caps))
            self._tools[tool.name] = tool
            return f

        return register(fn) if fn is not None else register

    @property
    def tools(self) -> Dict[str, PythonTool]:
        """The Python tools registered so far, by name."""
        return dict(self._tools)

    def close(self) -> None:
        """Stops the runtime: sessions closed (ledgers sealed), MCP servers stopped. Closing it
        again does nothing."""
        self._native.close()
        self._closed = True

    def __enter__(self) -> "Slot":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


_LEFT = "not run: the round's caller stopped reading it before this call"


def _abandon(native: Any, session_id: str, rnd: Any) -> None:
    """Ends a round its caller left early (an interrupt, an exception, a loop that stopped
    reading): it is cancelled (an approval it waits for is rejected, a running call stopped),
    its host calls are answered with an error, and it completes, so the session is free for
    the next round the moment the caller goes on."""
    try:
        native.cancel_round(session_id)
        while True:
            kind, item = rnd.next()
            if kind == _END:
                return
            if kind == _CALL:
                item.finish_err(_LEFT)
    except BaseException:
        # A runtime that stopped has no round left to end.
        return


class _Reader:
    """Whether the caller still holds a round's iterator."""

    __slots__ = ("left",)

    def __init__(self) -> None:
        self.left = False


class _Events(AsyncGenerator[Event, None]):
    """The iterator ``Session.submit`` returns: the round's async generator (an
    ``AsyncGenerator`` to ``isinstance``, with ``asend``, ``athrow`` and ``aclose``), and a word
    to the session once the caller lets go of it (a generator left by ``break`` is closed only
    later, by the event loop)."""

    def __init__(self, gen: AsyncGenerator[Event, None], reader: _Reader) -> None:
        self._gen = gen
        self._reader = reader

    def __aiter__(self) -> "_Events":
        return self

    def __anext__(self) -> Coroutine[Any, Any, Event]:
        return self._gen.__anext__()

    def asend(self, value: None) -> Coroutine[Any, Any, Event]:
        """As an async generator's: a round takes nothing sent in, so this is ``__anext__``."""
        return self._gen.asend(value)

    def athrow(self, *args: Any) -> Coroutine[Any, Any, Event]:
        """As an async generator's: the exception is raised where the round waits (and comes
        back out), and the round is ended as one left early is."""
        self._letting_go()
        return self._gen.athrow(*args)

    async def aclose(self) -> None:
        """Ends the round now if it has not ended (as leaving it does, later)."""
        self._letting_go()
        await self._gen.aclose()

    def _letting_go(self) -> None:
        # A round another task is reading right now is not let go of: the generator refuses
        # this caller ("already running"), and that reader still holds the round.
        if not getattr(self._gen, "ag_running", False):
            self._reader.left = True

    def __del__(self) -> None:
        self._reader.left = True


class _AsyncRound:
    """A round driven on an event loop: the loop watches the round's wake pipe, so waiting
    costs no thread."""

    def __init__(self, session: "Session", loop: asyncio.AbstractEventLoop, rnd: Any, chunks: Chunks, reader: _Reader) -> None:
        self.session = session
        self.loop = loop
        self.reader = reader
        self.rnd = rnd
        self.feeder: Optional["asyncio.Task[None]"] = None
        if isinstance(chunks, (bytes, bytearray, memoryview, str, list, tuple)):
            # All there already: fed now, not by a task (a turn of the loop before the first
            # event).
            feed_blocking(rnd, chunks)
        else:
            self.feeder = loop.create_task(feed_async(rnd, chunks))
        self.running: "set[asyncio.Task[None]]" = set()
        self.woken = asyncio.Event()
        self.fd = rnd.wake_fd()
        self.ended = False
        self.abandoned = False
        self._abandoning: Optional["asyncio.Task[None]"] = None

        def wake() -> None:
            rnd.drain_wake()
            self.woken.set()

        loop.add_reader(self.fd, wake)

    async def next_batch(self) -> List[Tuple[int, Any]]:
        """What the round has ready, waiting for something when nothing is."""
        while True:
            batch = self.rnd.ready()
            if batch:
                return batch
            self.woken.clear()
            # Looked at again after clearing: what came between is not missed.
            batch = self.rnd.ready()
            if batch:
                return batch
            await self.woken.wait()

    def start(self, tool_run: Any) -> None:
        task = self.loop.create_task(tool_run)
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    def can_be_ended_here(self) -> bool:
        """Whether this loop can still end it: its own loop runs now, and no attempt failed."""
        failed = self._abandoning is not None and self._abandoning.done() and (self._abandoning.cancelled() or self._abandoning.exception() is not None)
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            here = False
        return here and not failed and not self.loop.is_closed()

    async def abandon(self) -> None:
        """Ends the round once, whoever asks first (the iterator closed, the next round)."""
        self.abandoned = True
        if self._abandoning is None:
            self._abandoning = self.loop.create_task(self._end_now())
        if not self._abandoning.done():
            # Shielded: a caller cancelled while it waits does not leave the round half ended.
            await asyncio.shield(self._abandoning)

    def _stop_feeding(self) -> None:
        self.rnd.finish()
        if self.feeder is not None and not self.feeder.done():
            self.feeder.cancel()

    async def _end_now(self) -> None:
        self._stop_feeding()
        try:
            # Rejects what it waits for and stops what runs natively, so it completes soon.
            self.session._slot._native.cancel_round(self.session.id)
        except Exception:
            self.ended = True
            return
        tasks = list(self.running)
        for task in tasks:
            # Each answers its call with an error as it is cancelled.
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            while not self.ended:
                for kind, item in await self.next_batch():
                    if kind == _END:
                        self.ended = True
                        break
                    if kind == _CALL:
                        item.finish_err(_LEFT)
        except Exception:
            # A runtime that stopped has no round left to end.
            self.ended = True

    def close(self) -> None:
        try:
            self.loop.remove_reader(self.fd)
            self._stop_feeding()
        except Exception:
            # A loop already closed holds nothing of it.
            return


class Session:
    """A conversation's session: its rounds, approvals and catalog."""

    def __init__(self, slot: Slot, session_id: str, approval_mode: str) -> None:
        self._slot = slot
        self.id = session_id
        self.approval_mode = approval_mode
        """The session's approval mode."""
        self._closed = False
        # The asyncio round in flight, until it ends: one its caller left is ended before the
        # next starts.
        self._async_round: Optional[_AsyncRound] = None

    @property
    def slot(self) -> Slot:
        """The slot the session belongs to."""
        return self._slot

    def tools(self, format: str = "anthropic") -> List[Dict[str, Any]]:
        """What this session's model sees now (``anthropic`` or ``openai``)."""
        return json.loads(self._slot._native.catalog(format, self.id))

    @staticmethod
    def _event(payload: Tuple[str, str, Any]) -> Event:
        return event_from_json(*payload)

    def _tool(self, call: Any) -> Tuple[PythonTool, Optional[Dict[str, Any]]]:
        tool = self._slot._tools[call.name]
        try:
            return tool, json.loads(call.input_json)
        except ValueError as e:
            call.finish_err(_failure(e))
            return tool, None

    def _run_sync(self, call: Any) -> None:
        tool, args = self._tool(call)
        if args is None:
            return
        try:
            out = asyncio.run(tool.fn(**args)) if tool.is_async else tool.fn(**args)
            # Inside: what cannot be written as text (a circular structure) is the call's error.
            text = _text(out)
        except Exception as e:
            call.finish_err(_failure(e))
        except BaseException as e:
            # SystemExit, KeyboardInterrupt: the call still gets its one result, then they go on.
            call.finish_err(f"the tool was interrupted: {_failure(e)}")
            raise
        else:
            call.finish_ok(text)

    async def _run_async(self, call: Any) -> None:
        tool, args = self._tool(call)
        if args is None:
            return
        try:
            if tool.is_async:
                out = await tool.fn(**args)
            elif tool.blocking:
                out = await asyncio.get_running_loop().run_in_executor(None, functools.partial(tool.fn, **args))
            else:
                out = tool.fn(**args)
            text = _text(out)
        except Exception as e:
            call.finish_err(_failure(e))
        except BaseException as e:
            # Cancelled with its round, or interrupted: the call still gets its one result.
            call.finish_err(f"the tool was interrupted: {_failure(e)}")
            raise
        else:
            call.finish_ok(text)

    def submit_blocking(self, chunks: Chunks, dialect: Optional[str] = None) -> Iterator[Event]:
        """Runs a round of the provider's raw response bytes (bytes, or an iterable of them),
        yielding its events as they happen; waits with the GIL released. Python tools run
        on this thread, between events."""
        rnd = self._slot._native.submit(self.id, dialect)
        feed_blocking(rnd, chunks)
        ended = False
        try:
            while True:
                kind, item = rnd.next()
                if kind == _END:
                    ended = True
                    return
                if kind == _CALL:
                    self._run_sync(item)
                else:
                    yield self._event(item)
        finally:
            rnd.finish()
            if not ended:
                _abandon(self._slot._native, self.id, rnd)

    def submit(self, chunks: Chunks, dialect: Optional[str] = None) -> AsyncGenerator[Event, None]:
        """Runs a round of the provider's raw response (bytes, an iterable or an async iterable
        of them), yielding its events as they happen. Async Python tools run as tasks of this
        event loop; sync ones run on it between events, or on its default executor when
        registered with ``blocking=True``.

        A round its caller leaves early (``break``, an exception) is ended when its iterator is
        closed, or at the latest when the session's next round starts: its running tools are
        cancelled and its remaining calls answered with an error, each its one result."""
        reader = _Reader()
        return _Events(self._submit(chunks, dialect, reader), reader)

    async def _submit(self, chunks: Chunks, dialect: Optional[str], reader: "_Reader") -> AsyncGenerator[Event, None]:
        last = self._async_round
        if last is not None and last.reader.left and not last.ended:
            # An ``async for`` left by ``break`` closes its iterator only once the loop gets to
            # it, after the caller's next line: that round is ended here first. One of a loop
            # that is gone is left to the native layer (which refuses a round still running).
            if last.can_be_ended_here():
                await last.abandon()
            if self._async_round is last:
                self._async_round = None
        loop = asyncio.get_running_loop()
        state = _AsyncRound(self, loop, self._slot._native.submit(self.id, dialect), chunks, reader)
        self._async_round = state
        try:
            while not state.abandoned:
                for kind, item in await state.next_batch():
                    if kind == _END:
                        state.ended = True
                        return
                    if kind == _CALL:
                        tool = self._slot._tools[item.name]
                        if not tool.is_async and not tool.blocking:
                            # A sync tool runs here at once: a task would only add a turn of
                            # the loop before it.
                            self._run_sync(item)
                            continue
                        state.start(self._run_async(item))
                    elif kind == _EVENT:
                        yield self._event(item)
        finally:
            try:
                if not state.ended:
                    await state.abandon()
            finally:
                state.close()
                if self._async_round is state:
                    self._async_round = None

    def _target(self, request: Union[ApprovalRequired, Subagent, int]) -> Tuple[str, int, Optional[int]]:
        if isinstance(request, Subagent) and isinstance(request.event, ApprovalRequired):
            session, index, number = request.session, request.event.index, request.event.request
        elif isinstance(request, ApprovalRequired):
            session, index, number = self.id, request.index, request.request
        elif isinstance(request, int) and not isinstance(request, bool):
            session, index, number = self.id, request, None
        else:
            raise TypeError("answer an approval_required event (or a subagent event holding one), or a call index")
        # An index no call can have (negative, past 64 bits) waits for nothing: the same
        # error as any other index nothing waits at, not the native layer's OverflowError.
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**63:
            raise _native.SessionError(f"no approval is waiting for call {index!r} in session `{session}`")
        if number is not None and (not isinstance(number, int) or isinstance(number, bool) or not 0 <= number < 2**64):
            raise _native.SessionError(f"no approval question {number!r} is waiting in session `{session}`")
        return session, index, number

    def answer_blocking(self, request: Union[ApprovalRequired, Subagent, int], decision: Decision) -> None:
        """Answers an approval request. Raises ``SessionError`` when nothing waits for it."""
        session, index, number = self._target(request)
        self._slot._native.answer(session, index, decision, number)

    async def answer(self, request: Union[ApprovalRequired, Subagent, int], decision: Decision) -> None:
        """As ``answer_blocking``, without holding up the event loop."""
        session, index, number = self._target(request)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._slot._native.answer, session, index, decision, number)

    def close(self) -> None:
        """Closes the session: a running round is cancelled, its ledger sealed. Closing it again,
        or after its slot was closed (which closed it), does nothing, as with a file: ``with``
        around a session closed inside it is no error."""
        if self._closed or self._slot._closed:
            return
        self._slot._native.close_session(self.id)
        self._closed = True

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
