#!/usr/bin/env python3
"""Per-call cost of a stdio MCP proxy, with a raw JSON-RPC driver (no MCP client library in the timed path).

Measured in one run, in interleaved blocks: `echo` on mcp-fixture called directly; through mcp-null-relay (a byte
copier: the floor any stdio proxy pays for its two extra pipe hops); through pimcp-run (`mcp` tool); and through
mcpzip (`execute_tool`) when MCPZIP points at its binary. Prints median and p99 per target, the time added over
the direct calls, and the CPU the proxy process itself spent per call (utime+stime from /proc, 100 Hz ticks).

Usage: percall.py [--calls N] [--blocks B] [--callgrind N]
Env: PIMCP, FIXTURE, RELAY (default <repo>/target/release/{pimcp-run,mcp-fixture,mcp-null-relay}), MCPZIP (optional),
PIMCP_BASE (optional: a second pimcp-run, e.g. an older commit's, measured in the same run as "pimcp-run base").
--callgrind N: instead, run pimcp-run under valgrind's callgrind for 100 and 100+N calls and print instructions per
call (the difference / N): a count that does not depend on machine load.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REL = os.path.join(ROOT, "target", "release")
PIMCP = os.environ.get("PIMCP", os.path.join(REL, "pimcp-run"))
FIXTURE = os.environ.get("FIXTURE", os.path.join(REL, "mcp-fixture"))
RELAY = os.environ.get("RELAY", os.path.join(REL, "mcp-null-relay"))
MCPZIP = os.environ.get("MCPZIP")
PIMCP_BASE = os.environ.get("PIMCP_BASE")
TICK = os.sysconf("SC_CLK_TCK")


class Peer:
    def __init__(self, name, argv, env, tool, args):
        self.name, self.tool, self.args = name, tool, args
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.next_id = 0
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "percall", "version": "1"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()

    def rpc(self, method, params):
        self.next_id += 1
        i = self.next_id
        self.p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.name} closed its stdout")
            m = json.loads(line)
            if m.get("id") == i:
                return m

    def call(self):
        return self.rpc("tools/call", {"name": self.tool, "arguments": self.args})

    def cpu_ticks(self):
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def q(xs, p):
    xs = sorted(xs)
    return xs[int(p * (len(xs) - 1))] * 1e6


ECHO = {"text": "hi"}
PIMCP_ECHO = {"tool": "fixture_echo", "args": ECHO}


def pimcp_setup(home):
    """pimcp-run's environment (only its own config file, scratch agent and data dirs) and config path."""
    env = dict(os.environ, HOME=home, PIMCP_CONFIG_MODE="exclusive", PI_CODING_AGENT_DIR=os.path.join(home, "agent"),
               PIMCP_DATA_DIR=os.path.join(home, "data"))
    cfg = os.path.join(home, "config.json")
    with open(cfg, "w") as f:
        json.dump({"mcpServers": {"fixture": {"command": FIXTURE}}}, f)
    return env, cfg


def peers(home):
    env, cfg = pimcp_setup(home)
    echo = ECHO
    out = [Peer("direct", [FIXTURE], env, "echo", echo),
           Peer("null relay", [RELAY, FIXTURE], env, "echo", echo),
           Peer("pimcp-run", [PIMCP, "--config", cfg], env, "mcp", PIMCP_ECHO)]
    if PIMCP_BASE:
        bhome = os.path.join(home, "base")
        os.makedirs(bhome, exist_ok=True)
        benv, bcfg = pimcp_setup(bhome)
        out.append(Peer("pimcp-run base", [PIMCP_BASE, "--config", bcfg], benv, "mcp", PIMCP_ECHO))
    if MCPZIP:
        zhome = os.path.join(home, "mcpzip")
        os.makedirs(zhome, exist_ok=True)
        zcfg = os.path.join(zhome, "config.json")
        with open(zcfg, "w") as f:
            json.dump({"mcpServers": {"fixture": {"command": FIXTURE}}}, f)
        z = Peer("mcpzip", [MCPZIP, "serve", "--config", zcfg], dict(env, HOME=zhome), "execute_tool",
                 {"name": "fixture__echo", "arguments": echo})
        deadline = time.monotonic() + 30
        while z.call()["result"].get("isError"):  # mcpzip says "not found" until its catalog refresh lands
            if time.monotonic() > deadline:
                raise RuntimeError("mcpzip never found fixture__echo")
            time.sleep(0.1)
        out.append(z)
    return out


def latency(calls, blocks):
    home = tempfile.mkdtemp(prefix="pimcp-percall-")
    try:
        ps = peers(home)
        for p in ps:
            r = p.call()
            if r.get("result", {}).get("isError") or "error" in r:
                raise RuntimeError(f"{p.name}: echo failed: {r}")
            for _ in range(100):
                p.call()
        times = {p.name: [] for p in ps}
        cpu = {p.name: 0 for p in ps}
        per_block = max(1, calls // blocks)
        for _ in range(blocks):
            for p in ps:
                t0 = p.cpu_ticks()
                for _ in range(per_block):
                    s = time.perf_counter()
                    p.call()
                    times[p.name].append(time.perf_counter() - s)
                cpu[p.name] += p.cpu_ticks() - t0
        base = times["direct"]
        print(f"load {open('/proc/loadavg').read().split()[:3]}; {per_block * blocks} calls per target in {blocks} "
              "interleaved blocks")
        print("| target | median µs | p99 µs | added median µs | added p99 µs | CPU of the process per call µs |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for p in ps:
            t = times[p.name]
            n = len(t)
            print(f"| {p.name} | {q(t, .5):.0f} | {q(t, .99):.0f} | {q(t, .5) - q(base, .5):+.0f} | "
                  f"{q(t, .99) - q(base, .99):+.0f} | {cpu[p.name] / TICK / n * 1e6:.0f} |")
        for p in ps:
            p.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def callgrind(n):
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed")
    home = tempfile.mkdtemp(prefix="pimcp-percall-cg-")
    totals = {}
    try:
        env, cfg = pimcp_setup(home)
        for count in (100, 100 + n):
            out = os.path.join(home, f"cg.{count}.out")
            p = Peer("pimcp-run", ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", PIMCP, "--config",
                                   cfg], env, "mcp", PIMCP_ECHO)
            for _ in range(count):
                p.call()
            p.close()
            summary = subprocess.run(["callgrind_annotate", out], capture_output=True, text=True).stdout
            line = next(l for l in summary.splitlines() if "PROGRAM TOTALS" in l)
            totals[count] = int(line.split()[0].replace(",", ""))
        per = (totals[100 + n] - totals[100]) / n
        print(f"pimcp-run instructions per proxied echo call: {per:,.0f} (callgrind, {n} calls; "
              f"totals {totals[100]:,} for 100 calls, {totals[100 + n]:,} for {100 + n})")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=4000)
    ap.add_argument("--blocks", type=int, default=20)
    ap.add_argument("--callgrind", type=int, default=0)
    a = ap.parse_args()
    for b in (PIMCP, FIXTURE, RELAY):
        if not os.access(b, os.X_OK):
            sys.exit(f"missing {b}: cargo build --release -p pimcp-cli --bin pimcp-run "
                     "-p mcp-fixture --bins")
    if a.callgrind:
        callgrind(a.callgrind)
    else:
        latency(a.calls, a.blocks)


if __name__ == "__main__":
    main()
