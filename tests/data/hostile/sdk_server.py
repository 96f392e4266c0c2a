"""A hostile MCP server written with the official Python SDK (stdio), for toolslot's tests.

  --name NAME          the server's name (its answers say it)
  --tools A,B          tools to offer, each `echo(text)` answering "NAME:TOOL:text"
  --log FILE           every call's server, tool and text are appended here, one JSON a line
  --pids DIR           writes its pid to DIR/NAME.pid and starts `sleep 300` (DIR/NAME-child.pid)
  --ignore-eof         keeps running once stdin ends, ignoring SIGTERM (as servers with a
                       background thread do)
  --slow               also offers `slow(seconds)`, which sleeps and answers "done"; with --log,
                       it logs `started`, then `finished` or `cancelled` (a `notifications/cancelled`
                       from the client interrupts it)

Two of these configured as `a` offering `b__c` and `a__b` offering `c` would both be called
`a__b__c` by a naive client: the log shows which server a call reached.
"""

import argparse
import json
import os
import signal
import subprocess
import time

from mcp.server.mcpserver import MCPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--tools", default="echo")
    parser.add_argument("--log")
    parser.add_argument("--pids")
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--slow", action="store_true")
    args = parser.parse_args()

    if args.ignore_eof:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.pids:
        with open(os.path.join(args.pids, f"{args.name}.pid"), "w") as f:
            f.write(str(os.getpid()))
        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(args.pids, f"{args.name}-child.pid"), "w") as f:
            f.write(str(child.pid))

    server = MCPServer(args.name)
    for tool in [t for t in args.tools.split(",") if t]:
        def make(tool_name):
            def echo(text: str) -> str:
                if args.log:
                    with open(args.log, "a") as f:
                        f.write(json.dumps({"server": args.name, "tool": tool_name, "text": text}) + "\n")
                return f"{args.name}:{tool_name}:{text}"
            return echo
        server.add_tool(make(tool), name=tool, description=f"Echoes text ({args.name}).")
    if args.slow:
        def log(event):
            if args.log:
                with open(args.log, "a") as f:
                    f.write(json.dumps({"server": args.name, "tool": "slow", "event": event}) + "\n")

        async def slow(seconds: float) -> str:
            import anyio

            log("started")
            try:
                await anyio.sleep(seconds)
            except anyio.get_cancelled_exc_class():
                log("cancelled")
                raise
            log("finished")
            return "done"

        server.add_tool(slow, name="slow", description="Sleeps, then answers done.")
    server.run()
    if args.ignore_eof:
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
