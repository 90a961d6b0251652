#!/usr/bin/env python3
"""A representative pimcp-run stdio session against mcp-fixture, for code-layout training and RSS measurement.

The session (raw JSON-RPC over pimcp-run's stdin/stdout, one `mcp-fixture` server, hermetic HOME and config):
initialize, notifications/initialized, tools/list, ping, then `mcp` calls of every common mode (status, list of
the server, search, regex search, describe, instructions, echo calls, a call with bad arguments, an unknown tool,
failing / image / mixed / large results, a call with progress), a tool removed upstream (searched for until gone),
then --calls echo calls (default 200), then EOF.

Subcommands:
  train OUTDIR   run the session (once per protocol version, then a short one that EOF cuts mid-call) and, unless
                 --no-cli, the CLI subcommands a user runs (--version, --help, status, search, describe, call, config
                 show) with every pimcp-run process under valgrind's callgrind
                 (--trace-children=yes, so the guardian shim's `pimcp-run __pimcp_shim__` exec is traced too when no
                 pimcp-shim sits next to the binary); writes OUTDIR/callgrind.<tag>.<pid> files. --native runs the
                 same processes without valgrind, for a binary that records its own profile (BOLT's
                 instrumentation, scripts/build-dist.sh step 3c); OUTDIR is then unused. --env-pad N adds N
                 variables to the environment (how many a user's shell has varies, and with it the paths the
                 environment's sort and growth take at start); --minimal-env keeps only the six variables the MCP
                 SDKs pass a stdio server by default (HOME, LOGNAME, PATH, SHELL, TERM, USER) plus pimcp's own;
                 without it, one variable with an empty value is added (users' shells have such). --variant K
                 serves the like-everything upstream's K-th catalog (VARIANTS: list sizes and seeds).
  reads BIN OUT  run the served sessions of `train` with BIN (a non-PIE executable: its addresses are the link's)
                 under valgrind's lackey, which reports every load, and write to OUT the address ranges of BIN's
                 .rodata they read, one `start end sessions` (hex; bit n of sessions: the n-th session read it) a
                 line: `order.py data` turns them into a linker script.
  rss BIN...     start each binary in turn, alternating (--rounds N), run the session (--version V, default
                 2025-06-18; --upstream like-everything: against `upstream_like_everything`; both also for maps)
                 and print per binary the
                 medians of VmHWM, RssAnon, RssFile, the Rss of the binary's own mappings and the minor/major page
                 faults, read from /proc right before EOF. --evict drops the binary's page-cache pages before each
                 start (posix_fadvise DONTNEED, the file only), so each start pages its code in from disk.
  maps BIN       run the session once and print the resident KiB of each mapping of the process, summed by file
                 name (or [heap], [stack], anonymous) and permissions, with VmHWM.
  sections BIN   run the session once and print the resident KiB of each ELF section of BIN (from
                 /proc/PID/pagemap; needs permission to read it, e.g. root).
  faults BIN OUT run the session once (--version V: that protocol; with 2026-07-28, the stateless one, against
                 `upstream_like_everything`: an upstream that behaves as server-everything does) natively under
                 `perf record -e page-faults -c 1 -d` (every page fault with its address) and write perf's data to
                 OUT: `order.py native` reads the instruction fetches that faulted, i.e. code the native run executes
                 that the training under callgrind did not (native CPU features, syscalls valgrind lacks, timing).
                 Needs perf and permission to record page faults.

Env: FIXTURE (default <repo>/target/release/mcp-fixture).
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURE = os.environ.get("FIXTURE", os.path.join(ROOT, "target", "release", "mcp-fixture"))


def setup(home):
    """pimcp-run's environment (only its own config file, scratch agent and data dirs) and config path."""
    env = dict(os.environ, HOME=home, PIMCP_CONFIG_MODE="exclusive", PI_CODING_AGENT_DIR=os.path.join(home, "agent"),
               PIMCP_DATA_DIR=os.path.join(home, "data"))
    env.pop("PIMCP_LOG", None)
    env.pop("RUST_LOG", None)
    cfg = os.path.join(home, "config.json")
    # As users write it: pretty-printed, with an `args` list (here empty), and a second one that also has an `env`
    # object (`with_env`; the first served session uses it). The config is parsed and hashed at every start, and JSON's
    # whitespace, an empty array and an env take their own paths (session 11: a one-line config without them left 4
    # cold-code windows to every start from a user's file; training with env only, 1–2 to starts without one).
    write_config(cfg, {"mcpServers": {"fixture": {"command": FIXTURE, "args": []}}})
    write_config(with_env(cfg), {"mcpServers": {"fixture": {"command": FIXTURE, "args": [],
                                                            "env": {"PIMCP_LAYOUT_SERVER": "1"}}}})
    return env, cfg


def with_env(cfg):
    """The path of `setup`'s second config, whose server has an `env` object."""
    return os.path.join(os.path.dirname(cfg), "config-env.json")


def write_config(path, config):
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


# Server instructions as servers write them: several lines of Markdown, 1–2 KB, with non-ASCII text (dashes, quotes,
# emoji: UTF-8 validation and character counting take their multi-byte paths; a four-byte emoji another one). The
# host sees their first line; `mcp({instructions})` all of them.
NON_ASCII_INSTRUCTIONS = """# Fixture Server – Instructions for Agents

These instructions are for a model or agent that calls the fixture's tools through an MCP client.
Tools for testing MCP clients — echo, add, long-running “operations”, images ✓. Results are deterministic.

## How the tools relate

- `echo` returns its text unchanged; use it to check that a round trip works before anything else
- `add` sums two numbers; `slow` reports progress while it waits, so a client can show it
- `image` and `mixed` return image blocks, embedded resources and links: render them rather than their JSON
- `sample`, `elicit` and `roots` ask the client in turn, and fail politely when it cannot answer

## Limits

- `huge` returns as many bytes as asked for (up to a few MiB): ask for little unless a test needs more
- Calls after a crash fail until the client starts the server again; nothing is kept between sessions

## Patterns

- Call tools in any order; none depends on another's state
- Prefer `describe` before a first call: argument names are case-sensitive

If someone asks whether these instructions arrived, answer “🎉 The fixture's instructions reached the model.”
"""

# The like-everything upstream of each training variant (`train --variant K`, scripts/build-dist.sh's BOLT runs):
# (synthetic tools, seed, server name, sorted lists). List sizes below and above 20 (sorts take other paths there),
# lists in name order or not (many servers sort theirs: a sort then meets long runs), other names and lengths (the
# `mcp` definition is measured with the server names in it; tool and prompt names are hashed), so that branches
# taken by a catalog's sizes and order ran in some run. Session 12: with one catalog, a Python SDK session against
# server-everything fetched 15 windows of BOLT's cold code; 7 of them were such branches.
VARIANTS = [(24, 0x5EEDF1C7, "fixture", False), (13, 1, "fx", True), (41, 2, "test-tools", False),
            (30, 3, "fixture_server", True), (57, 4, "local", True), (18, 5, "my-fixture-server", False)]


def variant_server(variant):
    """The like-everything upstream's server name in `variant`."""
    return VARIANTS[variant % len(VARIANTS)][2]


def upstream_like_everything(home, variant=0):
    """A second config in `home` whose mcp-fixture behaves as server-everything does towards pimcp-run: it does not
    know `server/discover` (-32601: pimcp-run's client falls back to `initialize`), announces tool-list changes
    (two right after `initialized`, then every 250 ms: pimcp-run refreshes its catalog), asks for roots right after
    those and again during the third call (a host call in flight: server-everything asks 350 ms after
    `initialized`, usually mid-call), reporting them in log messages, and
    lists more than 20 tools with varied schemas (sorting and parsing take other paths for larger lists; `variant`
    picks size, seed, order and the server's name from VARIANTS), with Markdown instructions in non-ASCII text, and
    writes its messages as the TypeScript SDK does (`--wire-like-everything`: `jsonrpc` and `id` after the payload,
    the `tasks` capability and tools' `execution` that rmcp's model skips, draft-07 `$schema`s, requests without a
    progress token; session 11: without them a Python SDK session against server-everything fetched 16 windows of
    BOLT's cold code).
    Used with the stateless host session, so one run covers both (session 7: without them a session against
    server-everything ran ~1.3 MiB of code outside the laid-out block)."""
    tools, seed, name, sorted_lists = VARIANTS[variant % len(VARIANTS)]
    cfg = os.path.join(home, "config-legacy.json")
    args = ["--no-discover", "--list-changed-every", "250", "--list-changed-at-start", "2", "--roots-at-start",
            "--roots-on-call", "3", "--wire-like-everything", "--tools", str(tools), "--seed", str(seed),
            "--instructions", NON_ASCII_INSTRUCTIONS] + (["--sorted-lists"] if sorted_lists else [])
    write_config(cfg, {"mcpServers": {name: {"command": FIXTURE, "args": args}}})
    return cfg


def upstream_config(a, home, cfg):
    """The config for --upstream: `fixture` (plain mcp-fixture, the default) or `like-everything`
    (`upstream_like_everything`)."""
    return upstream_like_everything(home) if a.upstream == "like-everything" else cfg


def config_for(version, home, cfg):
    """The config a session in protocol `version` runs with: the stateless one against `upstream_like_everything`."""
    return upstream_like_everything(home) if version == STATELESS else cfg


class Session:
    def __init__(self, argv, env, pass_fds=()):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env, pass_fds=pass_fds)
        self.next_id = 0
        # Under valgrind (callgrind ~50x, lackey with its reader ~500x slower) waits on pimcp-run's own work get longer.
        self.under_valgrind = argv[0] == "valgrind"
        # Sent in every request's `_meta` (the 2026-07-28 stateless protocol carries version and client there).
        self.request_meta = {}
        # JSON as Python's json.dumps writes it (", " and ": "), or compact, as the MCP SDKs send it (pydantic's
        # JSON, serde_json, JSON.stringify): the parsers' whitespace paths differ.
        self.separators = None

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg, separators=self.separators) + "\n").encode())
        self.p.stdin.flush()

    def rpc(self, method, params=None):
        self.next_id += 1
        i = self.next_id
        msg = {"jsonrpc": "2.0", "id": i, "method": method}
        if self.request_meta:
            params = dict(params or {})
            params["_meta"] = dict(self.request_meta, **params.get("_meta", {}))
        if params is not None:
            msg["params"] = params
        self.send(msg)
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError(f"pimcp-run closed its stdout during {method}")
            m = json.loads(line)
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]

    def notify(self, method):
        self.send({"jsonrpc": "2.0", "method": method})

    def mcp(self, args, expect_error=False, meta=None):
        params = {"name": "mcp", "arguments": args}
        if meta:
            params["_meta"] = meta
        r = self.rpc("tools/call", params)
        if expect_error is not None and bool(r.get("isError")) != expect_error:
            raise RuntimeError(f"mcp {args}: unexpected result {json.dumps(r)[:300]}")
        return r

    def send_call_in_flight(self, args):
        """Sends an `mcp` call with a progressToken and returns once its first progress report arrived: the call is
        then running upstream, and closing stdin now is a host that disconnects mid-call."""
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
               "params": {"name": "mcp", "arguments": args, "_meta": {"progressToken": "cut"}}}
        self.send(msg)
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("pimcp-run closed its stdout before the call reported progress")
            m = json.loads(line)
            if m.get("method") == "notifications/progress":
                return
            if m.get("id") == self.next_id:
                raise RuntimeError(f"the call meant to be cut finished first: {json.dumps(m)[:300]}")

    def close(self):
        self.p.stdin.close()
        self.p.stdout.read()
        return self.p.wait(timeout=120)


def echo(server="fixture"):
    return {"tool": f"{server}_echo", "args": {"text": "hi"}}


STATELESS = "2026-07-28"


def run_session(s, calls, version="2025-06-18", server="fixture"):
    """The session against the config's one server, `server` (its tools are `<server>_<tool>`)."""
    if version == STATELESS:
        # No initialize: `server/discover`, then each request carries the version and client in its `_meta` (what
        # the Python SDK's `Client` does first), in compact JSON as the SDKs write it.
        s.separators = (",", ":")
        s.request_meta = {"io.modelcontextprotocol/protocolVersion": STATELESS,
                          "io.modelcontextprotocol/clientInfo": {"name": "layout-session", "version": "1"},
                          "io.modelcontextprotocol/clientCapabilities": {}}
        s.rpc("server/discover", {})
        # The Python SDK's `Client` calls a tool before listing tools when its user does.
        s.mcp(echo(server))
    else:
        s.rpc("initialize", {"protocolVersion": version, "capabilities": {},
                             "clientInfo": {"name": "layout-session", "version": "1"}})
        s.notify("notifications/initialized")
    tools = s.rpc("tools/list", {})
    if not any(t["name"] == "mcp" for t in tools["tools"]):
        raise RuntimeError("pimcp-run lists no `mcp` tool")
    if version != STATELESS:  # the stateless protocol has no ping (pimcp-run answers it "method not found")
        s.rpc("ping")
    s.mcp({})  # status
    s.mcp(echo(server))  # first call: lazy start of the server
    s.mcp({"server": server})
    s.mcp({"search": "echo"})
    s.mcp({"search": "ec.o", "regex": True, "limit": 3})
    s.mcp({"describe": f"{server}_echo"})
    s.mcp({"instructions": server})
    s.mcp({"tool": f"{server}_add", "args": {"a": 2, "b": 3}})
    s.mcp({"tool": f"{server}_echo", "args": {"wrong": 1}}, expect_error=True)
    s.mcp({"tool": f"{server}_no_such_tool"}, expect_error=True)
    # Other kinds of results and a call that reports progress (the shapes other servers answer with).
    s.mcp({"tool": f"{server}_fail", "args": {"message": "x"}}, expect_error=None)
    s.mcp({"tool": f"{server}_image"}, expect_error=None)
    s.mcp({"tool": f"{server}_mixed"}, expect_error=None)
    s.mcp({"tool": f"{server}_huge", "args": {"bytes": 20000}}, expect_error=None)
    s.mcp({"tool": f"{server}_slow", "args": {"ms": 20, "steps": 2}}, expect_error=None, meta={"progressToken": "p"})
    s.mcp({})
    catalog_change(s, server)
    for _ in range(calls):
        s.mcp(echo(server))


def catalog_change(s, server, timeout=None):
    """A tool removed upstream mid-session (`remove_tool`: list_changed, pimcp-run lists the tools again), then
    searches until it is gone: a new index is built for the new catalog and the old one dropped (session 12: a
    session against server-everything, whose tool list changes after the first search, ran that drop in cold code).
    (`add_tool` would do too, but its schema's `pattern` makes the argument check compile a regex.)"""
    s.mcp({"tool": f"{server}_remove_tool", "args": {"name": "whoami"}})
    if timeout is None:
        # Lackey's session took more than 10 s here (session 13): refresh, index and searches all run under it.
        timeout = 600.0 if s.under_valgrind else 10.0
    deadline = time.monotonic() + timeout
    while f"{server}_whoami" in json.dumps(s.mcp({"search": "whoami"})):
        if time.monotonic() > deadline:
            raise RuntimeError(f"pimcp-run still lists {server}_whoami {timeout} s after its list_changed")
        time.sleep(0.005)


def status_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0])
    return out


def binary_rss_kb(pid, path):
    """Rss of the mappings of `path` (the executable itself), by kind: text (r-x), ro (r--), rw."""
    real = os.path.realpath(path)
    out = {"text": 0, "ro": 0, "rw": 0}
    kind = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                name = parts[5] if len(parts) > 5 else ""
                perms = parts[1]
                kind = None
                if name == real:
                    kind = "text" if "x" in perms else ("rw" if "w" in perms else "ro")
            elif parts[0] == "Rss:" and kind:
                out[kind] += int(parts[1])
    return out


def elf_sections(path):
    """[(name, address, file offset, size)] of `path`'s sections that occupy file space (readelf's headers)."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    secs = []
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 6 and parts[0].startswith("[") and parts[1].startswith(".") and parts[2] != "NOBITS":
            secs.append((parts[1], int(parts[3], 16), int(parts[4], 16), int(parts[5], 16)))
    return secs


def resident_offsets(pid, path):
    """File offsets of the resident pages of `path`'s own mappings in process `pid` (present bits of
    /proc/PID/pagemap; needs root)."""
    real = os.path.realpath(path)
    page = os.sysconf("SC_PAGE_SIZE")
    out = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/pagemap", "rb") as pm:
        for line in maps:
            parts = line.split()
            if len(parts) < 6 or parts[5] != real:
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            off = int(parts[2], 16)
            pm.seek(start // page * 8)
            data = pm.read((end - start) // page * 8)
            out += [off + i * page for i in range(len(data) // 8)
                    if int.from_bytes(data[i * 8:i * 8 + 8], "little") >> 63]
    return out


def section_rss_kb(pid, path):
    """Resident KiB of `path`'s own mappings per ELF section (pages attributed to sections by file offset; a page
    shared by two sections counts for the first)."""
    secs = sorted((off, off + size, name) for name, _, off, size in elf_sections(path))
    page = os.sysconf("SC_PAGE_SIZE")
    res = {}
    for fo in resident_offsets(pid, path):
        name = next((n for lo, hi, n in secs if lo < fo + page and hi > fo), "(headers)")
        res[name] = res.get(name, 0) + page // 1024
    return res


def after_session(binary, calls, read, a=None):
    """Runs the session once with `binary` (protocol and upstream from `a`'s --version / --upstream, when given) and
    returns `read(pid)`, called before its stdin closes."""
    home = tempfile.mkdtemp(prefix="pimcp-layout-")
    try:
        env, cfg = setup(home)
        version = "2025-06-18"
        if a is not None:
            cfg, version = upstream_config(a, home, cfg), a.version
        s = Session([binary, "--config", cfg], env)
        run_session(s, calls, version)
        out = read(s.p.pid)
        s.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return out


def cmd_sections(a):
    res = after_session(a.bin, a.calls, lambda pid: section_rss_kb(pid, a.bin))
    print(f"{a.bin}: resident KiB per section after the session ({a.calls} echo calls)")
    for name, kb in sorted(res.items(), key=lambda x: -x[1]):
        print(f"  {name:24} {kb:7d}")


def mapping_rss_kb(pid):
    """[Rss KiB, mappings] of pid's mappings, summed by (name, permissions): the binary, each library, [heap],
    [stack], anonymous regions (thread stacks, malloc arenas, the runtime's own mmaps)."""
    res = {}
    key = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                name = os.path.basename(parts[5]) if len(parts) > 5 and parts[5].startswith("/") else (
                    parts[5] if len(parts) > 5 else "(anonymous)")
                key = (name, parts[1])
                res.setdefault(key, [0, 0])
                res[key][1] += 1
            elif parts[0] == "Rss:" and key:
                res[key][0] += int(parts[1])
    return res


def cmd_maps(a):
    res, st = after_session(a.bin, a.calls, lambda pid: (mapping_rss_kb(pid), status_kb(pid)), a)
    print(f"{a.bin}: resident KiB per mapping after the session ({a.calls} echo calls); VmHWM {st['VmHWM']} KiB, "
          f"VmRSS {st['VmRSS']} KiB")
    for (name, perms), (kb, n) in sorted(res.items(), key=lambda x: -x[1][0]):
        if kb:
            print(f"  {kb:6d}  {perms}  {name}" + (f" ({n} mappings)" if n > 1 else ""))


def faults(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[9])  # minflt, majflt


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cmd_rss(a):
    rows = {b: [] for b in a.bins}
    for r in range(a.rounds):
        for b in a.bins:
            home = tempfile.mkdtemp(prefix="pimcp-layout-")
            try:
                env, cfg = setup(home)
                cfg = upstream_config(a, home, cfg)
                if a.evict:
                    evict(b)
                s = Session([b, "--config", cfg], env)
                run_session(s, a.calls, a.version)
                st = status_kb(s.p.pid)
                st.update(binary_rss_kb(s.p.pid, b))
                st["minflt"], st["majflt"] = faults(s.p.pid)
                rc = s.close()
                if rc != 0:
                    raise RuntimeError(f"{b} exited {rc}")
                rows[b].append(st)
            finally:
                shutil.rmtree(home, ignore_errors=True)
    keys = ["VmHWM", "RssAnon", "RssFile", "text", "ro", "rw", "minflt", "majflt"]
    print(f"load {open('/proc/loadavg').read().split()[:3]}; {a.rounds} alternating rounds, protocol {a.version}, "
          f"upstream {a.upstream or 'fixture'}, {a.calls} echo calls after the mode calls"
          f"{'; page cache of the binary evicted before each start' if a.evict else ''}")
    print("| binary | VmHWM MiB (median, min–max) | RssAnon MiB | RssFile MiB | binary r-x / r-- / rw- Rss MiB "
          "| minor / major faults |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for b in a.bins:
        med = {k: statistics.median(x[k] for x in rows[b]) for k in keys}
        lo = min(x["VmHWM"] for x in rows[b]) / 1024
        hi = max(x["VmHWM"] for x in rows[b]) / 1024
        print(f"| {b} | {med['VmHWM'] / 1024:.1f} ({lo:.1f}–{hi:.1f}) | {med['RssAnon'] / 1024:.1f} | "
              f"{med['RssFile'] / 1024:.1f} | {med['text'] / 1024:.1f} / {med['ro'] / 1024:.1f} / "
              f"{med['rw'] / 1024:.1f} | {med['minflt']:.0f} / {med['majflt']:.0f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


def cmd_faults(a):
    if not shutil.which("perf"):
        sys.exit("perf is not installed")
    home = tempfile.mkdtemp(prefix="pimcp-layout-faults-")
    try:
        env, cfg = setup(home)
        cfg = upstream_config(a, home, cfg) if a.upstream else config_for(a.version, home, cfg)
        s = Session(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-o", a.out, "--", a.bin,
                     "--config", cfg], env)
        run_session(s, a.calls, a.version)
        rc = s.close()
        if rc != 0:
            raise RuntimeError(f"perf record / pimcp-run exited {rc}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def serve_runs(home, cfg, variant=0):
    """(protocol version, config, its server's name) of the sessions a training serves."""
    # Both sides of the 2025-11-25 protocol boundary (hosts negotiate either), and the 2026-07-28 stateless
    # protocol (server/discover and per-request `_meta`, what the Python SDK's `Client` speaks first): without it
    # such a host's session ran ~13 64-KiB windows of code outside the laid-out block (+1.7 MiB, session 7).
    # The stateless session runs twice: against an upstream that behaves as server-everything does
    # (`upstream_like_everything`), and against one that speaks 2026-07-28 too (pimcp-run's client then discovers
    # it statelessly: session 8, 8 fetch faults in BOLT's cold region for the Python SDK client against
    # mcp-fixture without it).
    like_everything = (STATELESS, upstream_like_everything(home, variant), variant_server(variant))
    return [("2025-06-18", with_env(cfg), "fixture"), ("2025-11-25", cfg, "fixture"), like_everything,
            (STATELESS, cfg, "fixture")]


def cmd_train(a):
    if not a.native and not shutil.which("valgrind"):
        sys.exit("valgrind is not installed")
    os.makedirs(a.outdir, exist_ok=True)
    home = tempfile.mkdtemp(prefix="pimcp-layout-train-")
    try:
        env, cfg = setup(home)
        if a.minimal_env:
            # What a host's MCP SDK gives a stdio server unless told otherwise (its default environment).
            sdk = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
            env = {k: v for k, v in env.items() if k in sdk or k.startswith(("PIMCP_", "PI_"))}
        else:
            # A user's shell also exports variables with empty values (DEBUGINFOD_URLS= on Debian; perf adds it too),
            # whose copy takes another branch of the environment's parsing.
            env["PIMCP_LAYOUT_EMPTY"] = ""
        env.update({f"PIMCP_LAYOUT_PAD_{i}": str(i) for i in range(a.env_pad)})

        def vg(tag):
            if a.native:
                return [a.bin]
            return ["valgrind", "--tool=callgrind", "--trace-children=yes", "--demangle=no",
                    "--trace-children-skip=*mcp-fixture*,*pimcp-shim*",
                    f"--callgrind-out-file={os.path.join(a.outdir, 'callgrind.' + tag + '.%p')}", a.bin]

        for version, config, server in serve_runs(home, cfg, a.variant):
            s = Session(vg("serve") + ["--config", config], env)
            run_session(s, a.calls, version, server)
            rc = s.close()
            if rc != 0:
                raise RuntimeError(f"pimcp-run (serve, protocol {version}) exited {rc}")
        # A host that disconnects mid-call: the shutdown of tasks still running (tokio's task shutdown and
        # join-handle paths) runs only then, and a run that ends that way would otherwise execute them outside the
        # laid-out region. Tagged `cut`, not `serve`: order.py places its functions after the served session's, so
        # the code only this ending runs does not spread the session's own.
        s = Session(vg("cut") + ["--config", cfg], env)
        s.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "layout-session", "version": "1"}})
        s.notify("notifications/initialized")
        s.mcp(echo())
        s.send_call_in_flight({"tool": "fixture_slow", "args": {"ms": 60000, "steps": 2}})
        rc = s.close()
        if rc != 0:
            raise RuntimeError(f"pimcp-run (serve, cut mid-call) exited {rc}")
        if not a.no_cli:
            # Only exit code 0 is accepted: a training command that fails would record an error path instead.
            cli = [["--version"], ["--help"], ["status"], ["status", "--json"], ["search", "echo"],
                   ["describe", "fixture_echo"], ["call", "fixture_echo", '{"text": "hi"}'], ["config", "show"]]
            for i, args in enumerate(cli):
                argv = vg(f"cli{i}") + (args if args[0].startswith("-") else ["--config", cfg] + args)
                p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
                if p.returncode != 0:
                    raise RuntimeError(f"pimcp-run {' '.join(args)} exited {p.returncode}: "
                                       f"{p.stderr.decode(errors='replace')[-2000:]}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def cmd_reads(a):
    """Every byte of BIN's .rodata a served session loads, from valgrind's lackey (each load's address and size)."""
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed")
    header = subprocess.run(["readelf", "-h", a.bin], capture_output=True, text=True, check=True).stdout
    if "EXEC (Executable" not in header:
        sys.exit(f"{a.bin} is position-independent: its addresses under valgrind would not be the link's (link it "
                 "with -no-pie for this)")
    ro = [(addr, addr + size) for name, addr, _, size in elf_sections(a.bin) if name == ".rodata"]
    if len(ro) != 1:
        sys.exit(f"{a.bin} has {len(ro)} .rodata sections, expected one")
    lo, hi = ro[0]
    touched = bytearray(hi - lo)

    def mark(fd, bit):
        # Lackey's lines: "I  addr,size" (a fetch), " L addr,size" (load), " S" (store), " M" (modify).
        with os.fdopen(fd, "rb", buffering=1 << 20) as log:
            for line in log:
                if line[:2] in (b" L", b" M"):
                    addr, size = line[3:].split(b",")
                    addr = int(addr, 16)
                    if lo <= addr < hi:
                        for i in range(addr - lo, min(addr + int(size), hi) - lo):
                            touched[i] |= bit

    home = tempfile.mkdtemp(prefix="pimcp-layout-reads-")
    try:
        env, cfg = setup(home)
        for n, (version, config, server) in enumerate(serve_runs(home, cfg)):
            r, w = os.pipe()
            reader = threading.Thread(target=mark, args=(r, 1 << n))
            reader.start()
            try:
                s = Session(["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}", "--trace-children=no",
                             a.bin, "--config", config], env, pass_fds=(w,))
            finally:
                os.close(w)
            run_session(s, a.calls, version, server)
            rc = s.close()
            reader.join()
            if rc != 0:
                raise RuntimeError(f"pimcp-run under lackey (protocol {version}) exited {rc}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    runs = []
    for i, b in enumerate(touched):
        if b:
            if runs and runs[-1][1] == lo + i and runs[-1][2] == b:
                runs[-1][1] += 1
            else:
                runs.append([lo + i, lo + i + 1, b])
    with open(a.out, "w") as f:
        # Third column: which sessions read the range (bit n: the n-th of `serve_runs`).
        f.writelines(f"{start:x} {end:x} {mask:x}\n" for start, end, mask in runs)
    print(f"{len(touched) - touched.count(0)} bytes of .rodata read in {len(runs)} runs, on "
          f"{len({(lo + i) >> 12 for i, b in enumerate(touched) if b})} pages of {(hi - lo + 4095) >> 12}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("bin")
    t.add_argument("outdir")
    t.add_argument("--calls", type=int, default=20)
    t.add_argument("--no-cli", action="store_true")
    t.add_argument("--native", action="store_true", help="no valgrind: the binary profiles itself")
    t.add_argument("--env-pad", type=int, default=0, help="add N variables to pimcp-run's environment")
    t.add_argument("--minimal-env", action="store_true", help="only the MCP SDKs' default variables (and pimcp's)")
    t.add_argument("--variant", type=int, default=0,
                   help="catalog of the like-everything upstream (size and seed, see VARIANTS)")
    r = sub.add_parser("rss")
    r.add_argument("bins", nargs="+")
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--calls", type=int, default=200)
    r.add_argument("--evict", action="store_true")
    r.add_argument("--json")
    x = sub.add_parser("sections")
    x.add_argument("bin")
    x.add_argument("--calls", type=int, default=200)
    f = sub.add_parser("faults")
    f.add_argument("bin")
    f.add_argument("out")
    f.add_argument("--calls", type=int, default=200)
    f.add_argument("--version", default="2025-06-18", help=f"protocol version; {STATELESS} for the stateless protocol")
    m = sub.add_parser("maps")
    m.add_argument("bin")
    m.add_argument("--calls", type=int, default=200)
    for sp in (r, m):
        sp.add_argument("--version", default="2025-06-18",
                        help=f"protocol version; {STATELESS} for the stateless protocol (the Python SDK's Client)")
    for sp in (r, f, m):
        sp.add_argument("--upstream", choices=["fixture", "like-everything"],
                        help="mcp-fixture as it is (default; for faults the default follows --version), or as "
                             "server-everything behaves (upstream_like_everything)")
    d = sub.add_parser("reads")
    d.add_argument("bin")
    d.add_argument("out")
    d.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    if not os.access(FIXTURE, os.X_OK):
        sys.exit(f"missing {FIXTURE}: cargo build --release -p mcp-fixture --bins (or set FIXTURE)")
    if a.cmd == "train":
        cmd_train(a)
    elif a.cmd == "sections":
        cmd_sections(a)
    elif a.cmd == "faults":
        cmd_faults(a)
    elif a.cmd == "reads":
        cmd_reads(a)
    elif a.cmd == "maps":
        cmd_maps(a)
    else:
        cmd_rss(a)


if __name__ == "__main__":
    main()
