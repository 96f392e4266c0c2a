"""A whole agent loop with a provider's own SDK and toolslot embedded in Python.

The official `anthropic` (or `openai`) SDK streams each response from a local server that
stands in for the provider by replaying recorded streams; the raw bytes go through toolslot,
which runs the calls (asking on the terminal where a call needs approval); the results go
back, in the provider's own format, as the next request. The server keeps every request as
the SDK serialized it, so a test can check what the model would have been sent.

    pip install ./python anthropic openai
    python examples/python/agent_loop.py --provider anthropic --workspace /tmp/ws \
        examples/streams/edit-1-read.sse examples/streams/edit-2-edit.sse

Usage: agent_loop.py [--provider anthropic|openai] [--workspace DIR] [--approve ask|yes|no] STREAM...
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Sequence

import toolslot

FINAL_ANTHROPIC = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_end","type":"message","role":"assistant",'
    '"content":[],"model":"recorded","stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Done."}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)
FINAL_OPENAI = (
    'data: {"id":"chatcmpl-end","object":"chat.completion.chunk","created":1,"model":"recorded","choices":[{"index":0,'
    '"delta":{"role":"assistant","content":"Done."},"finish_reason":null}]}\n\n'
    'data: {"id":"chatcmpl-end","object":"chat.completion.chunk","created":1,"model":"recorded","choices":[{"index":0,'
    '"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


class RecordedProvider:
    """A local HTTP server answering each request with the next recorded stream (then a final
    answer that ends the turn), keeping every request body."""

    def __init__(self, streams: Sequence[bytes], final: str) -> None:
        self.streams = list(streams)
        self.final = final.encode()
        self.requests: List[Dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                provider.requests.append({"path": self.path, "body": json.loads(body)})
                reply = provider.streams.pop(0) if provider.streams else provider.final
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()


def decide(event: toolslot.ApprovalRequired, approve: str) -> str:
    if approve in ("yes", "no"):
        return "approve" if approve == "yes" else "reject"
    answer = input(f"approve {event.name} {json.dumps(event.input)}? [y]es / [s]ession / [N]o: ").strip().lower()
    return {"y": "approve", "yes": "approve", "s": "approve_for_session"}.get(answer, "reject")


def run_round(session: toolslot.Session, raw: Any, approve: str):
    """One response through toolslot: the calls as the model made them, and round_complete."""
    calls: List[toolslot.CallAssembled] = []
    done = None
    for event in session.submit_blocking(raw):
        if isinstance(event, toolslot.CallAssembled):
            calls.append(event)
        elif isinstance(event, toolslot.ApprovalRequired):
            session.answer_blocking(event, decide(event, approve))
        elif isinstance(event, toolslot.RoundComplete):
            done = event
    return calls, done


def anthropic_loop(url: str, slot: toolslot.Slot, session: toolslot.Session, task: str, approve: str) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=url, api_key="recorded", max_retries=0)
    messages: List[Dict[str, Any]] = [{"role": "user", "content": task}]
    while True:
        with client.messages.with_streaming_response.create(
            model="claude-recorded", max_tokens=1024, messages=messages, tools=slot.catalog("anthropic"), stream=True
        ) as response:
            calls, done = run_round(session, response.iter_bytes(), approve)
        content: List[Dict[str, Any]] = [{"type": "text", "text": done.text}] if done.text else []
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.input} for c in calls]
        messages.append({"role": "assistant", "content": content})
        print(f"assistant: {done.text.strip()} ({len(calls)} calls, {done.stop_reason})")
        if done.stop_reason != "tool_use":
            return
        messages.extend(done.as_messages("anthropic"))


def openai_loop(url: str, slot: toolslot.Slot, session: toolslot.Session, task: str, approve: str) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="recorded", max_retries=0)
    messages: List[Dict[str, Any]] = [{"role": "user", "content": task}]
    while True:
        with client.chat.completions.with_streaming_response.create(
            model="gpt-recorded", messages=messages, tools=slot.catalog("openai"), stream=True
        ) as response:
            calls, done = run_round(session, response.iter_bytes(), approve)
        assistant: Dict[str, Any] = {"role": "assistant", "content": done.text or None}
        if calls:
            assistant["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.input)}} for c in calls
            ]
        messages.append(assistant)
        print(f"assistant: {done.text.strip()} ({len(calls)} calls, {done.stop_reason})")
        if done.stop_reason != "tool_use":
            return
        messages.extend(done.as_messages("openai-chat"))


def run(provider: str, streams: Sequence[str], workspace: str, approve: str, config: Any = None) -> RecordedProvider:
    """Runs the loop over recorded ``streams``; the stand-in provider, with the requests it got."""
    recorded = [open(s, "rb").read() for s in streams]
    server = RecordedProvider(recorded, FINAL_ANTHROPIC if provider == "anthropic" else FINAL_OPENAI)
    try:
        with toolslot.Slot(config) as slot:
            session = slot.open_session(workspace=workspace, approval_mode="ask")
            loop = anthropic_loop if provider == "anthropic" else openai_loop
            loop(server.url, slot, session, "Tidy up the workspace.", approve)
    finally:
        server.close()
    return server


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("streams", nargs="+")
    p.add_argument("--provider", choices=["anthropic", "openai"], default="anthropic")
    p.add_argument("--workspace", default=".")
    p.add_argument("--approve", choices=["ask", "yes", "no"], default="ask")
    args = p.parse_args()
    run(args.provider, args.streams, args.workspace, args.approve)


if __name__ == "__main__":
    main()
