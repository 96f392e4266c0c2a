"""A round of 8 no-op calls from Python (blocking and asyncio) against the same round driven
from Rust through the same embedded front end, side by side in one process; and the OpenAI
Agents SDK running 8 no-op function tools itself.

    cargo build --release -p toolslot-python
    ln -sf ../../target/release/lib_native.so python/toolslot/_native.abi3.so
    PYTHONPATH=python .test-deps/venv/bin/python benches/python_round.py [--rounds 2000]

Every variant runs the same round (OpenAI Chat bytes calling `noop` 8 times, read-only, so
the calls run in parallel), in a session of the same slot, interleaved in batches so that a
change of machine load falls on all of them alike. The figure is the median of the batches'
per-round means.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time

import toolslot
from toolslot import _native

CALLS = 8


def body() -> bytes:
    chunks = []
    for n in range(CALLS):
        delta = {"tool_calls": [{"index": n, "id": f"call_{n}", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]}
        chunks.append({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def sdk_runner(rounds: int) -> float:
    """The OpenAI Agents SDK calling 8 no-op function tools of its own: one Runner.run with a
    scripted model (8 calls, then an answer), per round."""
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)
    calls = [
        ResponseFunctionToolCall(arguments="{}", call_id=f"call_{n}", name=f"noop{n}", type="function_call", id=f"fc_{n}", status="completed")
        for n in range(CALLS)
    ]
    answer = ResponseOutputMessage(
        id="m", content=[ResponseOutputText(text="ok", type="output_text", annotations=[])], role="assistant", status="completed", type="message"
    )

    class Scripted(Model):
        def __init__(self) -> None:
            self.n = 0

        async def get_response(self, *args, **kwargs):
            self.n += 1
            return ModelResponse(output=calls if self.n % 2 else [answer], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError

    def make(n):
        @function_tool(name_override=f"noop{n}")
        def noop() -> str:
            """Does nothing."""
            return ""

        return noop

    agent = Agent(name="bench", instructions="x", model=Scripted(), tools=[make(n) for n in range(CALLS)])

    async def run() -> float:
        start = time.perf_counter()
        for _ in range(rounds):
            await Runner.run(agent, "go")
        return time.perf_counter() - start

    return asyncio.run(run())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2000, help="rounds per variant, in batches of 100")
    args = p.parse_args()
    batch = 100
    ws = tempfile.mkdtemp()
    config = {"audit": {"ledger_dir": ""}, "mcp": {"tool_cache_dir": ""}, "loop_guard": {"exempt": ["noop"]}}
    slot = toolslot.Slot(config)

    @slot.tool(capabilities=["read_only"])
    def noop() -> str:
        """Does nothing."""
        return ""

    raw = body()
    rust, blocking, asyncio_s = (slot.open_session(workspace=ws) for _ in range(3))

    def run_blocking(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            for _event in blocking.submit_blocking(raw):
                pass
        return time.perf_counter() - start

    async def run_async(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            async for _event in asyncio_s.submit(raw):
                pass
        return time.perf_counter() - start

    # Warm-up: every path once, so first-use costs (threads, caches) are not measured.
    _native.bench_rust_rounds(slot._native, rust.id, raw, 50)
    run_blocking(50)
    asyncio.run(run_async(50))
    sdk_runner(20)

    per = {"rust": [], "blocking": [], "asyncio": [], "sdk": []}
    for _ in range(max(1, args.rounds // batch)):
        per["rust"].append(_native.bench_rust_rounds(slot._native, rust.id, raw, batch) / batch)
        per["blocking"].append(run_blocking(batch) / batch)
        per["asyncio"].append(asyncio.run(run_async(batch)) / batch)
        per["sdk"].append(sdk_runner(batch // 4) / (batch // 4))
    median = {k: statistics.median(v) for k, v in per.items()}
    base = median["rust"]
    print(f"{CALLS} no-op calls a round, {args.rounds} rounds a variant, median of batch means (python {sys.version.split()[0]})")
    print("| variant | per round | ÷ Rust |")
    print("|---|---|---|")
    for name, label in [
        ("rust", "Rust, through the embedded front end (host calls answered in Rust)"),
        ("blocking", "Python, `submit_blocking` (no-op Python tool)"),
        ("asyncio", "Python, `async for … in submit` (no-op Python tool)"),
        ("sdk", "OpenAI Agents SDK, 8 no-op `function_tool`s of its own (one `Runner.run`)"),
    ]:
        print(f"| {label} | {median[name] * 1e6:.1f} µs | {median[name] / base:.2f}× |")
    slot.close()


if __name__ == "__main__":
    main()
