#!/usr/bin/env python3
"""Many servers: how `pimcp-run` scales with the number of configured servers (all lazy stdio, no metadata cached).

For each count N, in one run (interleaved rounds, medians): process start to the `initialize` answer, `tools/list`,
the characters of `mcp({})`, a search that matches nothing (its time, its characters and how many servers its cold
discovery started), a mistyped tool name (its time and how many servers it started), and stdin close to exit. The ratio of each time to the smallest count's shows whether it grows linearly
(10,000 / 1,000 servers = 10 for linear growth). Peak RSS (VmHWM) and private memory (RssAnon) are read from /proc
just before stdin closes.

Usage: servers.py [--runs N] [--counts 1000,4000,10000] PIMCP_RUN
Env: FIXTURE (default <repo>/target/release/mcp-fixture), the upstream each server entry names.
"""
import argparse, json, os, statistics, subprocess, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rpc(proc, message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    if "id" not in message:
        return None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"pimcp-run closed stdout before answering {message['id']}")
        answer = json.loads(line)
        if answer.get("id") == message["id"]:
            return answer


def call(proc, id_, arguments):
    answer = rpc(proc, {"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                        "params": {"name": "mcp", "arguments": arguments}})
    return answer["result"]["content"][0]["text"]


def memory(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    kib = lambda k: int(fields.get(k, "0 kB").split()[0])
    return kib("VmHWM"), kib("RssAnon")


def starts(events):
    """Upstream starts recorded so far in the fixture's shared event log."""
    if not os.path.exists(events):
        return 0
    with open(events) as f:
        return sum(1 for line in f if '"event":"start"' in line)


def one(exe, fixture, n, work):
    events = os.path.join(work, "events.log")
    if os.path.exists(events):
        os.remove(events)
    config = os.path.join(work, f"mcp-{n}.json")
    if not os.path.exists(config):
        servers = {f"s{i:05}": {"command": fixture, "args": ["--event-log", events]} for i in range(n)}
        with open(config, "w") as f:
            json.dump({"mcpServers": servers}, f)
    agent = tempfile.mkdtemp(dir=work)
    env = dict(os.environ, HOME=work, PI_CODING_AGENT_DIR=agent, PIMCP_DATA_DIR=os.path.join(agent, "data"))
    t0 = time.perf_counter()
    proc = subprocess.Popen([exe, "--config", config], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=work)
    rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    t_init = time.perf_counter() - t0
    rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    t1 = time.perf_counter()
    listed = rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    t_list = time.perf_counter() - t1
    status = call(proc, 3, {})
    t_miss0 = time.perf_counter()
    miss = call(proc, 4, {"search": "zzz nothing matches this"})
    t_miss = time.perf_counter() - t_miss0
    started_by_search = starts(events)
    t2 = time.perf_counter()
    typo = call(proc, 5, {"tool": "ehco_louder", "args": {}})
    t_typo = time.perf_counter() - t2
    hwm, anon = memory(proc.pid)
    t3 = time.perf_counter()
    proc.stdin.close()
    proc.wait()
    t_exit = time.perf_counter() - t3
    started = starts(events) - started_by_search
    return {
        "init": t_init, "list": t_list, "typo": t_typo, "exit": t_exit, "search": t_miss,
        "search_started": started_by_search,
        "definition": len(json.dumps(listed["result"])), "status": len(status), "miss": len(miss),
        "typo_chars": len(typo), "started": started, "hwm": hwm, "anon": anon,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--counts", default="1000,4000,10000")
    ap.add_argument("pimcp_run")
    args = ap.parse_args()
    fixture = os.path.abspath(os.environ.get("FIXTURE", os.path.join(REPO, "target/release/mcp-fixture")))
    counts = [int(c) for c in args.counts.split(",")]
    results = {n: [] for n in counts}
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.runs):
            for n in counts:
                results[n].append(one(os.path.abspath(args.pimcp_run), fixture, n, work))
    med = lambda n, k: statistics.median(r[k] for r in results[n])
    base = counts[0]
    print(f"{'servers':>8} {'initialize':>11} {'ratio':>6} {'tools/list':>10} {'search':>7} {'started':>7} "
          f"{'typo':>7} {'started':>7} "
          f"{'exit':>7} {'ratio':>6} {'mcp({})':>8} {'miss':>6} {'def':>5} {'peak RSS':>9} {'private':>8}")
    for n in counts:
        print(f"{n:>8} {med(n, 'init') * 1000:>9.0f}ms {med(n, 'init') / med(base, 'init'):>6.1f} "
              f"{med(n, 'list') * 1000:>8.1f}ms {med(n, 'search') * 1000:>5.0f}ms {med(n, 'search_started'):>7.0f} "
              f"{med(n, 'typo') * 1000:>5.0f}ms {med(n, 'started'):>7.0f} "
              f"{med(n, 'exit') * 1000:>5.0f}ms {med(n, 'exit') / med(base, 'exit'):>6.1f} "
              f"{med(n, 'status'):>8.0f} {med(n, 'miss'):>6.0f} {med(n, 'definition'):>5.0f} "
              f"{med(n, 'hwm') / 1024:>7.1f}Mi {med(n, 'anon') / 1024:>6.1f}Mi")
    print(f"(medians of {args.runs} interleaved runs; ratio = time / time at {base} servers)")


if __name__ == "__main__":
    main()
