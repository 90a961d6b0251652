#!/usr/bin/env python3
"""Search quality: how well `pimcp-run search` (the ranking the `mcp` tool's search uses) finds the gold tool for the
queries of `queries.json`, over the tools of four real servers (server-everything, server-filesystem, server-memory,
mcp-fixture), per query kind: answered (any hit), top-1, top-3, top-5, MRR.

Two configurations, each in a throwaway sandbox (its own HOME, agent and data directories,
PIMCP_CONFIG_MODE=exclusive): `plain`, and `tags`, where the set's tags are the servers' `searchKeywords`. The servers
are connected once (`status --connect`); every search then runs from the metadata cache.

Usage: run.py --npm DIR [--fixture PATH] [--json] PIMCP_RUN
  --npm DIR: an npm prefix holding @modelcontextprotocol/server-filesystem and server-memory (README.md).
Prints Markdown tables (and with --json one JSON line); exits 1 when a server could not connect.
"""
import argparse, json, os, shutil, subprocess, sys, tempfile
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KINDS = ["name", "description", "typo", "tag", "request", "step"]
TIMEOUT = 120


def servers(npm, fixture, tree):
    pkg = lambda name: os.path.join(npm, "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
    everything = os.path.join(REPO, ".ci", "peers", "node_modules", "@modelcontextprotocol", "server-everything",
                              "dist", "index.js")
    for path in (pkg("server-filesystem"), pkg("server-memory"), everything, fixture):
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing (see bench/search-quality/README.md)")
    node = shutil.which("node") or "node"
    return {
        "everything": {"command": node, "args": [everything, "stdio"]},
        "filesystem": {"command": node, "args": [pkg("server-filesystem"), tree]},
        "memory": {"command": node, "args": [pkg("server-memory")],
                   "env": {"MEMORY_FILE_PATH": os.path.join(tree, "memory.jsonl")}},
        "fixture": {"command": fixture},
    }


class Sandbox:
    def __init__(self, pimcp, entries):
        self.pimcp = pimcp
        self.dir = tempfile.mkdtemp(prefix="search-quality-")
        for d in ("home", "agent", "data", "tree"):
            os.makedirs(os.path.join(self.dir, d))
        self.config = os.path.join(self.dir, "mcp.json")
        with open(self.config, "w") as f:
            json.dump({"mcpServers": entries}, f, indent=1)

    def run(self, *args):
        env = {"PATH": os.environ.get("PATH", ""), "HOME": os.path.join(self.dir, "home"),
               "PI_CODING_AGENT_DIR": os.path.join(self.dir, "agent"),
               "PIMCP_DATA_DIR": os.path.join(self.dir, "data"), "PIMCP_CONFIG_MODE": "exclusive"}
        out = subprocess.run([self.pimcp, "--config", self.config, *args], capture_output=True, text=True,
                             env=env, cwd=self.dir, timeout=TIMEOUT)
        return out

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def measure(box, queries, key=lambda hit: hit["name"]):
    """Runs each query; `key` names a hit as the queries' gold does (by default its exposed name)."""
    connected = box.run("status", "--connect", "--json")
    if connected.returncode != 0:
        raise SystemExit(f"a server did not connect: {connected.stdout[-2000:]} {connected.stderr[-2000:]}")
    rows = []
    for q in queries:
        out = box.run("search", q["query"], "--limit", "5", "--json")
        hits = [key(h) for h in json.loads(out.stdout)["results"]] if out.returncode == 0 else []
        rank = next((i + 1 for i, h in enumerate(hits) if h in q["gold"]), None)
        rows.append({**q, "hits": hits, "rank": rank})
    return rows


def summarize(rows):
    by = defaultdict(list)
    for r in rows:
        by[r["kind"]].append(r)
    by["all"] = rows
    table = {}
    for kind, rs in by.items():
        n = len(rs)
        table[kind] = {
            "n": n,
            "answered": sum(1 for r in rs if r["hits"]) / n,
            "top1": sum(1 for r in rs if r["rank"] == 1) / n,
            "top3": sum(1 for r in rs if r["rank"] and r["rank"] <= 3) / n,
            "top5": sum(1 for r in rs if r["rank"]) / n,
            "mrr": sum(1 / r["rank"] for r in rs if r["rank"]) / n,
        }
    return table


def print_table(name, table):
    print(f"### {name}\n")
    print("| kind | queries | answered | top-1 | top-3 | top-5 | MRR |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in KINDS + ["all"]:
        if kind in table:
            t = table[kind]
            print(f"| {kind} | {t['n']} | {t['answered']:.2f} | {t['top1']:.2f} | {t['top3']:.2f} | {t['top5']:.2f} | "
                  f"{t['mrr']:.3f} |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--npm", required=True)
    parser.add_argument("--fixture", default=os.path.join(REPO, "target", "release", "mcp-fixture"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true", help="list the queries whose gold is not first")
    parser.add_argument("pimcp_run")
    args = parser.parse_args()
    with open(os.path.join(HERE, "queries.json")) as f:
        data = json.load(f)
    results = {}
    for config in ("plain", "tags"):
        tree = tempfile.mkdtemp(prefix="search-quality-tree-")
        entries = servers(args.npm, os.path.abspath(args.fixture), tree)
        if config == "tags":
            for tool, words in data["tags"].items():
                server, original = tool.split("_", 1)
                entries[server].setdefault("searchKeywords", {})[original] = words
        box = Sandbox(os.path.abspath(args.pimcp_run), entries)
        try:
            rows = measure(box, data["queries"])
        finally:
            box.remove()
            shutil.rmtree(tree, ignore_errors=True)
        results[config] = {"table": summarize(rows), "rows": rows}
        print_table(f"`{config}` configuration", results[config]["table"])
        if args.misses:
            for r in rows:
                if r["rank"] != 1:
                    print(f"- {r['kind']}: `{r['query']}` → {r['hits'][:3] or 'nothing'} (gold {r['gold'][0]}, "
                          f"rank {r['rank']})")
            print()
    if args.json:
        print(json.dumps({config: r["table"] for config, r in results.items()}))


if __name__ == "__main__":
    main()
