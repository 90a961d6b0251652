#!/usr/bin/env python3
"""How long pimcp-run takes to exit after its host closes stdin, idle and with a call in flight.

Each round starts `pimcp-run --config C` (one stdio fixture server), initializes, optionally starts a 600 s
`fx_slow` call and waits until the fixture logs it, then closes stdin and times the exit. After the exit it checks
that the fixture process is gone and, with a call in flight, that the fixture logged the call's cancellation.

    python3 bench/stdin-close/run.py [--bin target/release/pimcp-run] [--fixture target/release/mcp-fixture] [--rounds 10]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def events(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(what, predicate, deadline=30.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.01)
    raise SystemExit(f"timed out waiting for {what}")


def one_round(binary, fixture, in_flight):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "fx.log")
        config = os.path.join(d, "mcp.json")
        with open(config, "w") as f:
            json.dump({"mcpServers": {"fx": {"command": fixture, "args": ["--event-log", log]}}}, f)
        env = dict(os.environ, HOME=os.path.join(d, "home"), PI_CODING_AGENT_DIR=os.path.join(d, "agent"))
        proc = subprocess.Popen([binary, "--config", config], cwd=d, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

        def send(message):
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        proc.stdout.readline()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # Connect the server first in both cases, so both rounds close one live server.
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "mcp", "arguments": {"connect": "fx"}}})
        proc.stdout.readline()
        if in_flight:
            send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "mcp", "arguments": {"tool": "fx_slow", "args": {"ms": 600000}}}})
            wait_for("the call to reach the fixture", lambda: any(e.get("event") == "call" for e in events(log)))
        pid = next(e["pid"] for e in events(log) if e.get("event") == "start")
        start = time.monotonic()
        proc.stdin.close()
        proc.wait(timeout=60)
        elapsed = time.monotonic() - start
        wait_for("the fixture to be gone", lambda: not alive(pid), 5.0)
        cancelled = any(e.get("event") == "cancelled" for e in events(log))
        if in_flight and not cancelled:
            raise SystemExit("the call in flight was not cancelled upstream")
        return elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="target/release/pimcp-run")
    parser.add_argument("--fixture", default="target/release/mcp-fixture")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    binary, fixture = os.path.abspath(args.bin), os.path.abspath(args.fixture)
    results = {}
    for in_flight in (False, True):
        times = [one_round(binary, fixture, in_flight) for _ in range(args.rounds)]
        results["call in flight" if in_flight else "idle"] = times
    for name, times in results.items():
        print(f"{name:15} median {statistics.median(times) * 1000:7.0f} ms  max {max(times) * 1000:7.0f} ms  "
              f"(n={len(times)}, fixture gone every time)")


if __name__ == "__main__":
    main()
