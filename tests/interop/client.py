"""Drives `pimcp-run` with the Python `mcp` 2.x client in its default `auto` mode (it sends `server/discover` first
and falls back to `initialize` only on an error).

Usage: client.py PIMCP_RUN [ARGS...]
The current environment is passed to pimcp-run unchanged. Prints one JSON object per step on stdout; any failure
raises (non-zero exit). Used by tests/interop/python.rs.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters


def emit(step: str, **fields) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def main() -> None:
    target = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ))
    async with Client(target) as client:  # default mode: "auto"
        emit("initialize", server=client.server_info.name, protocol=str(client.protocol_version))
        tools = await client.list_tools()
        emit("tools/list", tools=[tool.name for tool in tools.tools])
        steps = [
            ("connect", {"connect": "fixture"}),
            ("search", {"search": "echo"}),
            ("call", {"tool": "fixture_echo", "args": {"text": "hello from python"}}),
            ("call-invalid", {"tool": "fixture_echo", "args": {}}),
        ]
        for step, arguments in steps:
            result = await client.call_tool("mcp", arguments)
            emit(step, text=text_of(result), is_error=bool(result.is_error))


anyio.run(main)
