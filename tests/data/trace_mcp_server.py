"""An MCP server (stdio, official Python SDK) whose one tool answers with the W3C trace context
its `tools/call` request carried in `params._meta`, for toolslot's telemetry tests: what the
server read is what the test compares with the spans the collector received.
"""

import json

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("trace")


def as_dict(meta):
    if meta is None:
        return {}
    if isinstance(meta, dict):
        return meta
    if hasattr(meta, "model_dump"):
        return meta.model_dump(by_alias=True, exclude_none=True)
    return dict(meta)


@server.tool(description="Says which trace context the call came with")
def trace_echo(ctx: Context) -> str:
    meta = as_dict(ctx.request_context.meta)
    return json.dumps({"traceparent": meta.get("traceparent"), "tracestate": meta.get("tracestate")})


if __name__ == "__main__":
    server.run()
