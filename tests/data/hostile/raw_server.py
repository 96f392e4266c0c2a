"""A hostile MCP server speaking raw JSON-RPC over stdio (no SDK), for toolslot's tests.

It answers what the official SDKs would never send: a tool list holding malformed entries,
answers larger than any transport's line limit, JSON-RPC errors carrying instructions, a flood
of stderr, a process that ignores stdin's end and SIGTERM and leaves a child behind.

  --name NAME          the server's name in its answers (default "raw")
  --listing FILE       the tools/list answer's `tools` array, as JSON (default: the tools below)
  --log FILE           every tools/call's name and arguments are appended here, one JSON a line
  --pids DIR           writes its pid to DIR/NAME.pid and starts `sleep 300` (pid in
                       DIR/NAME-child.pid), which only a kill of its process group ends
  --ignore-eof         keeps running after stdin ends, and ignores SIGTERM
  --die TEXT           writes TEXT to stderr and exits at once (a server that cannot start)
  --die-if FILE        does the same, but only once FILE exists (see the `crash` tool)

tools/call by tool name: `big` answers a text of `bytes` bytes on one line; `big_id_last`
does the same with the id at the end of the line; `rpc_error` answers a JSON-RPC error whose
message is `message`; `echo` answers "NAME:<arguments>"; `misshapen` answers a message that is
both a result and an error; `flood` writes `bytes` bytes to stderr without a newline, then
answers; `crash` creates `file`, writes `stderr` to stderr and exits (so that, with --die-if,
the server cannot start again); anything else answers "ok".
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="raw")
    parser.add_argument("--listing")
    parser.add_argument("--log")
    parser.add_argument("--pids")
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--die")
    parser.add_argument("--die-if")
    args = parser.parse_args()

    if args.die_if is not None and os.path.exists(args.die_if):
        with open(args.die_if) as f:
            args.die = f.read()
    if args.die is not None:
        sys.stderr.write(args.die + "\n")
        sys.stderr.flush()
        sys.exit(3)
    if args.ignore_eof:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.pids:
        with open(os.path.join(args.pids, f"{args.name}.pid"), "w") as f:
            f.write(str(os.getpid()))
        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(args.pids, f"{args.name}-child.pid"), "w") as f:
            f.write(str(child.pid))
    behaviours = ["ok", "big", "big_id_last", "rpc_error", "echo", "misshapen", "flood", "crash"]
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in behaviours]
    if args.listing:
        with open(args.listing) as f:
            tools = json.load(f)

    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, mid = msg.get("method"), msg.get("id")
        if mid is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": mid, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": args.name, "version": "0"},
            }})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools}})
        elif method == "tools/call":
            name = msg["params"]["name"]
            arguments = msg["params"].get("arguments") or {}
            if args.log:
                with open(args.log, "a") as f:
                    f.write(json.dumps({"server": args.name, "tool": name, "arguments": arguments}) + "\n")
            if name in ("big", "big_id_last"):
                text = "b" * int(arguments.get("bytes", 50_000_000))
                result = '{"content":[{"type":"text","text":"' + text + '"}]}'
                if name == "big":
                    out = '{"jsonrpc":"2.0","id":' + json.dumps(mid) + ',"result":' + result + "}\n"
                else:
                    out = '{"jsonrpc":"2.0","result":' + result + ',"id":' + json.dumps(mid) + "}\n"
                sys.stdout.write(out)
                sys.stdout.flush()
            elif name == "rpc_error":
                send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32000, "message": arguments.get("message", "no")}})
            elif name == "flood":
                left = int(arguments.get("bytes", 0))
                chunk = "f" * 65536
                while left > 0:
                    sys.stderr.write(chunk[: min(left, len(chunk))])
                    left -= len(chunk)
                sys.stderr.flush()
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "flooded"}]}})
            elif name == "crash":
                with open(arguments["file"], "w") as f:
                    f.write(arguments["stderr"])
                sys.stderr.write(arguments["stderr"] + "\n")
                sys.stderr.flush()
                os._exit(4)
            elif name == "misshapen":
                send({"jsonrpc": "2.0", "id": mid, "result": {}, "error": {"code": 1, "message": "both"}})
            elif name == "echo":
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": f"{args.name}:{json.dumps(arguments)}"}]}})
            else:
                send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "ok"}]}})
        else:
            send({"jsonrpc": "2.0", "id": mid, "result": {}})

    if args.ignore_eof:
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
