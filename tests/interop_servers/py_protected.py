"""A protected MCP server on the official Python SDK (PyPI `mcp`), for mcpload's tests: the
SDK's own OAuth resource-server support (RFC 9728 metadata, 401 with `WWW-Authenticate`
naming it, the required scope) in front of one tool, `echo`. Tokens are issued by another
authorization server, given by URL (`mcpload serve --auth`), and checked there by
introspection (RFC 7662), as a resource server separate from its authorization server does.

Usage: py_protected.py AUTHORIZATION_SERVER_URL

Binds 127.0.0.1 on a port the OS picks and prints `LISTENING <port>` on stderr once bound.
"""

import json
import socket
import sys
import urllib.parse
import urllib.request

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

# Loopback only: no proxy from the environment.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Introspecting:
    """A TokenVerifier asking the authorization server about each token."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    async def verify_token(self, token: str) -> AccessToken | None:
        def ask() -> dict:
            data = urllib.parse.urlencode({"token": token}).encode()
            with OPENER.open(urllib.request.Request(self.endpoint, data=data), timeout=10) as r:
                return json.load(r)

        info = await anyio.to_thread.run_sync(ask)
        if not info.get("active"):
            return None
        return AccessToken(
            token=token,
            client_id=info.get("client_id", ""),
            scopes=info.get("scope", "").split(),
            expires_at=info.get("exp"),
        )


async def serve(issuer: str) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    server = MCPServer(
        "mcpload-interop-protected",
        token_verifier=Introspecting(f"{issuer}/introspect"),
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=f"http://127.0.0.1:{port}/mcp",
            required_scopes=["mcp"],
            validate_token_resource=False,
        ),
    )

    @server.tool()
    def echo(message: str) -> str:
        """Echoes the message."""
        return message

    app = server.streamable_http_app(json_response=True, host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"LISTENING {port}", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: py_protected.py AUTHORIZATION_SERVER_URL")
    anyio.run(serve, sys.argv[1])
