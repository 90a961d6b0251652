#!/usr/bin/env python3
"""Runs the Windows build of mcp-fixture under Wine as a stdio MCP server: initialize, call `echo`, close stdin, and
expect the answer and a clean exit. Usage: wine-smoke.py (from the repository root; builds it with .ci/cross/cargo)"""
import json
import os
import subprocess
import sys
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
command = [os.path.join(here, "cargo"), "x86_64-pc-windows-gnu", "run", "--quiet", "-p", "mcp-fixture", "--bin",
           "mcp-fixture"]
proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
# A server that never answers must not hold CI: a blocked read ends when the process is killed.
watchdog = threading.Timer(900, proc.kill)
watchdog.daemon = True
watchdog.start()


def send(message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def answer(wanted):
    """The next line answering request `wanted` (within 600 s: the first run builds the fixture for Windows)."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            sys.exit(f"wine-smoke: the server closed stdout before answering request {wanted}")
        message = json.loads(line)
        if message.get("id") == wanted:
            return message
    sys.exit(f"wine-smoke: no answer to request {wanted} within 600 s")


send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "wine-smoke", "version": "1"}}})
init = answer(1)
assert init["result"]["serverInfo"]["name"] == "mcp-fixture", init
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hello"}}})
call = answer(2)
assert call["result"]["content"][0]["text"] == "hello", call
proc.stdin.close()
code = proc.wait(timeout=60)
assert code == 0, f"exit code {code}"
watchdog.cancel()
print("wine-smoke: mcp-fixture.exe answered initialize and echo under Wine and exited 0")
