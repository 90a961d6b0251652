#!/usr/bin/env python3
"""A stdio MCP server (the PyPI `mcp` package) that lists the tools of a JSON file and answers no calls: how the
held-out sets' catalogs reach `pimcp-run` as real servers. Usage: catalog_server.py TOOLS.json SERVER
(TOOLS.json: {"server": [{"name", "description", "inputSchema"}, ...]})."""
import json
import sys

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main():
    path, name = sys.argv[1], sys.argv[2]
    with open(path) as f:
        listed = [types.Tool(name=t["name"], description=t.get("description") or "",
                             input_schema=t.get("inputSchema") or {"type": "object"})
                  for t in json.load(f)[name]]

    async def list_tools(_ctx, _params):
        return types.ListToolsResult(tools=listed)

    async def call_tool(_ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text="catalog only")], is_error=True)

    server = Server(name, on_list_tools=list_tools, on_call_tool=call_tool)

    async def run():
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(run)


if __name__ == "__main__":
    main()
