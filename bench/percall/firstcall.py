#!/usr/bin/env python3
"""Start → first call, interleaved in one run: process start to the `initialize` answer and to the first `echo` answer,
for mcp-fixture started directly (the upstream's own start) and through each pimcp-run given (fixture lazy, no cache,
guardian shim next to the binary as installed). Prints medians and the time each pimcp-run adds over the direct start.

Usage: firstcall.py [--runs N] [--warm] [KEY=VALUE@]PIMCP_RUN [...]   (KEY=VALUE@: an environment variable for that
target only, e.g. PIMCP_STANDBY_SHIM=0@target/release/pimcp-run to compare with the standby shim off)
--warm: keep each pimcp-run's agent dir between starts (a fresh metadata cache after the first), else a new one each start.
Env: FIXTURE (default <repo>/target/release/mcp-fixture).
"""
import argparse, json, os, shutil, statistics, subprocess, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE = os.environ.get("FIXTURE", os.path.join(ROOT, "target", "release", "mcp-fixture"))
INIT = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "firstcall", "version": "1"}}}) + "\n").encode()
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'


def call(tool, args):
    return (json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": tool, "arguments": args}}) + "\n").encode()


def one(argv, env, request):
    """Seconds from spawn to the initialize answer and to the call's answer."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(INIT)
    p.stdin.flush()
    p.stdout.readline()
    t_init = time.perf_counter() - t0
    p.stdin.write(INITIALIZED + request)
    p.stdin.flush()
    line = p.stdout.readline()
    t_call = time.perf_counter() - t0
    if b'"hi"' not in line or b'"isError":true' in line:
        raise RuntimeError(f"{argv[0]}: unexpected answer {line[:300]!r}")
    p.stdin.close()
    p.wait(timeout=30)
    return t_init, t_call


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("pimcp", nargs="+")
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="pimcp-firstcall-")
    try:
        cfg = os.path.join(scratch, "config.json")
        with open(cfg, "w") as f:
            json.dump({"mcpServers": {"fixture": {"command": FIXTURE}}}, f)
        names = ["direct"] + a.pimcp
        times = {n: [] for n in names}
        for run in range(a.runs):
            for n in names:
                if n == "direct":
                    argv, env, req = [FIXTURE], dict(os.environ), call("echo", {"text": "hi"})
                else:
                    home = os.path.join(scratch, f"h{names.index(n)}" + ("" if a.warm else f"-{run}"))
                    env = dict(os.environ, HOME=home, PIMCP_CONFIG_MODE="exclusive",
                               PI_CODING_AGENT_DIR=os.path.join(home, "agent"), PIMCP_DATA_DIR=os.path.join(home, "data"))
                    exe = n
                    if "@" in n:
                        var, exe = n.split("@", 1)
                        key, _, value = var.partition("=")
                        env[key] = value
                    argv, req = [exe, "--config", cfg], call("mcp", {"tool": "fixture_echo", "args": {"text": "hi"}})
                times[n].append(one(argv, env, req))
        print(f"load {open('/proc/loadavg').read().split()[:3]}; {a.runs} interleaved starts each; "
              f"{'warm cache' if a.warm else 'no cache'}")
        print("| target | initialize answered, median ms | first echo answered, median ms | added over direct, ms |")
        print("| --- | ---: | ---: | ---: |")
        base = statistics.median(t[1] for t in times["direct"])
        for n in names:
            i = statistics.median(t[0] for t in times[n]) * 1e3
            c = statistics.median(t[1] for t in times[n]) * 1e3
            print(f"| {n} | {i:.2f} | {c:.2f} | {c - base * 1e3:+.2f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
