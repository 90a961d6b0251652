"""One host session of the Python `mcp` 2.x client (default `auto` mode: `server/discover` first, so a 2026-07-28
stateless session) against `pimcp-run serve --http`: lists tools, then calls the direct tool `fixture_echo` N times.

Usage: http_client.py URL N LABEL
Prints one JSON object per step on stdout; any failure raises (non-zero exit). Used by tests/operations/shared.rs.
"""

import json
import sys

import anyio
from mcp import Client


def emit(step: str, **fields) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


async def main() -> None:
    url, count, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    async with Client(url) as client:
        emit("connected", server=client.server_info.name, protocol=str(client.protocol_version))
        tools = await client.list_tools()
        emit("tools/list", tools=sorted(tool.name for tool in tools.tools))
        answers = []
        for i in range(count):
            result = await client.call_tool("fixture_echo", {"text": f"{label} {i}"})
            text = "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")
            if result.is_error or text != f"{label} {i}":
                raise SystemExit(f"call {i}: unexpected answer {text!r} (is_error={result.is_error})")
            answers.append(text)
        emit("calls", count=len(answers), last=answers[-1] if answers else None)


anyio.run(main)
