"""A stdio MCP server written with the Python `mcp` SDK (PyPI, 2.x): one `echo` tool. The interop suite starts many
of them at once behind pimcp (`tests/interop/python.rs`)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-echo")


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given."""
    return text


if __name__ == "__main__":
    server.run()
