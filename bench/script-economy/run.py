#!/usr/bin/env python3
"""Context economy of `mcpScript`: what a model reads to do three multi-step tasks against real servers
(server-filesystem on a temporary tree, server-memory, server-everything), three ways:

  (a) `mcp` alone, step by step: a search, then one `mcp({tool})` call per step; the model reads every result;
  (b) `mcpScript`: the same search, then one script that does every step and returns only the answer;
  (c) every upstream tool exposed directly (a host without a proxy): no search, one call per step, and the model has
      read every tool definition of the three servers.

Per task and way: the model's calls and the characters it reads (tool definitions read once per session, plus every
result text). The scripted model knows the steps; it is the same model in (a), (b) and (c), so the difference is the
surface alone. Every answer is checked (the files found, the graph, the sum), so a way that did not do the task
shows as such.

Usage: run.py --npm DIR PIMCP_RUN
  --npm DIR: an npm prefix holding @modelcontextprotocol/server-filesystem and server-memory (README.md).
Run it with a Python that has the `mcp` package (`.ci/peers/venv/bin/python`, installed by .ci/setup-peers);
server-everything comes from .ci/peers (EVERYTHING overrides it). Prints Markdown tables, then one JSON line.
"""
import argparse, json, os, re, sys

import anyio

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "first-session"))
import context  # noqa: E402  (the sandbox, the session helper and the direct listing of first-session)

SERVERS = ["everything", "filesystem", "memory"]
CITIES = ["New York", "Chicago", "Los Angeles"]
# The project tree server-filesystem serves: (path, text). Four files mention TODO.
FILES = [
    ("README.md", "# demo\n\nA small project. " + "It has some docs. " * 40),
    ("src/main.py", "import util\n\n# TODO: parse the arguments\nprint(util.add(2, 3))\n" + "# filler\n" * 60),
    ("src/util.py", "def add(a, b):\n    return a + b\n" + "# helper\n" * 80),
    ("src/io.py", "def read(path):\n    # TODO: handle missing files\n    return open(path).read()\n" + "#\n" * 120),
    ("docs/guide.md", "# Guide\n\n" + "Use the tool. " * 120),
    ("docs/faq.md", "# FAQ\n\nQ: Why?\nA: TODO write the answers.\n" + "More text. " * 90),
    ("tests/test_util.py", "from src import util\n\ndef test_add():\n    assert util.add(1, 2) == 3\n" + "#\n" * 50),
    ("tests/test_io.py", "# TODO: a test for read()\n" + "pass\n" * 70),
    ("notes.txt", "meeting notes\n" + "- item\n" * 100),
]


class Box(context.Sandbox):
    def __init__(self, env, script_mode):
        super().__init__(env, SERVERS)
        for path, text in FILES:
            full = os.path.join(self.tree, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        with open(self.config) as f:
            config = json.load(f)
        config["settings"] = {"scriptMode": script_mode}
        with open(self.config, "w") as f:
            json.dump(config, f, indent=1)


def expected(box):
    files = sorted(p for p, t in FILES if "TODO" in t)
    return {os.path.join(box.tree, p): os.path.getsize(os.path.join(box.tree, p)) for p in files}


# ---------------------------------------------------------------------------------------------------------------
# The three tasks: the steps a model takes, as (tool, args) or, for the model's own reasoning between steps, code.

FS_SCRIPT = r"""
const text = r => typeof r === "string" ? r : typeof r.content === "string" ? r.content : JSON.stringify(r);
const tree = JSON.parse(text(await tools.call("filesystem_directory_tree", {path: ROOT})));
const files = [];
const walk = (nodes, dir) => nodes.forEach(n => n.type === "file" ? files.push(dir + "/" + n.name)
                                                                 : walk(n.children || [], dir + "/" + n.name));
walk(tree, ROOT);
const all = text(await tools.call("filesystem_read_multiple_files", {paths: files}));
const body = f => (all.split(f + ":\n")[1] || "").split("\n---\n")[0];
const hits = files.filter(f => body(f).includes("TODO"));
const infos = await Promise.all(hits.map(path => tools.call("filesystem_get_file_info", {path})));
return Object.fromEntries(hits.map((path, i) => [path, Number(text(infos[i]).match(/size: (\d+)/)[1])]));
"""

MEMORY_ENTITIES = [
    {"name": "Ada", "entityType": "person", "observations": ["writes the parser"]},
    {"name": "Parser", "entityType": "component", "observations": ["reads the config"]},
    {"name": "Config", "entityType": "file", "observations": ["lives in ~/.pi"]},
]
MEMORY_RELATIONS = [
    {"from": "Ada", "to": "Parser", "relationType": "maintains"},
    {"from": "Parser", "to": "Config", "relationType": "reads"},
]

MEMORY_SCRIPT = r"""
await tools.call("memory_create_entities", {entities: ENTITIES});
await tools.call("memory_create_relations", {relations: RELATIONS});
const graph = await tools.call("memory_read_graph", {});
const g = typeof graph === "string" ? JSON.parse(graph) : graph;  // structuredContent: the graph itself
return {entities: g.entities.map(e => e.name), relations: g.relations.map(r => `${r.from} ${r.relationType} ${r.to}`)};
"""

SUM_SCRIPT = r"""
const reports = await Promise.all(CITIES.map(location => tools.call("everything_get-structured-content", {location})));
const sum = reports.reduce((total, r) => total + r.temperature, 0);
return await tools.call("everything_echo", {message: `sum of temperatures: ${sum}`});
"""


def files_of(tree_text, root):
    """The file paths of server-filesystem's `directory_tree` answer, under `root`."""
    files = []

    def walk(nodes, d):
        for n in nodes:
            if n["type"] == "file":
                files.append(d + "/" + n["name"])
            else:
                walk(n.get("children", []), d + "/" + n["name"])
    walk(json.loads(tree_text), root)
    return files


def mentioning(files, text, word):
    """The files whose part of a `read_multiple_files` answer (`path:\n…\n---\n`) holds `word`."""
    return [f for f in files if word in text.split(f + ":\n", 1)[1].split("\n---\n", 1)[0]]


def js(value):
    return json.dumps(value)


async def call(client, name, arguments, texts):
    with anyio.fail_after(context.TIMEOUT):
        result = await client.call_tool(name, arguments)
    text = context.text_of(result)
    texts.append(text)
    return text, bool(result.is_error)


async def mcp(client, arguments, texts):
    return await call(client, "mcp", arguments, texts)


async def step_by_step(client, box):
    """(a): each task through `mcp` alone."""
    out = {}
    # Filesystem.
    texts = []
    await mcp(client, {"search": "list files in a directory"}, texts)
    tree, err = await mcp(client, {"tool": "filesystem_directory_tree", "args": {"path": box.tree}}, texts)
    if err:
        raise SystemExit(f"fs_directory_tree failed: {tree}")
    files = files_of(tree, box.tree)
    text, _ = await mcp(client, {"tool": "filesystem_read_multiple_files", "args": {"paths": files}}, texts)
    hits = mentioning(files, text, "TODO")
    sizes = {}
    for path in hits:
        info, _ = await mcp(client, {"tool": "filesystem_get_file_info", "args": {"path": path}}, texts)
        sizes[path] = int(re.search(r"size: (\d+)", info).group(1))
    out["filesystem"] = {"texts": texts, "ok": sizes == expected(box)}
    # Memory.
    texts = []
    await mcp(client, {"search": "create entities in the knowledge graph"}, texts)
    await mcp(client, {"tool": "memory_create_entities", "args": {"entities": MEMORY_ENTITIES}}, texts)
    await mcp(client, {"tool": "memory_create_relations", "args": {"relations": MEMORY_RELATIONS}}, texts)
    graph, _ = await mcp(client, {"tool": "memory_read_graph", "args": {}}, texts)
    out["memory"] = {"texts": texts, "ok": all(e["name"] in graph for e in MEMORY_ENTITIES) and "maintains" in graph}
    # Everything.
    texts = []
    await mcp(client, {"search": "weather temperature of a city"}, texts)
    total = 0
    for city in CITIES:
        report, _ = await mcp(client, {"tool": "everything_get-structured-content", "args": {"location": city}},
                              texts)
        total += json.loads(report)["temperature"]
    echoed, _ = await mcp(client, {"tool": "everything_echo", "args": {"message": f"sum of temperatures: {total}"}},
                          texts)
    out["everything"] = {"texts": texts, "ok": f"sum of temperatures: {total}" in echoed, "sum": total}
    return out


async def scripted(client, box):
    """(b): the same discovery, then one `mcpScript` per task."""
    out = {}
    texts = []
    await mcp(client, {"search": "list files in a directory"}, texts)
    code = f"const ROOT = {js(box.tree)};\n" + FS_SCRIPT
    result, err = await call(client, "mcpScript", {"code": code}, texts)
    ok = not err and json.loads(result) == expected(box)
    if not ok:
        print(f"filesystem script: {result}\nexpected {expected(box)}", file=sys.stderr)
    out["filesystem"] = {"texts": texts, "ok": ok}
    texts = []
    await mcp(client, {"search": "create entities in the knowledge graph"}, texts)
    code = f"const ENTITIES = {js(MEMORY_ENTITIES)};\nconst RELATIONS = {js(MEMORY_RELATIONS)};\n" + MEMORY_SCRIPT
    result, err = await call(client, "mcpScript", {"code": code}, texts)
    answer = json.loads(result) if not err else {}
    out["memory"] = {"texts": texts, "ok": sorted(answer.get("entities", [])) == ["Ada", "Config", "Parser"]
                     and len(answer.get("relations", [])) == 2}
    texts = []
    await mcp(client, {"search": "weather temperature of a city"}, texts)
    result, err = await call(client, "mcpScript", {"code": f"const CITIES = {js(CITIES)};\n" + SUM_SCRIPT}, texts)
    out["everything"] = {"texts": texts, "ok": not err and "sum of temperatures: " in result}
    return out


async def direct(env, box):
    """(c): every tool of the three servers listed to the model; the steps of (a) without the searches."""
    definitions = sum(context.direct_listing(box, name)["definitions"] for name in SERVERS)
    out = {}
    spec = lambda name: [box.servers[name]["command"], *box.servers[name]["args"]]
    async with context.session("direct filesystem", spec("filesystem"), box.server_env("filesystem"), box.dir,
                               box.log) as client:
        texts = []
        tree, _ = await call(client, "directory_tree", {"path": box.tree}, texts)
        files = files_of(tree, box.tree)
        text, _ = await call(client, "read_multiple_files", {"paths": files}, texts)
        hits = mentioning(files, text, "TODO")
        for path in hits:
            await call(client, "get_file_info", {"path": path}, texts)
        out["filesystem"] = {"texts": texts, "ok": len(hits) == len(expected(box))}
    async with context.session("direct memory", spec("memory"), box.server_env("memory"), box.dir,
                               box.log) as client:
        texts = []
        await call(client, "create_entities", {"entities": MEMORY_ENTITIES}, texts)
        await call(client, "create_relations", {"relations": MEMORY_RELATIONS}, texts)
        graph, _ = await call(client, "read_graph", {}, texts)
        out["memory"] = {"texts": texts, "ok": "maintains" in graph}
    async with context.session("direct everything", spec("everything"), box.server_env("everything"), box.dir,
                               box.log) as client:
        texts, total = [], 0
        for city in CITIES:
            report, _ = await call(client, "get-structured-content", {"location": city}, texts)
            total += json.loads(report)["temperature"]
        echoed, _ = await call(client, "echo", {"message": f"sum of temperatures: {total}"}, texts)
        out["everything"] = {"texts": texts, "ok": str(total) in echoed}
    return definitions, out


async def surface(env, script_mode, run):
    box = Box(env, script_mode)
    try:
        async with context.session(f"pimcp-run scriptMode={script_mode}", [env.pimcp, "--config", box.config],
                                   box.env(), box.dir, box.log) as client:
            with anyio.fail_after(context.TIMEOUT):
                listed = await client.list_tools()
            raw = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
            definitions = sum(context.chars(context.definition(t)) for t in raw)
            return definitions, [t["name"] for t in raw], await run(client, box)
    finally:
        box.remove()


TASK_NAMES = {
    "filesystem": "files under a tree that mention TODO, with their sizes (server-filesystem)",
    "memory": "three entities and two relations, then the graph read back (server-memory)",
    "everything": "the temperatures of three cities summed and echoed (server-everything)",
}


async def amain(args):
    env = context.Env(args.pimcp_run, args.npm)
    a_defs, a_tools, a = await surface(env, False, step_by_step)
    b_defs, b_tools, b = await surface(env, True, scripted)
    box = Box(env, False)
    try:
        c_defs, c = await direct(env, box)
    finally:
        box.remove()
    rows = []
    print("| task | (a) `mcp` step by step: calls | chars read | (b) `mcpScript`: calls | chars read | "
          "(b) vs (a) | of which the search (a = b) | after the search: (b) vs (a) | (c) every tool direct: calls | "
          "chars read |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key in SERVERS:
        ra, rb, rc = a[key], b[key], c[key]
        ca, cb, cc = (sum(len(t) for t in r["texts"]) for r in (ra, rb, rc))
        ok = lambda r: "" if r["ok"] else " (not done)"
        saved = 1 - cb / ca
        search = len(ra["texts"][0])
        assert search == len(rb["texts"][0]), "the same search reads the same in (a) and (b)"
        after = 1 - (cb - search) / (ca - search)
        rows.append({"task": key, "a": {"calls": len(ra["texts"]), "chars": ca, "ok": ra["ok"]},
                     "b": {"calls": len(rb["texts"]), "chars": cb, "ok": rb["ok"]},
                     "c": {"calls": len(rc["texts"]), "chars": cc, "ok": rc["ok"]}, "saved": saved,
                     "search": search, "saved_after_search": after})
        print(f"| {TASK_NAMES[key]} | {len(ra['texts'])}{ok(ra)} | {ca:,} | {len(rb['texts'])}{ok(rb)} | {cb:,} | "
              f"−{saved:.0%} | {search:,} | −{after:.0%} | {len(rc['texts'])}{ok(rc)} | {cc:,} |")
    total = lambda k: sum(r[k]["chars"] for r in rows)
    print(f"| tool definitions, read once | – | {a_defs:,} | – | {b_defs:,} | | | | – | {c_defs:,} |")
    print(f"| **session** | {sum(r['a']['calls'] for r in rows)} | **{a_defs + total('a'):,}** | "
          f"{sum(r['b']['calls'] for r in rows)} | **{b_defs + total('b'):,}** | "
          f"−{1 - (b_defs + total('b')) / (a_defs + total('a')):.0%} | | | {sum(r['c']['calls'] for r in rows)} | "
          f"**{c_defs + total('c'):,}** |")
    print("\n(b) vs (a): the characters (b) reads for the task against (a); the definitions are read once per session "
          "and counted in the session row.")
    print(json.dumps({"versions": env.versions, "definitions": {"a": a_defs, "b": b_defs, "c": c_defs},
                      "tools": {"a": a_tools, "b": b_tools}, "tasks": rows, "left_behind": context.LEFT_BEHIND}))
    if not all(r[k]["ok"] for r in rows for k in "abc"):
        raise SystemExit("a task was not done")
    if context.LEFT_BEHIND:
        raise SystemExit(f"processes left behind: {context.LEFT_BEHIND}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--npm", required=True)
    parser.add_argument("pimcp_run")
    anyio.run(amain, parser.parse_args())


if __name__ == "__main__":
    main()
