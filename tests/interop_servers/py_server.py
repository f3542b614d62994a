"""A small MCP server built on the official Python SDK (PyPI `mcp`), for mcpload's tests.

Usage: py_server.py stdio
       py_server.py http [--stateless] [--json]
       py_server.py sse    (the legacy HTTP+SSE transport: GET /sse, POST /messages/)

Over HTTP it binds 127.0.0.1 on a port the OS picks and prints `LISTENING <port>` on stderr
once the socket is bound, so a test never races for a port. Tools:
  echo {message}              returns the message
  add {a, b}                  returns a + b
  sleep {ms}                  answers after `ms` milliseconds (reorders answers under load)
  progress {steps}            sends `steps` progress notifications, then answers
"""

import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("mcpload-interop-python")


@server.tool()
def echo(message: str) -> str:
    """Echoes the message."""
    return message


@server.tool()
def add(a: float, b: float) -> float:
    """Adds two numbers."""
    return a + b


@server.tool()
async def sleep(ms: int) -> str:
    """Answers after `ms` milliseconds."""
    await anyio.sleep(ms / 1000)
    return f"slept {ms} ms"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Reports `steps` progress notifications, then answers."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps)
        await anyio.sleep(0.01)
    return f"{steps} steps"


async def serve_http(stateless: bool, json_response: bool, legacy_sse: bool) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    if legacy_sse:
        app = server.sse_app(host="127.0.0.1")
    else:
        app = server.streamable_http_app(
            stateless_http=stateless, json_response=json_response, host="127.0.0.1"
        )
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"LISTENING {sock.getsockname()[1]}", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    elif mode in ("http", "sse"):
        anyio.run(serve_http, "--stateless" in sys.argv, "--json" in sys.argv, mode == "sse")
    else:
        sys.exit(f"unknown mode {mode!r}: use stdio, http or sse")


if __name__ == "__main__":
    main()
