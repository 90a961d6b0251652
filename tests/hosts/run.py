#!/usr/bin/env python3
"""Drives one real agent host (installed by `.ci/setup-hosts` into `.ci/hosts`) against `pimcp-run` with a scripted
model (`model_api.py`, on loopback) and prints one JSON summary line.

    python3 tests/hosts/run.py HOST [--pimcp-run PATH] [--mcp-fixture PATH] [--codex-model M] [--keep] [--debug]

HOST is `claude-code`, `codex` or `gemini-cli` (`--help` lists every option; the binaries default to target/debug). Every run gets a fresh sandbox (a temp dir with a throwaway HOME,
pimcp's data dirs and a cold pimcp cache); the host's only MCP server is `pimcp-run --config SANDBOX/mcp.json`, whose
upstreams are `mcp-fixture` (as `fixture`) and server-everything (as `everything`, when `.ci/setup-peers` installed
it). The host runs non-interactively with a hard timeout; then its own `mcp list` must show pimcp connected.
Telemetry and updates are off, and a dead HTTP(S) proxy (loopback port 9, `NO_PROXY` for loopback) makes anything
that tries the internet fail at once. Every process started runs in its own process group; the groups, and any
process left with this run's marker in its environment, are killed at the end.

Exit status 0 when every step passed; otherwise 1 with the reason in the summary (`"ok": false, "error": …`) and
on stderr, and the sandbox is kept for inspection (`--keep` keeps it always).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HOSTS_DIR = os.path.join(ROOT, ".ci", "hosts")
EVERYTHING = os.path.join(ROOT, ".ci/peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
NODE22 = os.path.join(ROOT, ".ci/peers/node22/package/bin/node")
SETUP = "run `bash .ci/setup-hosts` (it installs the pinned Claude Code, Codex CLI and Gemini CLI into .ci/hosts)"
MARKER = "PIMCP_HOSTS_RUN"

sys.path.insert(0, HERE)
import model_api  # noqa: E402


class Failure(Exception):
    pass


class Run:
    def __init__(self, host, args):
        self.host = host
        self.args = args
        self.bin = os.path.join(args.hosts_dir, "node_modules", ".bin")
        self.started = time.monotonic()
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix=f"pimcp-host-{host}-"))
        self.home = os.path.join(self.dir, "home")
        self.work = os.path.join(self.dir, "work")
        self.logs = os.path.join(self.dir, "logs")
        for d in (self.home, self.work, self.logs, os.path.join(self.dir, "agent"), os.path.join(self.dir, "data"),
                  os.path.join(self.dir, "xdg-data"), os.path.join(self.dir, "tmp")):
            os.makedirs(d, exist_ok=True)
        self.config = os.path.join(self.dir, "mcp.json")
        self.model = None
        self.groups = []
        self.summary = {"host": host, "sandbox": self.dir}

    # ---------------------------------------------------------------- environment

    def pimcp_env(self):
        """Sandbox::env of tests/support/mod.rs: what every pimcp-run of this sandbox gets."""
        return {
            "HOME": self.home,
            "PI_CODING_AGENT_DIR": os.path.join(self.dir, "agent"),
            "PIMCP_DATA_DIR": os.path.join(self.dir, "data"),
            "XDG_DATA_HOME": os.path.join(self.dir, "xdg-data"),
            "PIMCP_CONFIG_MODE": "exclusive",
            MARKER: self.dir,
        }

    def base_env(self):
        node_dir = os.path.dirname(self.node())
        path = os.pathsep.join([node_dir, self.bin, "/usr/local/bin", "/usr/bin", "/bin"])
        env = {
            "PATH": path,
            "HOME": self.home,
            "USER": os.environ.get("USER", "tester"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "CI": "1",
            "TMPDIR": os.path.join(self.dir, "tmp"),
            "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
            "XDG_CACHE_HOME": os.path.join(self.home, ".cache"),
            "XDG_DATA_HOME": os.path.join(self.dir, "xdg-data"),
            "XDG_STATE_HOME": os.path.join(self.home, ".local/state"),
            # the internet is off limits: a dead proxy fails every non-loopback request at once
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "https_proxy": "http://127.0.0.1:9",
            "http_proxy": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
            "DO_NOT_TRACK": "1",
        }
        env.update(self.pimcp_env())
        return env

    def node(self):
        if self.args.node:
            return self.args.node
        return shutil.which("node") or NODE22

    def pimcp_entry(self):
        """The one MCP server every host gets."""
        return {"command": self.args.pimcp_run, "args": ["--config", self.config], "env": self.pimcp_env()}

    def write_pimcp_config(self):
        servers = {"fixture": {"command": self.args.mcp_fixture}}
        everything = self.args.everything
        if everything is None and os.path.exists(EVERYTHING):
            everything = EVERYTHING
        if everything:
            if not os.path.exists(everything):
                raise Failure(f"server-everything missing ({everything}): run `bash .ci/setup-peers`")
            servers["everything"] = {"command": self.args.everything_node or self.node(), "args": [everything, "stdio"]}
        with open(self.config, "w") as f:
            json.dump({"mcpServers": servers}, f, indent=2)
        self.summary["upstreams"] = sorted(servers)

    # ---------------------------------------------------------------- processes

    def run(self, name, argv, env, timeout):
        """Runs argv in its own process group; kills the group after `timeout` s. Returns (code, stdout, stderr)."""
        started = time.monotonic()
        out_path = os.path.join(self.logs, f"{name}.stdout")
        err_path = os.path.join(self.logs, f"{name}.stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(argv, cwd=self.work, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            self.groups.append(proc.pid)
            try:
                code = proc.wait(timeout=timeout)
                self.summary.setdefault("timings_s", {})[name] = round(time.monotonic() - started, 1)
                # what the host started (pimcp-run, its upstreams) must end with it: give them 10 s, then record
                # the survivors (killed below and in cleanup; execute() fails the run)
                deadline = time.monotonic() + 10
                left = self.leftovers()
                while left and time.monotonic() < deadline:
                    time.sleep(0.1)
                    left = self.leftovers()
                if left:
                    self.summary.setdefault("outlived_host", {})[name] = [c for _, c in left]
            except subprocess.TimeoutExpired:
                self.kill_group(proc.pid)
                proc.wait(timeout=10)
                raise Failure(f"`{' '.join(argv[:3])} …` did not finish within {timeout} s (killed); "
                              f"stderr tail: {tail(err_path)}; stdout tail: {tail(out_path)}")
            finally:
                self.kill_group(proc.pid)
                self.summary.setdefault("timings_s", {}).setdefault(name, round(time.monotonic() - started, 1))
        return code, read(out_path), read(err_path)

    @staticmethod
    def kill_group(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def leftovers(self):
        """Pids of processes still alive with this run's marker in their environment."""
        found = []
        needle = f"{MARKER}={self.dir}".encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        with open(f"/proc/{pid}/cmdline", "rb") as c:
                            found.append((int(pid), c.read().replace(b"\0", b" ").decode(errors="replace")[:200]))
            except OSError:
                continue
        return found

    def cleanup(self):
        for pgid in self.groups:
            self.kill_group(pgid)
        deadline = time.monotonic() + 5
        left = self.leftovers()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.leftovers()
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return left

    # ---------------------------------------------------------------- hosts

    def binary(self, name):
        path = os.path.join(self.bin, name)
        if not os.path.exists(path):
            raise Failure(f"{self.host} is not installed ({path} missing): {SETUP}")
        return path

    def version(self, argv, env):
        code, out, err = self.run("version", argv, env, 60)
        if code != 0:
            raise Failure(f"`{' '.join(argv)}` failed ({code}): {err.strip() or out.strip()}")
        return out.strip().splitlines()[0] if out.strip() else ""

    def claude(self):
        exe = self.binary("claude")
        if os.path.getsize(os.path.realpath(exe)) < 1_000_000:
            raise Failure(f"{exe} is the npm placeholder, not the native binary (its postinstall did not run): {SETUP}")
        env = self.base_env()
        env.update({
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{self.model.port}",
            "ANTHROPIC_API_KEY": "dummy",
            "CLAUDE_CONFIG_DIR": os.path.join(self.home, ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            "MCP_TIMEOUT": "30000",
            "MCP_TOOL_TIMEOUT": "60000",
            "API_TIMEOUT_MS": "60000",
        })
        os.makedirs(env["CLAUDE_CONFIG_DIR"], exist_ok=True)
        self.summary["version"] = self.version([exe, "--version"], env)
        entry = self.pimcp_entry()
        add = [exe, "mcp", "add", "--scope", "user", "pimcp"]
        for k, v in entry["env"].items():
            add += ["-e", f"{k}={v}"]
        add += ["--", entry["command"], *entry["args"]]
        code, out, err = self.run("mcp-add", add, env, 60)
        if code != 0:
            raise Failure(f"`claude mcp add` failed ({code}): {err or out}")
        prompt = "Use pimcp's mcp tool as scripted."
        argv = [exe, "-p", prompt, "--output-format", "json", "--max-turns", "12",
                "--allowedTools", "mcp__pimcp__mcp", "--permission-mode", "acceptEdits"]
        if self.args.debug:
            argv += ["--debug"]
        code, out, err = self.run("host", argv, env, self.args.timeout)
        final = out.strip()
        try:
            final = json.loads(out.strip().splitlines()[-1]).get("result", final)
        except (ValueError, IndexError, AttributeError):
            pass
        self.host_result(code, final, err)
        self.mcp_list([exe, "mcp", "list"], env, r"pimcp:.*(✓ Connected|Connected)")

    def codex(self):
        exe = self.binary("codex")
        env = self.base_env()
        codex_home = os.path.join(self.home, ".codex")
        os.makedirs(codex_home, exist_ok=True)
        env.update({"CODEX_HOME": codex_home, "SCRIPTED_API_KEY": "dummy", "RUST_LOG": "warn",
                    "CODEX_DISABLE_UPDATE_CHECK": "1"})
        entry = self.pimcp_entry()
        model = self.args.codex_model
        config = (f"model = {toml(model)}\n" if model else "") + f"""\
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false
web_search = "disabled"

[model_providers.scripted]
name = "scripted model"
base_url = {toml(f"http://127.0.0.1:{self.model.port}/v1")}
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 60000

[mcp_servers.pimcp]
command = {toml(entry["command"])}
args = [{", ".join(toml(a) for a in entry["args"])}]
startup_timeout_sec = 30
tool_timeout_sec = 60
default_tools_approval_mode = "approve"
required = true

[mcp_servers.pimcp.env]
{chr(10).join(f"{k} = {toml(v)}" for k, v in entry["env"].items())}

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false

[feedback]
enabled = false

[projects.{toml(self.work)}]
trust_level = "trusted"
"""
        with open(os.path.join(codex_home, "config.toml"), "w") as f:
            f.write(config)
        self.summary["version"] = self.version([exe, "--version"], env)
        self.summary["codex_model"] = model
        last = os.path.join(self.dir, "codex-last-message.txt")
        argv = [exe, "exec", "--skip-git-repo-check", "--color", "never", "--output-last-message", last,
                "Use pimcp's mcp tool as scripted."]
        code, out, err = self.run("host", argv, env, self.args.timeout)
        final = read(last).strip() if os.path.exists(last) else out.strip()
        self.host_result(code, final, err)
        # `codex mcp list` prints the configuration (it connects nothing): pimcp's row must say `enabled`
        self.mcp_list([exe, "mcp", "list"], env, r"(?m)^pimcp\s.*\benabled\b")

    def gemini(self):
        exe = self.binary("gemini")
        env = self.base_env()
        gdir = os.path.join(self.home, ".gemini")
        os.makedirs(gdir, exist_ok=True)
        env.update({
            "GEMINI_API_KEY": "dummy",
            "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{self.model.port}",
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_TELEMETRY_ENABLED": "false",
            "GEMINI_SANDBOX": "false",
        })
        entry = self.pimcp_entry()
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False,
                        "enableAutoUpdateNotification": False},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "mcpServers": {"pimcp": dict(entry, timeout=60000)},
        }
        with open(os.path.join(gdir, "settings.json"), "w") as f:
            json.dump(settings, f, indent=2)
        with open(os.path.join(gdir, "trustedFolders.json"), "w") as f:
            json.dump({self.work: "TRUST_FOLDER"}, f, indent=2)
        self.summary["version"] = self.version([self.node(), exe, "--version"], env)
        argv = [self.node(), exe, "-p", "Use pimcp's mcp tool as scripted.", "--approval-mode", "yolo",
                "--output-format", "json"]
        if self.args.debug:
            argv += ["--debug"]
        code, out, err = self.run("host", argv, env, self.args.timeout)
        final = out.strip()
        try:
            final = json.loads(out[out.index("{"):]).get("response", final)
        except (ValueError, AttributeError):
            pass
        self.host_result(code, final, err)
        self.mcp_list([self.node(), exe, "mcp", "list"], env, r"pimcp.*Connected")

    def host_result(self, code, final, stderr):
        self.summary["host_exit"] = code
        self.summary["final_text"] = final[:500]
        verdict = self.model.script.verdict()
        self.summary.update({k: verdict[k] for k in ("tool_name", "tool_search", "deferred", "code_mode")})
        self.summary["models"] = self.model.models()
        self.summary["steps"] = [{k: (v[:1000] if isinstance(v, str) else v) for k, v in s.items() if v is not None}
                                 for s in verdict["steps"]]
        if not verdict["ok"]:
            raise Failure(f"the scripted model's checks failed: {verdict['reason']}; host exit {code}; "
                          f"host stderr tail: {stderr[-1500:].strip()}")
        if code != 0:
            raise Failure(f"the host exited with {code}; stderr tail: {stderr[-1500:].strip()}")
        if model_api.FINAL not in final:
            raise Failure(f"the host's final output is not {model_api.FINAL!r}: {final[:500]!r}")

    def mcp_list(self, argv, env, pattern):
        code, out, err = self.run("mcp-list", argv, env, 90)
        text = strip_ansi(out + ("\n" + err if err.strip() else "")).strip()
        self.summary["mcp_list"] = text[-1000:]
        if code != 0 or not re.search(pattern, text):
            raise Failure(f"`{' '.join(os.path.basename(a) for a in argv[:3])}` does not show pimcp connected "
                          f"(exit {code}): {text[-1000:]}")

    # ---------------------------------------------------------------- the run

    def execute(self):
        ok = False
        try:
            for path, what in ((self.args.pimcp_run, "pimcp-run"), (self.args.mcp_fixture, "mcp-fixture")):
                if not os.access(path, os.X_OK):
                    raise Failure(f"{what} binary not executable: {path}")
            if not os.path.isdir(self.bin):
                raise Failure(f"no hosts installed ({self.bin} missing): {SETUP}")
            self.write_pimcp_config()
            transcript = os.path.join(self.dir, "model-transcript.json")
            self.model = model_api.Model(self.host, transcript)
            self.model.start()
            {"claude-code": self.claude, "codex": self.codex, "gemini-cli": self.gemini}[self.host]()
            ok = True
        except Failure as e:
            self.summary["error"] = str(e)
        finally:
            if self.model:
                self.model.stop()
                self.model.save()
                self.summary["model_requests"] = [
                    {"n": r["n"], "path": r["path"], **{k: v for k, v in (r.get("response") or {}).items()
                                                         if k in ("kind", "action")}}
                    for r in self.model.transcript()["requests"]]
            left = self.cleanup()
            if ok and self.summary.get("outlived_host"):
                ok = False
                self.summary["error"] = f"processes outlived their host by 10 s: {self.summary['outlived_host']}"
            if left:
                self.summary["leftover_processes"] = [c for _, c in left]
                if ok:
                    ok = False
                    self.summary["error"] = f"processes outlived the run (killed): {left}"
        self.summary["elapsed_s"] = round(time.monotonic() - self.started, 1)
        self.summary["ok"] = ok
        if (ok or self.model is None) and not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.summary.pop("sandbox")
        return ok


def toml(value):
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def tail(path, n=800):
    try:
        return read(path)[-n:].strip()
    except OSError:
        return ""


def strip_ansi(text):
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("host", choices=["claude-code", "codex", "gemini-cli"])
    parser.add_argument("--pimcp-run", default=os.path.join(ROOT, "target/debug/pimcp-run"))
    parser.add_argument("--mcp-fixture", default=os.path.join(ROOT, "target/debug/mcp-fixture"))
    parser.add_argument("--timeout", type=int, default=240, help="hard limit for the host's run, seconds")
    parser.add_argument("--codex-model", default="",
                        help="the model Codex is told to use (default: none, Codex picks its catalog's default)")
    parser.add_argument("--node", help="the node binary for Node hosts (default: node on PATH, else Node 22)")
    parser.add_argument("--everything", help="server-everything's dist/index.js, a second upstream (default: the one "
                        ".ci/setup-peers installs, when present; '' for none)")
    parser.add_argument("--everything-node", help="the node that runs server-everything (default: --node)")
    parser.add_argument("--hosts-dir", default=HOSTS_DIR, help="where .ci/setup-hosts installed the hosts")
    parser.add_argument("--keep", action="store_true", help="keep the sandbox even when the run passed")
    parser.add_argument("--debug", action="store_true", help="run the host with its debug logging")
    args = parser.parse_args()
    # the hosts run in the sandbox's work dir: every path given must hold there
    for key in ("pimcp_run", "mcp_fixture", "node", "everything", "everything_node", "hosts_dir"):
        if getattr(args, key):
            setattr(args, key, os.path.abspath(getattr(args, key)))
    run = Run(args.host, args)
    ok = run.execute()
    print(json.dumps(run.summary), flush=True)
    if not ok:
        print(f"{args.host}: FAILED: {run.summary.get('error')}\n(sandbox kept: {run.dir})", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
