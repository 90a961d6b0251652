#!/usr/bin/env python3
"""First session: what the model reads, and how long its first search takes on a fresh install.

Three measurements against one `pimcp-run` binary, each `pimcp-run` in a throwaway sandbox (its own HOME,
PI_CODING_AGENT_DIR, PIMCP_DATA_DIR and XDG_DATA_HOME, PIMCP_CONFIG_MODE=exclusive, `--config <file>`):

1. definition: the `mcp` tool definition (`{"name","description","inputSchema"}` as `tools/list` returns it,
   compact JSON, characters) with 1, 3 and 15 configured servers, without and with a short `description` per server,
   and the same servers' own tool definitions as a host without a proxy would list them (the sum over every upstream
   tool, each server listed directly with a host's client capabilities: roots, sampling, elicitation).
2. transcript: a fresh sandbox with server-everything, mcp-fixture and (if installed) server-filesystem on a small
   temporary tree. A scripted model that has only the `mcp` tool does two tasks by intent: "add two numbers" (search,
   then call server-everything's hit; if the search shows none, one more search with another word) and "echo a
   message" (search `echo`, call `everything_echo`). Per task: calls, characters of every result text, time; the
   definition is read once. Beside it, what a host exposing every upstream tool directly reads for the same tasks.
3. latency: the first `mcp({search})` on a fresh install (time from the client's `tools/call` to its answer), against
   each configured server's own start measured in the same run (spawned directly by the same client: `initialize`
   handshake, then `tools/list`), interleaved; then the first search after a restart of pimcp-run on the same data
   directory (metadata cached). Medians and ranges over --runs rounds, after one untimed warm-up round.

Every process started is in its own process group; after each session every process it left behind is killed (and
counted). Prints Markdown tables, then one JSON line.

Usage: context.py [--runs N] [--only definition,transcript,latency] [--npm DIR] [--trace] PIMCP_RUN
  --npm DIR: an npm prefix holding @modelcontextprotocol/server-filesystem and server-memory (README.md); without it
  their places are taken by mcp-fixture instances.
  --trace: the fresh installs of the latency part write pimcp's protocol trace (`settings.trace`), from which the
  first search is split into pimcp-run's and the upstreams' parts (millisecond timestamps).
Env: FIXTURE (default: mcp-fixture next to PIMCP_RUN, else <repo>/target/release/mcp-fixture), EVERYTHING (default
<repo>/.ci/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js), NODE (default `node`).
Run it with a Python that has the `mcp` package (`.ci/peers/venv/bin/python`, installed by .ci/setup-peers).
"""
import argparse, datetime, json, os, re, select, shutil, signal, statistics, subprocess, sys, tempfile, time

from contextlib import asynccontextmanager

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 60.0  # every session, request and exit wait is bounded by this many seconds
# What a host such as an IDE agent declares when it connects to a server directly.
HOST_CAPS = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}

# Server names and descriptions, in the order servers are added to a configuration.
DESCRIPTIONS = {
    "everything": "Reference server: echo, sums, sample resources and prompts",
    "filesystem": "Read and write files under the project",
    "memory": "Knowledge graph memory: entities, relations, observations",
    "fixture": "Test server: echo, add, slow and failing tools",
    "github": "Issues, pull requests and repositories on GitHub",
    "linear": "Linear issues, projects and cycles",
    "slack": "Read and post Slack messages",
    "notion": "Search and edit Notion pages",
    "postgres": "Read-only SQL on the analytics database",
    "sentry": "Sentry errors and releases",
    "calendar": "Team calendar: events and free slots",
    "drive": "Shared drive documents",
    "browser": "Headless browser: open pages, click, screenshot",
    "search": "Web search",
    "jira": "Jira tickets of the support team",
}
ORDER = list(DESCRIPTIONS)


def chars(value):
    """Characters of a JSON value serialized compactly, as on the wire."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def definition(tool):
    """What a host passes to the model for one tool: name, description, input schema."""
    return {k: tool[k] for k in ("name", "description", "inputSchema") if k in tool}


def tokens(n):
    return round(n / 4)


# ---------------------------------------------------------------------------------------------------------------
# Processes


def _proc_table():
    """pid → (ppid, pgid, start time) for every live (not zombie) process."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            table[int(entry)] = (int(fields[1]), int(fields[2]), fields[19])
    return table


def descendants(root=None):
    """{(pid, start time): pgid} of process `root` and every process below it (default: below this one)."""
    table = _proc_table()
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = {}, [root] if root else list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        if pid in table:
            found[(pid, table[pid][2])] = table[pid][1]
            todo.extend(children.get(pid, []))
    return found


def child_running(argv):
    """The pid of this process's child running `argv` (its program compared by base name), or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")[:-1]
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) != os.getpid() or not cmdline:
            continue
        words = [w.decode(errors="replace") for w in cmdline]
        if os.path.basename(words[0]) == os.path.basename(argv[0]) and words[1:] == list(argv[1:]):
            return int(entry)
    return None


def _name(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            words = [os.path.basename(w.decode(errors="replace")) for w in f.read().split(b"\0")[:2]]
        return " ".join(w for w in words if w)
    except OSError:
        return "?"


def reap(snapshot, grace=1.0):
    """Waits up to `grace` s for every process in `snapshot` to end, then kills the rest (each one's process group).
    Returns [(name, ms it outlived the call, killed?)] for the processes still running when called."""
    t0, late = time.perf_counter(), {}
    while True:
        table = _proc_table()
        alive = {k: g for k, g in snapshot.items() if k[0] in table and table[k[0]][2] == k[1]}
        for key in alive:
            late.setdefault(key, [_name(key[0]), 0.0, False])
        for key, entry in late.items():
            if key in alive:
                entry[1] = (time.perf_counter() - t0) * 1000
        if not alive or time.perf_counter() - t0 >= grace:
            break
        time.sleep(0.01)
    own = os.getpgrp()
    for (pid, start), pgid in alive.items():
        late[(pid, start)][2] = True
        try:
            if pgid != own:
                os.killpg(pgid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return [tuple(v) for v in late.values()]


LEFT_BEHIND = []  # (session, process, ms it outlived the session's process, killed?)
STAYED = []  # servers still running 2 s after their stdin closed (then terminated)


class Raw:
    """A minimal JSON-RPC client over a child's stdio (exact wire JSON; every wait bounded)."""

    def __init__(self, argv, env, cwd, log, roots=()):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env,
                                     cwd=cwd, start_new_session=True)
        self.buf, self.next_id, self.roots = b"", 1, list(roots)

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def _line(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("no answer in time")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError("the server closed its stdout")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line) if line.strip() else None

    def request(self, method, params=None, timeout=TIMEOUT):
        id_ = self.next_id
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        deadline = time.monotonic() + timeout
        while True:
            m = self._line(deadline)
            if m is None:
                continue
            if "method" in m and "id" in m:  # a request from the server
                if m["method"] == "roots/list":
                    self.send({"jsonrpc": "2.0", "id": m["id"], "result": {"roots": self.roots}})
                elif m["method"] == "ping":
                    self.send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
                else:
                    self.send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "not here"}})
            elif m.get("id") == id_:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]

    def handshake(self, caps):
        result = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": caps,
                                             "clientInfo": {"name": "first-session", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def tools(self):
        tools, cursor = [], None
        while True:
            page = self.request("tools/list", {"cursor": cursor} if cursor else None)
            tools += page.get("tools", [])
            cursor = page.get("nextCursor")
            if not cursor:
                return tools

    def close(self, what):
        """Closes stdin; a server still running 2 s later gets SIGTERM, then SIGKILL (its process group).
        Returns the seconds from stdin close to exit; processes left behind by an exited server are recorded."""
        snapshot = descendants()
        t0 = time.perf_counter()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                try:
                    os.killpg(self.proc.pid, sig)
                except OSError:
                    pass
            try:
                self.proc.wait(2)
                break
            except subprocess.TimeoutExpired:
                if sig is None:
                    STAYED.append(what)
        exited = time.perf_counter() - t0
        LEFT_BEHIND.extend((what, *late) for late in reap(snapshot))
        return exited


# ---------------------------------------------------------------------------------------------------------------
# Servers and sandboxes


class Env:
    """Paths to the upstream servers."""

    def __init__(self, pimcp, npm):
        self.pimcp = os.path.abspath(pimcp)
        beside = os.path.join(os.path.dirname(self.pimcp), "mcp-fixture")
        self.fixture = os.path.abspath(os.environ.get("FIXTURE") or (
            beside if os.path.exists(beside) else os.path.join(REPO, "target", "release", "mcp-fixture")))
        self.everything = os.environ.get("EVERYTHING") or os.path.join(
            REPO, ".ci", "peers", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
        self.node = shutil.which(os.environ.get("NODE", "node")) or "node"
        pkg = lambda name: os.path.join(npm, "node_modules", "@modelcontextprotocol", name) if npm else None
        self.filesystem = pkg("server-filesystem")
        self.memory = pkg("server-memory")
        for path in (self.pimcp, self.fixture, self.everything):
            if not os.path.exists(path):
                raise SystemExit(f"{path} is missing")
        for name in ("filesystem", "memory"):
            path = getattr(self, name)
            if path and not os.path.exists(os.path.join(path, "dist", "index.js")):
                raise SystemExit(f"{path}/dist/index.js is missing (see bench/first-session/README.md)")
        self.versions = {"everything": self._version(os.path.dirname(os.path.dirname(self.everything)))}
        for name in ("filesystem", "memory"):
            if getattr(self, name):
                self.versions[name] = self._version(getattr(self, name))

    @staticmethod
    def _version(package_dir):
        try:
            with open(os.path.join(package_dir, "package.json")) as f:
                return json.load(f).get("version")
        except OSError:
            return None

    def spec(self, name, box):
        """The config entry of server `name` in sandbox `box` (no description)."""
        if name == "everything":
            return {"command": self.node, "args": [self.everything, "stdio"]}
        if name == "filesystem" and self.filesystem:
            return {"command": self.node, "args": [os.path.join(self.filesystem, "dist", "index.js"), box.tree]}
        if name == "memory" and self.memory:
            return {"command": self.node, "args": [os.path.join(self.memory, "dist", "index.js")],
                    "env": {"MEMORY_FILE_PATH": os.path.join(box.dir, "memory.jsonl")}}
        if name == "fixture":
            return {"command": self.fixture, "args": ["--name", "fixture"]}
        # A stand-in for a service's server: mcp-fixture's 14 built-in tools plus 10 synthetic ones.
        seed = ORDER.index(name)
        return {"command": self.fixture, "args": ["--name", name, "--tools", "10", "--seed", str(seed)]}

    def kind(self, name):
        if name == "everything" or (name == "filesystem" and self.filesystem) or (name == "memory" and self.memory):
            return name
        return "fixture" if name == "fixture" else "fixture --tools 10"


class Sandbox:
    """A throwaway install: HOME, agent dir, data dirs, a config file and a small tree for server-filesystem."""

    def __init__(self, env, servers, descriptions=False, trace=False):
        self.dir = tempfile.mkdtemp(prefix="first-session-")
        self.home = os.path.join(self.dir, "home")
        self.agent = os.path.join(self.dir, "agent")
        self.data = os.path.join(self.dir, "data")
        self.xdg = os.path.join(self.dir, "xdg")
        self.tree = os.path.join(self.dir, "project")
        for d in (self.home, self.agent, self.data, self.xdg, os.path.join(self.tree, "src")):
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(self.tree, "README.md"), "w") as f:
            f.write("# demo\n\nA small project.\n")
        with open(os.path.join(self.tree, "src", "main.py"), "w") as f:
            f.write("print(2 + 3)\n")
        self.config = os.path.join(self.dir, "mcp.json")
        self.servers = {}
        for name in servers:
            entry = env.spec(name, self)
            if descriptions:
                entry["description"] = DESCRIPTIONS[name]
            self.servers[name] = entry
        self.trace = os.path.join(self.dir, "trace.jsonl") if trace else None
        config = {"mcpServers": self.servers}
        if trace:
            config["settings"] = {"trace": {"enabled": True, "file": self.trace}}
        with open(self.config, "w") as f:
            json.dump(config, f, indent=1)
        self.log = open(os.path.join(self.dir, "stderr.log"), "ab")

    def env(self):
        return {"PATH": os.environ.get("PATH", ""), "HOME": self.home, "PI_CODING_AGENT_DIR": self.agent,
                "PIMCP_DATA_DIR": self.data, "XDG_DATA_HOME": self.xdg, "PIMCP_CONFIG_MODE": "exclusive"}

    def server_env(self, name):
        return {**self.env(), **self.servers[name].get("env", {})}

    def remove(self):
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def load():
    return open("/proc/loadavg").read().split()[0]


def loads(samples):
    values = sorted(float(x) for x in samples)
    return f"{values[0]:.2f}–{values[-1]:.2f}" if values else "?"


# ---------------------------------------------------------------------------------------------------------------
# 1. Definition


SETS = {1: ORDER[:1], 3: ORDER[:3], 15: ORDER[:15]}  # configurations of the definition part


def direct_listing(box, name):
    """One upstream listed directly, as a host without a proxy lists it: {tools, definitions, objects, instructions}."""
    root = [{"uri": "file://" + box.tree, "name": "project"}]
    raw = Raw([box.servers[name]["command"], *box.servers[name]["args"]], box.server_env(name), box.dir, box.log,
              roots=root)
    try:
        init = raw.handshake(HOST_CAPS)
        time.sleep(0.3)  # server-everything registers capability-dependent tools after `initialized`
        tools = raw.tools()
    finally:
        raw.close(f"direct {name}")
    return {"tools": len(tools), "definitions": sum(chars(definition(t)) for t in tools),
            "objects": sum(chars(t) for t in tools), "instructions": len(init.get("instructions") or "")}


def measure_definition(env):
    """The `mcp` definition per configuration, and every upstream's own tools listed directly."""
    rows, direct, load_at = [], {}, [load()]
    box = Sandbox(env, ORDER)
    try:
        for name in ORDER:  # each upstream once
            direct[name] = {"kind": env.kind(name), **direct_listing(box, name)}
    finally:
        box.remove()
    for n, names in SETS.items():
        row = {"servers": n, "names": names, "upstream_tools": sum(direct[s]["tools"] for s in names),
               "direct_definitions": sum(direct[s]["definitions"] for s in names),
               "direct_objects": sum(direct[s]["objects"] for s in names),
               "direct_instructions": sum(direct[s]["instructions"] for s in names)}
        for described in (False, True):
            box = Sandbox(env, names, descriptions=described)
            try:
                raw = Raw([env.pimcp, "--config", box.config], box.env(), box.dir, box.log)
                try:
                    init = raw.handshake({})
                    tools = raw.tools()
                finally:
                    raw.close(f"pimcp-run definition {n}")
            finally:
                box.remove()
            key = "with" if described else "without"
            row[f"tools_{key}"] = [t["name"] for t in tools]
            row[f"definition_{key}"] = sum(chars(definition(t)) for t in tools)
            row[f"list_{key}"] = chars({"tools": tools})
            row[f"instructions_{key}"] = len(init.get("instructions") or "")
            listed = tools[0]["description"].split("\nServers: ", 1)[-1]
            row[f"servers_{key}"] = listed
            row[f"named_{key}"] = sum(1 for s in names if re.search(rf"(^|, ){re.escape(s)}( \(|,|$)", listed))
        rows.append(row)
    load_at.append(load())
    return {"rows": rows, "direct": direct, "load": load_at}


def print_definition(res):
    print("### 1. The `mcp` definition against the servers' own tool definitions\n")
    print("| servers | upstream tools | direct: tool definitions | `mcp` definition (servers named) | "
          "with descriptions | direct ÷ `mcp` | instructions: direct / pimcp-run |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in res["rows"]:
        print(f"| {r['servers']} | {r['upstream_tools']} | {r['direct_definitions']:,} chars "
              f"(≈ {tokens(r['direct_definitions']):,} tok) | {r['definition_without']:,} (≈ "
              f"{tokens(r['definition_without'])}; {r['named_without']}) | {r['definition_with']:,} (≈ "
              f"{tokens(r['definition_with'])}; {r['named_with']}) | "
              f"{r['direct_definitions'] / r['definition_without']:.1f}× / "
              f"{r['direct_definitions'] / r['definition_with']:.1f}× | "
              f"{r['direct_instructions']:,} / {r['instructions_without']} |")
    print()
    print("| server | stands for | tools | tool definitions | whole tool objects | instructions |")
    print("|---|---|---:|---:|---:|---:|")
    for name, d in res["direct"].items():
        print(f"| {name} | {d['kind']} | {d['tools']} | {d['definitions']:,} | {d['objects']:,} | "
              f"{d['instructions']:,} |")
    print(f"\n(chars of compact JSON; tokens ≈ chars ÷ 4; load {' → '.join(res['load'])})\n")


# ---------------------------------------------------------------------------------------------------------------
# MCP client sessions (the Python `mcp` client, as a host drives pimcp-run)


def text_of(result):
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


@asynccontextmanager
async def session(what, argv, env, cwd, log, info=None):
    """`async with session(...) as client`: the mcp client over a child, the whole session bounded by TIMEOUT; the
    processes it leaves behind are killed and recorded. `info["exit_s"]`: leaving the block → the child reaped."""
    info = {} if info is None else info
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
    try:
        with anyio.fail_after(TIMEOUT):
            async with Client(stdio_client(params, errlog=log), read_timeout_seconds=TIMEOUT) as client:
                try:
                    yield client
                finally:
                    root = child_running(argv)
                    info["snapshot"] = descendants(root) if root else {}
                    info["closed"] = time.perf_counter()
            info["exit_s"] = time.perf_counter() - info["closed"]
    finally:
        lingered = await anyio.to_thread.run_sync(reap, info.get("snapshot", {}))
        LEFT_BEHIND.extend((what, *late) for late in lingered)


async def timed_call(client, arguments):
    t0 = time.perf_counter()
    with anyio.fail_after(TIMEOUT):
        result = await client.call_tool("mcp", arguments)
    return time.perf_counter() - t0, text_of(result), bool(result.is_error)


HIT = re.compile(r"^(\S+) — ", re.M)


def hits(text):
    """Tool names of a search result text, best first, with the parameter shape under each."""
    out = []
    for m in HIT.finditer(text):
        rest = text[m.end():].split("\n", 2)
        shape = rest[1].strip() if len(rest) > 1 and rest[1].startswith("  {") else ""
        out.append((m.group(1), shape))
    return out


def arguments_for(shape, text):
    """Arguments from a parameter shape such as `{a: number, b: number}`: required fields only."""
    args, numbers = {}, iter((2, 3, 5, 7))
    for name, optional, kind in re.findall(r"(\w+)(\??): (\w+)", shape):
        if optional:
            continue
        args[name] = next(numbers) if kind in ("number", "integer") else text
    return args


# Other ways a model might phrase the two intents: where server-everything's tool ranks for each (not in the tasks).
PHRASINGS = ["add numbers", "add two numbers", "sum", "sum two numbers", "addition", "echo", "echo message",
             "echo a message", "echo back text", "repeat a message"]

TASKS = [
    ("add two numbers", ["add numbers", "sum"], "everything_", "hello", "5"),
    ("echo a message", ["echo"], "everything_", "hello from the first session", "hello from the first session"),
]


async def model(client, steps):
    """The scripted model: for each task, search until a hit of server-everything shows, then call it."""
    tasks = []
    for intent, queries, prefix, text, expect in TASKS:
        task = {"task": intent, "steps": []}
        chosen = None
        for query in queries:
            dt, out, err = await timed_call(client, {"search": query})
            found = hits(out)
            task["steps"].append({"request": {"search": query}, "chars": len(out), "ms": dt * 1000, "error": err,
                                  "hits": [h for h, _ in found]})
            steps.append(out)
            chosen = next(((h, s) for h, s in found if h.startswith(prefix)), None)
            if chosen:
                break
        if chosen:
            request = {"tool": chosen[0], "args": arguments_for(chosen[1], text)}
            dt, out, err = await timed_call(client, request)
            task["steps"].append({"request": request, "chars": len(out), "ms": dt * 1000, "error": err})
            steps.append(out)
            task["ok"] = (not err) and expect in out
        else:
            task["ok"] = False
        task["calls"] = len(task["steps"])
        task["chars"] = sum(s["chars"] for s in task["steps"])
        tasks.append(task)
    return tasks


def transcript_servers(env):
    return ["everything", "fixture"] + (["filesystem"] if env.filesystem else [])


async def measure_transcript(env):
    names = transcript_servers(env)
    box = Sandbox(env, names)
    texts = []
    try:
        load_at = [load()]
        async with session("pimcp-run transcript", [env.pimcp, "--config", box.config], box.env(), box.dir,
                           box.log) as client:
            with anyio.fail_after(TIMEOUT):
                listed = await client.list_tools(cache_mode="bypass")
            raw = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
            definition_chars = sum(chars(definition(t)) for t in raw)
            tasks = await model(client, texts)
            phrasings = []
            for query in PHRASINGS:
                _, out, _ = await timed_call(client, {"search": query})
                found = [h for h, _ in hits(out)]
                want = "everything_get-sum" if query.split()[0] in ("add", "sum", "addition") else "everything_echo"
                phrasings.append({"query": query, "hits": found, "chars": len(out), "wanted": want,
                                  "rank": found.index(want) + 1 if want in found else None})
        # The same tasks on a host that exposes every upstream tool directly: one call each.
        direct = await direct_tasks(env, box, names)
        load_at.append(load())
    finally:
        box.remove()
    return {"servers": names, "definition": definition_chars, "tasks": tasks, "texts": texts, "direct": direct,
            "phrasings": phrasings, "load": load_at}


async def direct_tasks(env, box, names):
    """The two tasks on a host that lists every upstream tool to the model: one call each, on server-everything."""
    defs = sum(direct_listing(box, name)["definitions"] for name in names)
    calls, spec = [], box.servers["everything"]
    async with session("direct everything", [spec["command"], *spec["args"]], box.server_env("everything"), box.dir,
                       box.log) as client:
        for tool, args in (("get-sum", {"a": 2, "b": 3}), ("echo", {"message": "hello from the first session"})):
            t0 = time.perf_counter()
            with anyio.fail_after(TIMEOUT):
                result = await client.call_tool(tool, args)
            calls.append({"tool": tool, "chars": len(text_of(result)), "ms": (time.perf_counter() - t0) * 1000})
    return {"definitions": defs, "calls": calls}


def print_transcript(res):
    print(f"### 2. Two tasks on a fresh install ({', '.join(res['servers'])})\n")
    print("| task | step | request | result chars | ms |")
    print("|---|---:|---|---:|---:|")
    for task in res["tasks"]:
        for i, step in enumerate(task["steps"], 1):
            request = json.dumps(step["request"], separators=(", ", ": "))
            print(f"| {task['task']} | {i} | `mcp({request})` | {step['chars']:,} | {step['ms']:.0f} |")
    print()
    d = res["direct"]
    total = res["definition"] + sum(t["chars"] for t in res["tasks"])
    dtotal = d["definitions"] + sum(c["chars"] for c in d["calls"])
    print("| task | through `mcp`: calls | chars read | every tool exposed directly: calls | chars read |")
    print("|---|---:|---:|---:|---:|")
    print(f"| tool definitions (read once) | – | {res['definition']:,} | – | {d['definitions']:,} |")
    for task, call in zip(res["tasks"], d["calls"]):
        ok = "" if task["ok"] else " (not done)"
        print(f"| {task['task']}{ok} | {task['calls']} | {task['chars']:,} | 1 | {call['chars']:,} |")
    print(f"| session | {sum(t['calls'] for t in res['tasks'])} | **{total:,}** | {len(d['calls'])} | "
          f"**{dtotal:,}** |")
    print()
    print("| search | hits | rank of server-everything's tool | chars | top hit |")
    print("|---|---:|---:|---:|---|")
    for p in res["phrasings"]:
        rank = p["rank"] or "absent"
        print(f"| `{p['query']}` | {len(p['hits'])} | {rank} | {p['chars']:,} | {(p['hits'] or ['–'])[0]} |")
    print(f"\n(load {' → '.join(res['load'])})\n")


# ---------------------------------------------------------------------------------------------------------------
# 3. Latency


async def direct_start(env, box, name, t0=None):
    """Spawn → handshake (the client's default mode) → `tools/list` answered, in seconds (from `t0`)."""
    spec = box.servers[name]
    t0 = time.perf_counter() if t0 is None else t0
    async with session(f"direct {name}", [spec["command"], *spec["args"]], box.server_env(name), box.dir,
                       box.log) as client:
        with anyio.fail_after(TIMEOUT):
            await client.list_tools(cache_mode="bypass")
        return time.perf_counter() - t0


async def direct_together(env, box, names):
    """Every server spawned at once, each by its own client: seconds until the last `tools/list` answered."""
    done, t0 = {}, time.perf_counter()

    async def one(name):
        done[name] = await direct_start(env, box, name, t0)

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(one, name)
    return max(done.values())


async def pimcp_first_search(env, box, query, what="pimcp-run search"):
    """(spawn → initialize, first `mcp({search})` request → answer, stdin close → exit, the search's text) for one
    pimcp-run start."""
    info = {}
    t0 = time.perf_counter()
    async with session(what, [env.pimcp, "--config", box.config], box.env(), box.dir, box.log, info) as client:
        t_init = time.perf_counter() - t0
        with anyio.fail_after(TIMEOUT):
            await client.list_tools(cache_mode="bypass")
        sent = time.time()
        dt, text, err = await timed_call(client, {"search": query})
        info["wall"] = (sent, sent + dt)
        if err:
            raise RuntimeError(f"first search failed: {text}")
    return t_init, dt, info["exit_s"], text, info["wall"]


def split_by_trace(path, sent, answered):
    """Where a fresh install's first search went, from pimcp-run's protocol trace (millisecond timestamps): `mcp`
    request → first request written to an upstream; → the last upstream message read before the answer; → the
    answer; and per server, its first request → its first answer (its start, beside the others)."""
    lines = []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            t = datetime.datetime.fromisoformat(r["ts"].replace("Z", "+00:00")).timestamp()
            if sent - 0.002 <= t <= answered + 0.002:
                lines.append((t, r))
    out_ = [t for t, r in lines if r["dir"] == "out"]
    in_ = [t for t, r in lines if r["dir"] == "in"]
    if not out_ or not in_:
        return None
    first, last = {}, {}
    for t, r in lines:
        first.setdefault((r["server"], r["dir"]), t)
        if r["dir"] == "in":
            last[r["server"]] = t
    servers = sorted({r["server"] for _, r in lines})
    final = max(last, key=last.get)
    return {"to_spawn": max(0.0, out_[0] - sent), "upstreams": max(in_) - out_[0], "after": answered - max(in_),
            "last_server": final, "last_server_after_start": last[final] - first[(final, "in")],
            "first_answer": {s: first[(s, "in")] - first[(s, "out")] for s in servers
                             if (s, "in") in first and (s, "out") in first}}


async def measure_latency(env, runs, query="echo", trace=False):
    names = transcript_servers(env)
    samples = {"direct": {n: [] for n in names}, "slowest": [], "cold": [], "cold_init": [], "warm": [],
               "warm_init": [], "cold_exit": [], "warm_exit": [], "diff": [], "slowest_name": [], "together": [],
               "diff_together": [], "trace": []}
    texts, load_at = {}, [load()]
    orders = [("direct", "together", "cold", "warm"), ("cold", "direct", "warm", "together"),
              ("together", "cold", "warm", "direct"), ("cold", "warm", "together", "direct")]
    for round_ in range(runs + 1):  # round 0: untimed warm-up (page cache, node's compile cache)
        box = Sandbox(env, names, trace=trace)
        try:
            got = {}
            for step in orders[round_ % len(orders)]:
                if step == "direct":
                    order = names[round_ % len(names):] + names[:round_ % len(names)]
                    got["direct"] = {n: await direct_start(env, box, n) for n in order}
                elif step == "together":
                    got["together"] = await direct_together(env, box, names)
                elif step == "cold":
                    got["cold_init"], got["cold"], got["cold_exit"], texts["cold"], wall = await pimcp_first_search(
                        env, box, query, "pimcp-run, fresh install")
                    if trace:
                        got["trace"] = split_by_trace(box.trace, *wall)
                else:
                    got["warm_init"], got["warm"], got["warm_exit"], texts["warm"], _ = await pimcp_first_search(
                        env, box, query, "pimcp-run, restarted")
        finally:
            box.remove()
        load_at.append(load())
        if round_ == 0:
            continue
        for n, t in got["direct"].items():
            samples["direct"][n].append(t)
        slowest = max(got["direct"], key=got["direct"].get)
        samples["slowest"].append(got["direct"][slowest])
        samples["slowest_name"].append(slowest)
        for k in ("cold", "cold_init", "warm", "warm_init", "cold_exit", "warm_exit"):
            samples[k].append(got[k])
        samples["diff"].append(got["cold"] - got["direct"][slowest])
        samples["together"].append(got["together"])
        samples["diff_together"].append(got["cold"] - got["together"])
        if got.get("trace"):
            samples["trace"].append(got["trace"])
    return {"servers": names, "query": query, "runs": runs, "samples": samples, "texts": texts, "load": load_at,
            "trace": trace}


def stat(values):
    ms = [v * 1000 for v in values]
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms)}


def print_latency(res):
    s = res["samples"]
    print(f"### 3. First search on a fresh install (`mcp({{search: \"{res['query']}\"}})`, "
          f"{', '.join(res['servers'])}; {res['runs']} rounds)\n")
    print("| measure | median ms | min–max ms |")
    print("|---|---:|---:|")
    rows = [(f"direct start of {n} (spawn → `tools/list` answered)", s["direct"][n]) for n in res["servers"]]
    rows += [
        ("slowest server's start, per round", s["slowest"]),
        ("pimcp-run spawn → `initialize` answered (fresh install)", s["cold_init"]),
        ("**first search, fresh install** (`tools/call` → answer)", s["cold"]),
        ("first search − slowest server's start, per round", s["diff"]),
        ("all servers spawned at once directly, until the last `tools/list` answered", s["together"]),
        ("first search − all at once, per round", s["diff_together"]),
        ("pimcp-run restarted on the same data dir: spawn → `initialize`", s["warm_init"]),
        ("**first search after the restart** (metadata cached)", s["warm"]),
        ("pimcp-run stdin close → exit, after the fresh-install search", s["cold_exit"]),
        ("pimcp-run stdin close → exit, after the search from cache", s["warm_exit"]),
    ]
    tr = s["trace"]
    if tr:
        rows += [("trace: `mcp` request → first request written to an upstream", [t["to_spawn"] for t in tr])]
        rows += [(f"trace: {n}'s first request → its first answer (started beside the others)",
                  [t["first_answer"][n] for t in tr if n in t["first_answer"]]) for n in res["servers"]]
        rows += [("trace: the last server to finish, its first answer → its last message (after the refused "
                  "`server/discover`: `initialize`, the lists)", [t["last_server_after_start"] for t in tr]),
                 ("trace: first upstream request → last upstream message before the answer",
                  [t["upstreams"] for t in tr]),
                 ("trace: last upstream message → the search's answer", [t["after"] for t in tr])]
    for label, values in rows:
        st = stat(values)
        print(f"| {label} | {st['median']:.1f} | {st['min']:.1f}–{st['max']:.1f} |")
    med = lambda k: statistics.median(s[k]) * 1000
    print(f"\nMedian first search − median slowest start: {med('cold') - med('slowest'):+.1f} ms "
          f"(goal ≤ +50 ms); slowest server per round: {', '.join(s['slowest_name'])}; "
          f"load {loads(res['load'])}\n")


# ---------------------------------------------------------------------------------------------------------------


async def amain(args, env):
    out = {"bench": "first-session", "pimcp_run": os.path.basename(env.pimcp), "versions": env.versions,
           "nproc": os.cpu_count()}
    parts = args.only.split(",")
    if "definition" in parts:
        out["definition"] = measure_definition(env)
        print_definition(out["definition"])
    if "transcript" in parts:
        out["transcript"] = await measure_transcript(env)
        print_transcript(out["transcript"])
    if "latency" in parts:
        out["latency"] = await measure_latency(env, args.runs, trace=args.trace)
        print_latency(out["latency"])
    out["left_behind"], out["stayed_after_stdin_close"] = LEFT_BEHIND, sorted(set(STAYED))
    if LEFT_BEHIND:
        print("Processes still running once their session's process had exited:\n")
        print("| session | process | outlived it by ms | killed |")
        print("|---|---|---:|---|")
        for what, name, ms, killed in LEFT_BEHIND:
            print(f"| {what} | `{name}` | {ms:.0f} | {'yes' if killed else 'no'} |")
        print()
    if STAYED:
        print(f"Still running 2 s after stdin closed (then terminated): {', '.join(sorted(set(STAYED)))}\n")
    print(json.dumps(out, separators=(",", ":"), ensure_ascii=False))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="definition,transcript,latency")
    ap.add_argument("--npm", help="npm prefix with server-filesystem and server-memory installed")
    ap.add_argument("--trace", action="store_true", help="latency: the fresh install writes a protocol trace "
                    "(settings.trace) that splits its first search into pimcp's and the upstreams' parts")
    ap.add_argument("pimcp_run")
    args = ap.parse_args()
    env = Env(args.pimcp_run, args.npm)
    print(f"pimcp-run: {env.pimcp}; server-everything {env.versions.get('everything')}; "
          f"filesystem {env.versions.get('filesystem', 'absent')}; memory {env.versions.get('memory', 'absent')}; "
          f"nproc {os.cpu_count()}; load {load()}\n")
    try:
        anyio.run(amain, args, env)
    finally:
        left = reap(descendants(), grace=0)
        if left:
            print(f"killed {len(left)} processes still running at exit: {left}", file=sys.stderr)


if __name__ == "__main__":
    main()
