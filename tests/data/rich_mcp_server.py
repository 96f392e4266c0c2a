"""An MCP server (stdio, official Python SDK) whose tools answer with more than text, for
toolslot's tests: structured content with an output schema, a structured answer too large to
read whole, one that breaks the output schema it declares, an image, and a question for the
user (elicitation) before it acts.

None of the pinned servers breaks its own output schema or answers with thousands of records,
so this one does.
"""

import base64

from pydantic import BaseModel, Field

from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ImageContent,
    InputRequiredResult,
    TextContent,
)


class Weather(BaseModel):
    city: str
    temperature: float
    conditions: str


class Record(BaseModel):
    id: int
    name: str
    tags: list[str]


class Records(BaseModel):
    items: list[Record]
    total: int


class Booking(BaseModel):
    name: str = Field(description="Who the table is for")
    guests: int = Field(description="How many people", ge=1, le=12)
    terrace: bool = Field(default=False, description="Outside, if possible")


BROKEN_SCHEMA = {
    "type": "object",
    "properties": {"temperature": {"type": "number"}},
    "required": ["temperature"],
}


class RichServer(MCPServer):
    async def list_tools(self):
        tools = await super().list_tools()
        # Declares a schema its answers do not keep (as a buggy server does).
        for tool in tools:
            if tool.name == "broken_forecast":
                tool.output_schema = BROKEN_SCHEMA
        return tools


server = RichServer("rich")


@server.tool(description="The weather in a city, as structured data")
def weather(city: str) -> Weather:
    return Weather(city=city, temperature=21.5, conditions="sunny")


@server.tool(description="Every record, as structured data")
def records(count: int) -> Records:
    items = [Record(id=i, name=f"record {i}", tags=["a", "b"]) for i in range(count)]
    return Records(items=items, total=count)


@server.tool(description="A forecast that does not match its own output schema", structured_output=False)
def broken_forecast(city: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text='{"temperature": "warm"}')],
        structured_content={"temperature": "warm"},
    )


@server.tool(description="A one-pixel PNG", structured_output=False)
def pixel() -> CallToolResult:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    return CallToolResult(
        content=[
            TextContent(type="text", text="one pixel"),
            ImageContent(type="image", mime_type="image/png", data=base64.b64encode(png).decode()),
        ]
    )


@server.tool(description="Pictures no model could read: an SVG, and data that is not base64", structured_output=False)
def bad_pictures() -> CallToolResult:
    svg = b"<svg xmlns='http://www.w3.org/2000/svg'/>"
    return CallToolResult(
        content=[
            ImageContent(type="image", mime_type="image/png", data=base64.b64encode(svg).decode()),
            ImageContent(type="image", mime_type="image/png", data="%%% not base64"),
        ]
    )


@server.tool(description="Books a table, asking the user for the details first", structured_output=False)
async def book_table(restaurant: str, ctx: Context) -> str | InputRequiredResult:
    message = f"Booking a table at {restaurant}: for whom, and how many?"
    if ctx.protocol_version is None or ctx.protocol_version < "2026-07-28":
        # Older revisions: a request to the client while the call runs.
        answer = await ctx.elicit(message=message, schema=Booking)
        action, data = answer.action, (answer.data.model_dump() if answer.action == "accept" else None)
    else:
        # The newest revision: the call answers with its question and is sent again with
        # the answer (multi round-trip requests).
        responses = ctx.input_responses or {}
        if "booking" not in responses:
            params = ElicitRequestFormParams(message=message, requested_schema=render_elicitation_schema(Booking))
            return InputRequiredResult(input_requests={"booking": ElicitRequest(params=params)}, request_state="asked")
        answer = responses["booking"]
        action = answer.action
        data = Booking.model_validate(answer.content).model_dump() if action == "accept" else None
    if action == "accept":
        return f"booked {restaurant} for {data['name']}, {data['guests']} guests, terrace={data['terrace']}"
    return f"not booked ({action})"


if __name__ == "__main__":
    server.run()
