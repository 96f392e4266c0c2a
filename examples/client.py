"""A client of `toolslot serve` in Python (httpx): stream a recorded model response into a
round, print the pipeline events as they arrive, and answer the approval requests.

    cargo run --release -- serve &
    python3 examples/client.py examples/streams/shell-approval.sse --approve

Usage: client.py STREAM [--approve|--reject] [--url URL] [--token TOKEN] [--workspace DIR]
"""
import argparse
import json
import os
import threading

import httpx


def chunks(path, size=256):
    # The body is uploaded as it is read (chunked), as a proxy would forward a live response.
    with open(path, "rb") as f:
        while block := f.read(size):
            yield block


def main():
    p = argparse.ArgumentParser()
    p.add_argument("stream")
    p.add_argument("--url", default="http://127.0.0.1:7878")
    p.add_argument("--token", default=os.environ.get("TOOLSLOT_TOKEN", ""))
    p.add_argument("--workspace", default=os.path.join(os.path.dirname(__file__), "workspace"))
    group = p.add_mutually_exclusive_group()
    group.add_argument("--approve", action="store_true")
    group.add_argument("--reject", action="store_true")
    a = p.parse_args()
    headers = {"Authorization": f"Bearer {a.token}"} if a.token else {}
    decision = "approve" if a.approve else "reject"
    with httpx.Client(base_url=a.url, headers=headers, timeout=None) as client:
        r = client.post("/v1/sessions", json={"workspace": os.path.abspath(a.workspace), "approval_mode": "ask"})
        r.raise_for_status()
        session = r.json()["session_id"]
        print(f"session {session}")
        with client.stream("POST", f"/v1/sessions/{session}/rounds", content=chunks(a.stream)) as resp:
            resp.raise_for_status()
            for line in resp.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[len("data: "):])
                print(json.dumps(event)[:200])
                if event["type"] == "approval_required":
                    # Answered from another connection while this one keeps streaming.
                    # `request` names this question: the answer can never reach a later one.
                    index, request = event["index"], event["request"]
                    threading.Thread(
                        target=lambda: client.post(
                            f"/v1/sessions/{session}/approvals/{index}", json={"decision": decision, "request": request}
                        ).raise_for_status()
                    ).start()
                if event["type"] == "round_complete":
                    for result in event["results"]:
                        print(f"result #{result['index']} {result['name']} error={result['is_error']}")
        client.delete(f"/v1/sessions/{session}")


if __name__ == "__main__":
    main()
