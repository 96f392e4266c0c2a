"""An MCP server whose tool list grows while it runs (stdio), for toolslot's tests.

None of the pinned servers adds a tool after start-up on request, so this one does, with the
official Python SDK (installed with the PyPI servers): `add_tool` registers a tool answering a
fixed reply and sends `notifications/tools/list_changed`, as real servers do when a plugin or
a connection comes up.

`--https PORT CA_PEM` serves streamable HTTP over TLS instead (uvicorn, as deployed servers
run), with a certificate for 127.0.0.1 and localhost from a fresh CA written to CA_PEM for the
client to trust; the pinned servers speak plain HTTP at most. `--http PORT` serves plain
streamable HTTP (`--legacy` as a server of the revisions with the `initialize` handshake,
which refuses the newest ones' discovery); its `connection` tool says which connection a call came over, and its
`counted` tool the id of the request that called it; `waited` writes "started" to a file, waits
until it is cancelled and then writes "cancelled" there.
"""

import datetime
import ipaddress
import os
import tempfile

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


@server.tool(description="Adds a tool called `name` that answers `reply`, and announces the new tool list.")
async def add_tool(name: str, reply: str, ctx: Context) -> str:
    def answer() -> str:
        return reply

    server.add_tool(answer, name=name, description=f"Answers with a fixed greeting ({reply}).")
    if ctx.protocol_version is not None and ctx.protocol_version >= "2026-07-28":
        # The newest revision: to the clients listening on `subscriptions/listen`.
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


def connection_of(ctx: Context) -> str:
    request = ctx.request_context.request
    session = (getattr(request, "headers", None) or {}).get("mcp-session-id")
    client = getattr(request, "client", None)
    return f"connection {session or (client.port if client else 'stdio')}"


@server.tool(description="Which connection this call (the nth) came over: its MCP session, else the client's port.")
def connection(ctx: Context, nth: int = 0) -> str:
    return connection_of(ctx)


@server.tool(description="Counts to `steps`, reporting progress at each, and says which connection the call came over.")
async def counted(steps: int, ctx: Context) -> str:
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps)
    return f"counted {steps} over {connection_of(ctx)} as request {ctx.request_id!r}"


class Name(BaseModel):
    name: str


@server.tool(description="Asks the user for a name, and says what came back and the id of its request.")
async def asked(ctx: Context) -> str:
    answer = await ctx.elicit(message="Whose table is it?", schema=Name)
    said = answer.data.name if answer.action == "accept" else answer.action
    return f"answered {said} as request {ctx.request_id!r}"


@server.tool(description="Writes `started` to the file `marker`, waits up to a minute, and if cancelled first writes `cancelled` there.")
async def waited(marker: str) -> str:
    import anyio

    with open(marker, "w") as f:
        f.write("started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        with open(marker, "w") as f:
            f.write("cancelled")
        raise
    return "waited a minute"


def issue_certificate(ca_out: str) -> tuple[str, str]:
    """A throwaway CA (written to ca_out, for the client to trust) and a server certificate
    for 127.0.0.1 and localhost signed by it; returns the server's chain and key files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def build(subject, issuer, public_key, signing_key, ca):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = build("toolslot test CA", "toolslot test CA", ca_key.public_key(), ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = build("toolslot test server", "toolslot test CA", key.public_key(), ca_key, False)

    folder = tempfile.mkdtemp()
    key_file = os.path.join(folder, "key.pem")
    with open(key_file, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    chain_file = os.path.join(folder, "chain.pem")
    with open(chain_file, "wb") as f:
        f.write(leaf.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    # Written last and renamed into place: the test waits for this file.
    tmp = ca_out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    os.replace(tmp, ca_out)
    return chain_file, key_file


def guarded(app, bearer, header):
    """The app behind an authorization check, as remote MCP servers are deployed: a request
    without `Authorization: Bearer <bearer>` (and the required header, if any) gets a 401."""

    async def checked(scope, receive, send):
        if scope["type"] == "http":
            got = dict(scope["headers"])
            ok = got.get(b"authorization") == f"Bearer {bearer}".encode()
            if header is not None:
                ok = ok and got.get(header[0].lower().encode()) == header[1].encode()
            if not ok:
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing or wrong credentials"})
                return
        await app(scope, receive, send)

    return checked


def legacy(app):
    """`app` as a server of the revisions before the newest: `server/discover` is refused as an
    unknown method, so a client falls back to `initialize` and a session."""
    import json

    async def older(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "server/discover":
            error = {"jsonrpc": "2.0", "id": request.get("id"), "error": {"code": -32601, "message": "Method not found"}}
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps(error).encode()})
            return
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return older


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--https", nargs=2, metavar=("PORT", "CA_PEM"))
    parser.add_argument("--http", metavar="PORT", help="plain streamable HTTP on PORT")
    parser.add_argument("--legacy", action="store_true", help="refuse the newest revisions' discovery")
    parser.add_argument("--require-bearer")
    parser.add_argument("--require-header", help="NAME=VALUE")
    args = parser.parse_args()
    if args.https:
        import uvicorn

        port, ca = args.https
        cert, key = issue_certificate(ca)
        app = server.streamable_http_app()
        if args.require_bearer:
            header = tuple(args.require_header.split("=", 1)) if args.require_header else None
            app = guarded(app, args.require_bearer, header)
        uvicorn.run(app, host="127.0.0.1", port=int(port), ssl_certfile=cert, ssl_keyfile=key, log_level="warning")
    elif args.http:
        import uvicorn

        app = server.streamable_http_app()
        uvicorn.run(legacy(app) if args.legacy else app, host="127.0.0.1", port=int(args.http), log_level="warning")
    else:
        server.run()
