#!/usr/bin/env python3
"""Start → first call, interleaved in one run: process start to the `initialize` answer and to the first `echo` answer,
for mcp-fixture started directly (the upstream's own start) and through each pimcp-run given (fixture lazy, no cache,
pimcp-run its own guardian, as installed). Prints medians and the time each pimcp-run adds over the direct start.

Usage: firstcall.py [--runs N] [--warm] [--net] [--upstream fixture|everything] [KEY=VALUE@]PIMCP_RUN [...]   (KEY=VALUE@: an
environment variable for that target only, e.g. PIMCP_LOG=debug@target/release/pimcp-run)
--warm: keep each pimcp-run's agent dir between starts (a fresh metadata cache; an untimed first start writes it),
else a new one each start.
--upstream everything: @modelcontextprotocol/server-everything (node) instead of mcp-fixture, as the peer benchmark
installs it (bench/peers/setup.sh); its own start varies by tens of ms between runs, which the interleaving and the
median over many runs absorb.
--net: also report each start net of the upstream's own start as that start measured it, which node's start (it
varies by ±50 ms between starts) does not blur: pimcp-run's metadata-only protocol trace (`settings.trace`) gives the
time from writing its first request to the upstream (sent at spawn) to that request's answer (node up, first request
handled); the start's time minus that, against the direct start's time from its `initialize` answer to its echo
answer. Conservative: with no cache pimcp's first request is `server/discover`, so its cold `initialize` handling counts
as pimcp's while the direct start's counts as the upstream's start.
--as-pimcp (with --upstream everything): one more target, "pimcp's requests": a plain client that sends
server-everything what pimcp-run sends it before the first call answers, itself, with no pimcp-run in between —
without a cache `server/discover`, then (server-everything refuses it) `initialize` with pimcp's capabilities, then
`initialized` and the three lists, then the call; with one (`--warm`) `initialize`, `initialized` and the call (the
lists after its answer, untimed). Its time over the direct start is the upstream's own work for those requests; what
pimcp-run adds beyond it is pimcp-run's.
Env: FIXTURE (default <repo>/target/release/mcp-fixture); for --upstream everything, UPNODE and EVERYTHING (default: the
node 24 and server-everything under ~/.cache/pimcp-peerbench, as bench/peers/run.sh sets them).
"""
import argparse, json, os, shutil, statistics, subprocess, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE = os.environ.get("FIXTURE", os.path.join(ROOT, "target", "release", "mcp-fixture"))


def rpc(id_, method, params=None):
    """One JSON-RPC line: a request, or a notification when `id_` is None."""
    m = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        m["id"] = id_
    if params is not None:
        m["params"] = params
    return (json.dumps(m) + "\n").encode()


INIT = rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "firstcall", "version": "1"}})
INITIALIZED = rpc(None, "notifications/initialized")


def call(tool, args):
    return rpc(2, "tools/call", {"name": tool, "arguments": args})


PEERBENCH = os.environ.get("PEERBENCH", os.path.join(os.path.expanduser("~"), ".cache", "pimcp-peerbench"))


def upstream(kind):
    """(server name in pimcp's config, its command line, its echo tool's arguments) for `kind`."""
    if kind == "fixture":
        return "fixture", [FIXTURE], {"text": "hi"}
    node = os.environ.get("UPNODE", os.path.join(PEERBENCH, "node24", "package", "bin", "node"))
    ev = os.environ.get("EVERYTHING", os.path.join(
        PEERBENCH, "npm", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
    for path in (node, ev):
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing: run bench/peers/setup.sh (or set UPNODE / EVERYTHING)")
    return "everything", [node, ev, "stdio"], {"message": "hi"}


def answer(p, request_id):
    """The line answering `request_id`; the server's notifications and requests before it are skipped
    (server-everything sends five `list_changed` and asks for roots at start)."""
    while True:
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed its stdout before answering request {request_id}")
        m = json.loads(line)
        if m.get("id") == request_id and "method" not in m:
            return line


def first_answer_s(trace):
    """From a start's protocol trace: seconds from pimcp-run's first request to the upstream to its answer."""
    with open(trace) as f:
        for line in f:
            m = json.loads(line)
            if m.get("dir") == "in" and m.get("method") in ("server/discover", "initialize"):
                return m["durationMs"] / 1e3
    raise RuntimeError(f"{trace}: no answer to the first request")


def one(argv, env, request):
    """Seconds from spawn to the initialize answer and to the call's answer."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    p.stdin.write(INIT)
    p.stdin.flush()
    answer(p, 1)
    t_init = time.perf_counter() - t0
    p.stdin.write(INITIALIZED + request)
    p.stdin.flush()
    line = answer(p, 2)
    t_call = time.perf_counter() - t0
    # mcp-fixture echoes the text itself; server-everything answers "Echo: hi".
    if not (b'"hi"' in line or b'Echo: hi' in line) or b'"isError":true' in line:
        raise RuntimeError(f"{argv[0]}: unexpected answer {line[:300]!r}")
    p.stdin.close()
    p.wait(timeout=30)
    return t_init, t_call


CAPS = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}


def as_pimcp(argv, echo_args, warm):
    """Seconds from spawn to the first answer and to the call's answer, for pimcp-run's requests (--as-pimcp)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(*lines):
        p.stdin.write(b"".join(lines))
        p.stdin.flush()

    try:
        init = rpc(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": CAPS,
                                     "clientInfo": {"name": "pimcp", "version": "0.1.0"}})
        if warm:
            send(init)
            answer(p, 1)
            t_first = time.perf_counter() - t0
        else:
            send(rpc(0, "server/discover", {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "pimcp", "version": "0.1.0"},
                "io.modelcontextprotocol/clientCapabilities": CAPS}}))
            if b'"error"' not in answer(p, 0):
                raise RuntimeError("server-everything answered server/discover: --as-pimcp assumes it refuses it")
            t_first = time.perf_counter() - t0
            send(init)
            answer(p, 1)
        send(INITIALIZED)
        if not warm:
            send(rpc(3, "tools/list"), rpc(4, "resources/list"), rpc(5, "prompts/list"))
            for i in (3, 4, 5):
                answer(p, i)
        send(call("echo", echo_args))
        line = answer(p, 2)
        t_call = time.perf_counter() - t0
        if b"Echo: hi" not in line:
            raise RuntimeError(f"pimcp's requests: unexpected answer {line[:300]!r}")
        return t_first, t_call
    finally:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--upstream", choices=["fixture", "everything"], default="fixture")
    ap.add_argument("--net", action="store_true")
    ap.add_argument("--as-pimcp", action="store_true")
    ap.add_argument("pimcp", nargs="+")
    a = ap.parse_args()
    server, up_argv, echo_args = upstream(a.upstream)
    scratch = tempfile.mkdtemp(prefix="pimcp-firstcall-")
    try:
        cfg = os.path.join(scratch, "config.json")
        with open(cfg, "w") as f:
            cfg_json = {"mcpServers": {server: {"command": up_argv[0], "args": up_argv[1:]}}}
            if a.net:
                cfg_json["settings"] = {"trace": True}
            json.dump(cfg_json, f)
        if a.as_pimcp and a.upstream != "everything":
            raise SystemExit("--as-pimcp needs --upstream everything")
        names = ["direct"] + (["pimcp's requests"] if a.as_pimcp else []) + a.pimcp
        times = {n: [] for n in names}
        net = {n: [] for n in names}
        # With --warm each pimcp-run's first start (no cache yet) is an untimed one: it writes the cache.
        for run in range(-1 if a.warm else 0, a.runs):
            for n in names:
                if run < 0 and n in ("direct", "pimcp's requests"):
                    continue
                if n == "pimcp's requests":
                    t = as_pimcp(up_argv, echo_args, a.warm)
                    times[n].append(t)
                    net[n].append(t[1] - t[0])
                    continue
                if n == "direct":
                    argv, env, req = up_argv, dict(os.environ), call("echo", echo_args)
                else:
                    home = os.path.join(scratch, f"h{names.index(n)}" + ("" if a.warm else f"-{run}"))
                    env = dict(os.environ, HOME=home, PIMCP_CONFIG_MODE="exclusive",
                               PI_CODING_AGENT_DIR=os.path.join(home, "agent"), PIMCP_DATA_DIR=os.path.join(home, "data"))
                    exe = n
                    if "@" in n:
                        var, exe = n.split("@", 1)
                        key, _, value = var.partition("=")
                        env[key] = value
                    argv, req = [exe, "--config", cfg], call("mcp", {"tool": f"{server}_echo", "args": echo_args})
                t = one(argv, env, req)
                if run < 0:
                    if a.net:
                        os.remove(os.path.join(env["PI_CODING_AGENT_DIR"], "pimcp", "trace.jsonl"))
                    continue
                times[n].append(t)
                if not a.net:
                    continue
                if n == "direct":
                    net[n].append(t[1] - t[0])
                else:
                    trace = os.path.join(env["PI_CODING_AGENT_DIR"], "pimcp", "trace.jsonl")
                    net[n].append(t[1] - first_answer_s(trace))
                    os.remove(trace)
        print(f"load {open('/proc/loadavg').read().split()[:3]}; {a.runs} interleaved starts each; "
              f"{'warm cache' if a.warm else 'no cache'}; upstream {a.upstream}")
        print("| target | initialize answered (pimcp's requests: the first answer), median ms | first echo answered, median ms | added over direct, ms |")
        print("| --- | ---: | ---: | ---: |")
        base = statistics.median(t[1] for t in times["direct"])
        for n in names:
            i = statistics.median(t[0] for t in times[n]) * 1e3
            c = statistics.median(t[1] for t in times[n]) * 1e3
            print(f"| {n} | {i:.2f} | {c:.2f} | {c - base * 1e3:+.2f} |")
        if a.net:
            print()
            print("| target | net of the upstream's start, median ms | added over direct, ms |")
            print("| --- | ---: | ---: |")
            nbase = statistics.median(net["direct"])
            for n in names:
                m = statistics.median(net[n])
                print(f"| {n} | {m * 1e3:.2f} | {(m - nbase) * 1e3:+.2f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
