"""An MCP server whose tool list grows while it runs (stdio), for toolslot's tests.

None of the pinned servers adds a tool after start-up on request, so this one does, with the
official Python SDK (installed with the PyPI servers): `add_tool` registers a tool answering a
fixed reply and sends `notifications/tools/list_changed`, as real servers do when a plugin or
a connection comes up.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


@server.tool(description="Adds a tool called `name` that answers `reply`, and announces the new tool list.")
async def add_tool(name: str, reply: str, ctx: Context) -> str:
    def answer() -> str:
        return reply

    server.add_tool(answer, name=name, description=f"Answers with a fixed greeting ({reply}).")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


if __name__ == "__main__":
    server.run()
