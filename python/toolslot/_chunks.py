"""Feeding a round: the provider's raw bytes, however the host holds them."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterable, Iterable, Union

from . import _native

Chunks = Union[bytes, bytearray, memoryview, str, Iterable[Any], AsyncIterable[Any]]


def _as_bytes(chunk: Any) -> bytes:
    if isinstance(chunk, (bytes, bytearray, memoryview)):
        return bytes(chunk)
    if isinstance(chunk, str):
        return chunk.encode()
    raise TypeError(f"a round's chunks are bytes (or str), not {type(chunk).__name__}")


def _feed_sync(round: _native.NativeRound, chunks: Iterable[Any]) -> None:
    try:
        for chunk in chunks:
            round.push(_as_bytes(chunk))
    except BaseException as e:  # the host's stream failed: the round reports it and ends
        round.fail(f"reading the response failed: {type(e).__name__}: {e}")
        return
    round.finish()


def feed_blocking(round: _native.NativeRound, chunks: Chunks) -> None:
    """Bytes go in at once; an iterable is read on a thread of its own, so that a response
    still streaming does not keep the caller from answering approvals."""
    if isinstance(chunks, (bytes, bytearray, memoryview, str)):
        round.push(_as_bytes(chunks))
        round.finish()
    elif isinstance(chunks, (list, tuple)):
        _feed_sync(round, chunks)
    elif hasattr(chunks, "__aiter__"):
        raise TypeError("submit_blocking takes bytes or an iterable of bytes; use `async for … in session.submit(…)` for an async iterable")
    else:
        threading.Thread(target=_feed_sync, args=(round, chunks), name="toolslot-feed", daemon=True).start()


async def feed_async(round: _native.NativeRound, chunks: Chunks) -> None:
    """As ``feed_blocking``, on the event loop: an async iterable is read by a task, a
    blocking iterable by a thread."""
    if hasattr(chunks, "__aiter__"):
        try:
            async for chunk in chunks:  # type: ignore[union-attr]
                round.push(_as_bytes(chunk))
        except asyncio.CancelledError:
            round.fail("reading the response was cancelled")
            raise
        except BaseException as e:
            round.fail(f"reading the response failed: {type(e).__name__}: {e}")
            return
        round.finish()
    else:
        feed_blocking(round, chunks)  # type: ignore[arg-type]
