#!/usr/bin/env python3
"""Instructions of a pimcp-run process that makes exactly one call (callgrind; load-independent), per thread.

Each case starts `pimcp-run --config CFG` (one lazy mcp-fixture server) under `valgrind --tool=callgrind
--separate-threads=yes`, sends `initialize`, `notifications/initialized` and one `mcp` call of `fixture_echo`, waits
for its answer and closes stdin. "no cache": a fresh agent dir; "warm cache": the cache left by one plain (untimed,
not traced) run just before. Prints the process total, each thread's total (thread 1 runs pimcp-run's current-thread
runtime, so the call), and the inclusive count of a few functions summed over threads.

Usage: first_call_callgrind.py [FUNCTION ...]
Env: PIMCP, FIXTURE (default <repo>/target/release/{pimcp-run,mcp-fixture}); build them with
`cargo build --release -p pimcp-cli --bin pimcp-run -p mcp-fixture --bins`.
"""
import json, os, shutil, subprocess, sys, tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PIMCP = os.environ.get("PIMCP", os.path.join(ROOT, "target", "release", "pimcp-run"))
FIXTURE = os.environ.get("FIXTURE", os.path.join(ROOT, "target", "release", "mcp-fixture"))
FUNCS = sys.argv[1:] or ["validator_for_draft", "SearchIndex::build"]


def one(argv, env):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)

    def send(m):
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "first-call", "version": "1"}}})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "mcp", "arguments": {"tool": "fixture_echo", "args": {"text": "hi"}}}})
    while True:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError("pimcp-run closed its stdout")
        m = json.loads(line)
        if m.get("id") == 2:
            break
    if m.get("result", {}).get("isError") or "hi" not in json.dumps(m):
        raise RuntimeError(f"the call failed: {m}")
    p.stdin.close()
    p.wait(timeout=60)


def main():
    for mode in ("no cache", "warm cache"):
        home = tempfile.mkdtemp(prefix="pimcp-first-call-cg-")
        try:
            env = dict(os.environ, HOME=home, PIMCP_CONFIG_MODE="exclusive",
                       PI_CODING_AGENT_DIR=os.path.join(home, "agent"), PIMCP_DATA_DIR=os.path.join(home, "data"))
            cfg = os.path.join(home, "config.json")
            with open(cfg, "w") as f:
                json.dump({"mcpServers": {"fixture": {"command": FIXTURE}}}, f)
            if mode == "warm cache":
                one([PIMCP, "--config", cfg], env)
                if not os.path.exists(os.path.join(home, "agent", "pimcp", "cache.json")):
                    raise RuntimeError("the plain run wrote no cache")
            out = os.path.join(home, "cg.out")
            one(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}", PIMCP,
                 "--config", cfg], env)
            per, funcs = [], {fn: 0 for fn in FUNCS}
            for f in sorted(x for x in os.listdir(home) if x.startswith("cg.out")):
                ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                                      os.path.join(home, f)], capture_output=True, text=True).stdout.splitlines()
                totals = [l for l in ann if "PROGRAM TOTALS" in l]
                if not totals:
                    continue
                per.append((f.rsplit("-", 1)[-1], int(totals[0].split()[0].replace(",", ""))))
                for fn in FUNCS:
                    # A thread that never ran the function lists it with "." (no count): skip such lines.
                    hits = [l for l in ann if fn in l and l.split()[0].replace(",", "").isdigit()]
                    if hits:
                        funcs[fn] += int(hits[0].split()[0].replace(",", ""))
            print(f"{mode}: total {sum(n for _, n in per):,}; per thread "
                  + ", ".join(f"{t}: {n:,}" for t, n in per))
            for fn, n in funcs.items():
                print(f"   {fn} (inclusive, all threads): {n:,}")
        finally:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
