"""Drives `mcpload serve` with the official Python MCP SDK client (PyPI `mcp`).

Usage: py_client.py http URL MODE | py_client.py stdio BINARY MODE
MODE is the SDK's connect mode: "legacy" (initialize handshake) or "auto" (server/discover,
which picks 2026-07-28 on this server). Prints one JSON line describing what the client saw;
any failure raises and exits non-zero.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    kind, target, mode = sys.argv[1:4]
    server = target if kind == "http" else StdioServerParameters(command=target, args=["serve", "--stdio"])
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(server, mode=mode) as client:
        tools = await client.list_tools()
        echo = await client.call_tool("echo", {"message": "hello from python"})
        tool_error = await client.call_tool("tool_error", {})
        slow = await client.call_tool("progress", {"steps": 3, "ms": 1}, progress_callback=on_progress)
        templates = await client.list_resource_templates()
        item = await client.read_resource("mem://item/7")
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        failure = None
        try:
            await client.call_tool("fail", {"code": -32042})
        except Exception as e:  # the SDK raises the JSON-RPC error
            failure = getattr(getattr(e, "error", None), "code", None)
        print(
            json.dumps(
                {
                    "protocol_version": client.protocol_version,
                    "tools": sorted(t.name for t in tools.tools),
                    "echo": echo.content[0].text,
                    "tool_error": tool_error.is_error,
                    "progress_result": slow.content[0].text,
                    "progress_seen": progress,
                    "templates": [t.uri_template for t in templates.resource_templates],
                    "item": item.contents[0].text,
                    "prompt": prompt.messages[0].content.text,
                    "fail_code": failure,
                }
            )
        )


asyncio.run(main())
