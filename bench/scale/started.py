#!/usr/bin/env python3
"""Memory pimcp adds for N started stdio servers: `pimcp-run` with N mcp-fixture servers, each called once through
`mcp({tool, args})` so that every one is running, then the peak RSS (VmHWM), RSS and private memory (smaps_rollup
Anonymous and Private_Dirty) of pimcp-run and of every other process it started that is not a server (its guardian),
summed. The servers' own memory is listed apart: it is the servers', not pimcp's.

Usage: started.py [--servers 10] [--runs 3] PIMCP_RUN
Env: FIXTURE (default <repo>/target/release/mcp-fixture).
"""
import argparse, json, os, statistics, subprocess, tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rpc(proc, message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"pimcp-run closed stdout before answering {message.get('id')}")
        answer = json.loads(line)
        if answer.get("id") == message.get("id"):
            return answer


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rollup_kb(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("Anonymous", "Private_Dirty"):
                out[name] = int(rest.split()[0])
    return out


def children(parent):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            out.append(int(entry))
    return out


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]


def one_run(pimcp, fixture, n):
    with tempfile.TemporaryDirectory() as home:
        config = os.path.join(home, "mcp.json")
        servers = {f"s{i}": {"command": fixture} for i in range(n)}
        with open(config, "w") as f:
            json.dump({"mcpServers": servers}, f)
        env = dict(os.environ, HOME=home, PIMCP_DATA_DIR=os.path.join(home, "data"), PI_CODING_AGENT_DIR=home)
        proc = subprocess.Popen([pimcp, "--config", config], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env, cwd=home)
        rpc(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        for i in range(n):
            answer = rpc(proc, {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {
                "name": "mcp", "arguments": {"tool": f"s{i}_echo", "args": {"text": f"hi {i}"}}}})
            text = answer["result"]["content"][0]["text"]
            if text != f"hi {i}":
                raise SystemExit(f"s{i}: {text}")
        kids = children(proc.pid)
        helpers = [p for p in kids if "__pimcp_guardian__" in cmdline(p)]
        servers_ = [p for p in kids if p not in helpers]
        row = {"servers_running": len(servers_), "helpers": len(helpers)}
        for name, pids in (("pimcp", [proc.pid]), ("helpers", helpers), ("servers", servers_)):
            row[f"{name}_hwm_kb"] = sum(status_kb(p, "VmHWM") for p in pids)
            row[f"{name}_rss_kb"] = sum(status_kb(p, "VmRSS") for p in pids)
            rolls = [rollup_kb(p) for p in pids]
            row[f"{name}_anon_kb"] = sum(r.get("Anonymous", 0) for r in rolls)
            row[f"{name}_private_dirty_kb"] = sum(r.get("Private_Dirty", 0) for r in rolls)
        proc.stdin.close()
        proc.wait(timeout=30)
        return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pimcp")
    ap.add_argument("--servers", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    fixture = os.path.abspath(os.environ.get("FIXTURE", os.path.join(REPO, "target", "release", "mcp-fixture")))
    rows = [one_run(os.path.abspath(a.pimcp), fixture, a.servers) for _ in range(a.runs)]
    keys = rows[0].keys()
    med = {k: statistics.median(r[k] for r in rows) for k in keys}
    mib = lambda kb: f"{kb / 1024:.1f} MiB"
    print(f"{a.servers} stdio servers started, {a.runs} runs (medians); processes: pimcp-run, "
          f"{med['helpers']:.0f} guardian, {med['servers_running']:.0f} servers")
    print("| | peak RSS (VmHWM) | RSS | Anonymous | Private_Dirty |\n|---|---|---|---|---|")
    for name, label in (("pimcp", "pimcp-run"), ("helpers", "its guardian"), ("servers", "the servers (theirs)")):
        print(f"| {label} | {mib(med[name + '_hwm_kb'])} | {mib(med[name + '_rss_kb'])} | "
              f"{mib(med[name + '_anon_kb'])} | {mib(med[name + '_private_dirty_kb'])} |")
    added = med["pimcp_hwm_kb"] + med["helpers_hwm_kb"]
    print(f"| **pimcp adds (pimcp-run + guardian)** | **{mib(added)}** | "
          f"{mib(med['pimcp_rss_kb'] + med['helpers_rss_kb'])} | "
          f"{mib(med['pimcp_anon_kb'] + med['helpers_anon_kb'])} | "
          f"{mib(med['pimcp_private_dirty_kb'] + med['helpers_private_dirty_kb'])} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
