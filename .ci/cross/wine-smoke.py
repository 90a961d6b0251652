#!/usr/bin/env python3
"""Runs the Windows builds of pimcp-run and mcp-fixture under Wine (usage: wine-smoke.py, from the repository root;
builds both with .ci/cross/cargo):

1. mcp-fixture.exe as a stdio MCP server: initialize, `echo`, a clean exit when stdin closes;
2. the README's main job: `pimcp-run --config … call fixture_echo '{"text":"hello"}'` prints `hello`; and the same
   through a `.cmd` shim found on the server's `PATH` by `PATHEXT` (as `npx` is `npx.cmd`), with an argument that
   needs quoting;
3. `pimcp-run` serving over stdio: the fixture crashes during a call and the next call starts it again and answers;
4. `pimcp-run.exe` killed (SIGKILL to its Wine process) while the fixture and a grandchild of it run: both are gone
   after, because each server's Job Object dies with pimcp's handle to it;
5. the OS token store (the Credential Manager, Wine's): a record saved by one process is read by another, then
   deleted (`pimcp-auth`'s `token_tool` example).
"""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
TARGET = "x86_64-pc-windows-gnu"
WINE = "/usr/lib/wine/wine64"


def fail(message):
    sys.exit(f"wine-smoke: {message}")


def setup_env():
    """The environment .ci/cross/setup prints (Wine prefix, target directory)."""
    line = subprocess.run(["bash", os.path.join(here, "setup")], check=True, capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]
    env = dict(os.environ)
    for pair in line.removeprefix("export ").split():
        key, value = pair.split("=", 1)
        env[key] = value
    return env


env = setup_env()
subprocess.run([os.path.join(here, "cargo"), TARGET, "build", "--quiet", "-p", "pimcp-cli", "-p", "mcp-fixture",
                "--bins"], check=True)
subprocess.run([os.path.join(here, "cargo"), TARGET, "build", "--quiet", "-p", "pimcp-auth", "--example",
                "token_tool"], check=True)
exe_dir = os.path.join(env.get("CROSS_TARGET_DIR", os.path.join(env["CROSS_HOME"], "target")), TARGET, "debug")
work = tempfile.mkdtemp(prefix="pimcp-wine-")
# A copy under a name of its own, so that its processes (and its grandchild's) are told from any other fixture.
fixture = os.path.join(work, "wine-smoke-fixture.exe")
shutil.copy(os.path.join(exe_dir, "mcp-fixture.exe"), fixture)
pimcp = os.path.join(exe_dir, "pimcp-run.exe")


def win(path):
    """The Windows path of a Linux path (Wine maps `/` to drive Z:)."""
    return "Z:" + path.replace("/", "\\")


class Session:
    """A stdio MCP session with a process under Wine; a blocked read ends when the watchdog kills it."""

    def __init__(self, argv):
        self.proc = subprocess.Popen([WINE, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=work)
        self.watchdog = threading.Timer(300, self.proc.kill)
        self.watchdog.daemon = True
        self.watchdog.start()
        self.next_id = 0

    def send(self, message):
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        wanted = self.next_id
        self.send({"jsonrpc": "2.0", "id": wanted, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                fail(f"{method}: stdout closed before the answer")
            message = json.loads(line)
            if message.get("id") == wanted:
                return message

    def initialize(self):
        init = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "wine-smoke", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return init

    def close(self):
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        self.watchdog.cancel()
        return code


def text_of(answer):
    result = answer.get("result") or fail(f"no result: {answer}")
    return "".join(block.get("text", "") for block in result.get("content", []))


def our_processes():
    """Linux pids of Wine processes running the fixture copy (the fixture and its `--sleep` grandchild)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines() if "wine-smoke-fixture.exe" in line]


def wait_until(what, condition, limit=30):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    fail(f"{what} (waited {limit} s)")


def write_config(name, args, command=None, env_vars=None):
    path = os.path.join(work, name)
    server = {"command": command or win(fixture), "args": args}
    if env_vars:
        server["env"] = env_vars
    with open(path, "w") as f:
        json.dump({"mcpServers": {"fixture": server}}, f)
    return win(path)


def call_echo(config, text):
    """`pimcp-run --config CONFIG call fixture_echo {"text": TEXT}`: its stdout, or a failure naming what happened."""
    run = subprocess.run([WINE, pimcp, "--config", config, "call", "fixture_echo", json.dumps({"text": text})],
                         capture_output=True, text=True, env=env, cwd=work, timeout=300)
    if run.returncode != 0 or run.stdout.strip() != text:
        fail(f"`pimcp-run call fixture_echo` exited {run.returncode}: stdout {run.stdout!r} "
             f"stderr {run.stderr[-2000:]!r}")
    return run.stdout.strip()


# 1. The fixture alone.
s = Session([fixture])
init = s.initialize()
assert init["result"]["serverInfo"]["name"] == "mcp-fixture", init
assert text_of(s.request("tools/call", {"name": "echo", "arguments": {"text": "hello"}})) == "hello"
assert s.close() == 0, "mcp-fixture.exe did not exit 0 when stdin closed"
print("wine-smoke: mcp-fixture.exe answered initialize and echo and exited 0")

# 2. The README's main job.
config = write_config("plain.json", [])
call_echo(config, "hello")
wait_until("the fixture is still running after `pimcp-run call` exited", lambda: not our_processes())
print("wine-smoke: pimcp-run.exe --config … call fixture_echo '{\"text\":\"hello\"}' printed hello")
shims = os.path.join(work, "shim dir")
os.makedirs(shims)
with open(os.path.join(shims, "fixture-shim.cmd"), "w") as f:
    f.write(f'@"{win(fixture)}" %*\r\n')
events = os.path.join(work, "events & log.jsonl")
shim_config = write_config("shim.json", ["--event-log", win(events)], command="fixture-shim",
                           env_vars={"PATH": win(shims) + ";C:\\windows\\system32;C:\\windows"})
call_echo(shim_config, "hello through cmd")
if not os.path.exists(events):
    fail("the argument with a space and `&` did not reach the fixture through the .cmd shim")
print("wine-smoke: a server named `fixture-shim` started as fixture-shim.cmd (PATHEXT) with its arguments intact")

# 3. A crash, then a recovered call.
s = Session([pimcp, "--config", config])
s.initialize()
crashed = s.request("tools/call", {"name": "mcp", "arguments": {"tool": "fixture_crash", "args": {}}})
if not (crashed.get("error") or crashed["result"].get("isError")):
    fail(f"the crash call did not fail: {crashed}")
again = text_of(s.request("tools/call", {"name": "mcp", "arguments": {"tool": "fixture_echo",
                                                                       "args": {"text": "again"}}}))
if "again" not in again:
    fail(f"the call after the crash did not answer: {again!r}")
assert s.close() == 0, "pimcp-run.exe did not exit 0 when stdin closed"
wait_until("the fixture outlived pimcp-run's clean exit", lambda: not our_processes())
print("wine-smoke: the fixture crashed during a call and the next call was answered by a new one")

# 4. pimcp-run.exe killed: the fixture and its grandchild go with it.
grandchild_pid = os.path.join(work, "grandchild.pid")
config = write_config("grandchild.json", ["--spawn-grandchild", win(grandchild_pid)])
s = Session([pimcp, "--config", config])
s.initialize()
assert "up" in text_of(s.request("tools/call", {"name": "mcp", "arguments": {"tool": "fixture_echo",
                                                                          "args": {"text": "up"}}}))
wait_until("the grandchild did not start", lambda: os.path.exists(grandchild_pid) and len(our_processes()) >= 2)
running = our_processes()
s.proc.send_signal(signal.SIGKILL)
s.proc.wait(timeout=60)
s.watchdog.cancel()
wait_until(f"processes {running} (the fixture and its grandchild) outlived the killed pimcp-run",
           lambda: not our_processes())
print(f"wine-smoke: pimcp-run.exe killed; the fixture and its grandchild ({len(running)} processes) were gone after")

# 5. The Credential Manager, across processes.
token_tool = os.path.join(exe_dir, "examples", "token_tool.exe")
service = f"pimcp.wine-smoke.{os.getpid()}"
key = ["fx", "https://mcp.example/mcp"]


def tool(*argv):
    run = subprocess.run([WINE, token_tool, *argv], capture_output=True, text=True, env=env, cwd=work, timeout=120)
    if run.returncode != 0:
        fail(f"token_tool {argv[0]} exited {run.returncode}: {run.stderr[-2000:]!r}")
    return run.stdout.strip()


saved = tool("keyring-save", service, *key, "wine-smoke-token")
if "Windows Credential Manager" not in saved:
    fail(f"the record went to {saved!r}, not the Credential Manager")
if tool("keyring-load", service, *key) != "token=" + hashlib.sha256(b"wine-smoke-token").hexdigest():
    fail("another process did not read the saved record back")
tool("keyring-delete", service, *key)
if tool("keyring-load", service, *key) != "none":
    fail("the record was still there after delete")
print(f"wine-smoke: a token record went through the Credential Manager across processes ({saved})")
shutil.rmtree(work, ignore_errors=True)
