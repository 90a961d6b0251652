#!/usr/bin/env python3
"""Search quality on a held-out public set: MCPToolBench++ (github.com/mcp-tool-bench/MCPToolBenchPP), whose data
this repository does not ship and whose queries the ranking is not tuned to. Each record is a whole user request
("Find the latest news about the cryptocurrency market.") with its gold tool and the tools that answer it as well
(`similar_tools`). The catalog is the union of the tools the records list, per server, served over stdio by
`catalog_server.py` (the PyPI `mcp` package); every query then runs through `pimcp-run search --limit 5`.

Usage: heldout.py --mcptoolbench DIR [--python PY] [--npm NPM [--fixture PATH]] [--misses] [--json] PIMCP_RUN
  DIR: a checkout of MCPToolBenchPP (its data/<category>/*.json files; the categories found are used).
  PY: a Python with the `mcp` package (default: .ci/peers/venv/bin/python, made by `bash .ci/setup-peers`).
  NPM: also connect the own set's four servers (run.py's --npm), 60 more tools none of the requests asks for.
Prints a Markdown table per category (kind `request`); exits 1 when a server could not connect.
"""
import argparse, glob, json, os, shutil, sys, tempfile
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import REPO, Sandbox, measure, servers, summarize  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# The record files of each category (the `*_demo.json` files repeat a few of them).
FILES = ["browser/browser_0724_single_v3.json", "file_system/filesystem_0723_single.json",
         "finance/finance_0724_single_v3.json", "search/search_0725_single_v2.json",
         "map/map_0717_single_multi_lang_500.json", "pay/pay_0723_single.json"]


def server_name(name):
    """A pimcp server name from the set's (letters, digits, `-`)."""
    return "".join(c if c.isalnum() or c == "-" else "-" for c in name)


def load(root):
    catalog, queries = defaultdict(dict), []
    for rel in FILES:
        path = os.path.join(root, "data", rel)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            print(f"(skipped: {rel} is not in {root})", file=sys.stderr)
            continue
        with open(path) as f:
            records = json.load(f)
        category = rel.split("/")[0]
        for r in records:
            schemas = {t["name"]: t for t in r["tools"]}
            for server, names in r["mcp_tools_dict"].items():
                for name in names:
                    if name in schemas:
                        t = schemas[name]
                        catalog[server_name(server)][name] = {
                            "name": name, "description": t.get("description", ""),
                            "inputSchema": t.get("input_schema") or t.get("inputSchema") or {"type": "object"}}
            label = r["function_call_label"]
            if len(label) != 1:
                continue
            # Gold by server and the server's own tool name (pimcp does not repeat a prefix a name already has).
            gold = [f"{server_name(t['mcp_server'])}/{t['name']}"
                    for t in [label[0], *(label[0].get("similar_tools") or [])]]
            queries.append({"kind": category, "query": r["query"], "gold": gold})
    return {server: list(tools.values()) for server, tools in catalog.items()}, queries


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mcptoolbench", required=True)
    parser.add_argument("--python", default=os.path.join(REPO, ".ci", "peers", "venv", "bin", "python"))
    parser.add_argument("--npm", help="also connect the own set's servers, as distractors")
    parser.add_argument("--fixture", default=os.path.join(REPO, "target", "release", "mcp-fixture"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true", help="list the queries whose gold is not in the top 5")
    parser.add_argument("pimcp_run")
    args = parser.parse_args()
    catalog, queries = load(args.mcptoolbench)
    if not queries:
        raise SystemExit(f"no MCPToolBench++ records under {args.mcptoolbench}/data")
    work = tempfile.mkdtemp(prefix="search-heldout-")
    tools = os.path.join(work, "tools.json")
    with open(tools, "w") as f:
        json.dump(catalog, f)
    server = os.path.join(HERE, "catalog_server.py")
    entries = {name: {"command": args.python, "args": [server, tools, name]} for name in catalog}
    if args.npm:
        tree = os.path.join(work, "tree")
        os.makedirs(tree)
        entries.update(servers(args.npm, os.path.abspath(args.fixture), tree))
    box = Sandbox(os.path.abspath(args.pimcp_run), entries)
    try:
        rows = measure(box, queries, key=lambda hit: f"{hit['server']}/{hit['originalName']}")
    finally:
        box.remove()
        shutil.rmtree(work, ignore_errors=True)
    table = summarize(rows)
    n_tools = sum(len(t) for t in catalog.values())
    others = " (and the own set's 4 servers)" if args.npm else ""
    print(f"### MCPToolBench++: {len(queries)} requests over {n_tools} tools of {len(catalog)} servers{others}\n")
    print("| category | queries | answered | top-1 | top-3 | top-5 | MRR |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind in sorted(table, key=lambda k: (k == "all", k)):
        t = table[kind]
        print(f"| {kind} | {t['n']} | {t['answered']:.2f} | {t['top1']:.2f} | {t['top3']:.2f} | {t['top5']:.2f} | "
              f"{t['mrr']:.3f} |")
    print()
    if args.misses:
        for r in rows:
            if r["rank"] is None:
                print(f"- {r['kind']}: `{r['query']}` → {r['hits'][:3] or 'nothing'} (gold {r['gold'][0]})")
    if args.json:
        print(json.dumps(table))


if __name__ == "__main__":
    main()
