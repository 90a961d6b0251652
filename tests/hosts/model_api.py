#!/usr/bin/env python3
"""A scripted model on loopback, standing in for an agent host's model API (Python stdlib only).

One server speaks all three wire formats an agent host may use:

- Anthropic Messages (`POST /v1/messages`, SSE when `stream` is true; `/v1/messages/count_tokens`): Claude Code.
- OpenAI Responses (`POST /v1/responses`, SSE; `GET /v1/models`): Codex CLI.
- Gemini (`POST /v1beta/models/M:streamGenerateContent?alt=sse`, `:generateContent`, `:countTokens`): Gemini CLI.

The script, the same for every host (each step is decided from the conversation the host sends, so retries and
side requests do not move it along):

0. (only when the host defers MCP tools) call the host's tool-search tool for pimcp's `mcp` tool;
1. call `mcp({"search": "echo"})`;
2. the result must name `fixture_echo`: call `mcp({"tool": "fixture_echo", "args": {"text": "hello from HOST"}})`;
3. the result must hold `hello from HOST`: call `mcp({"tool": "fixture_ecoh", "args": {"text": "x"}})` (a typo);
4. the result must be an error that suggests `fixture_echo`: answer `done`.

A failed check answers `FAILED: why` instead and makes the verdict fail. Requests that are not the agent's main
turn (titles, quota probes, classifiers, token counts) get a harmless answer. Every request is recorded; the
transcript (`Model.transcript()`, or `--transcript FILE` when run as a script) holds the requests, the steps and
the verdict.

Run alone (for debugging a host by hand): `python3 model_api.py --host claude-code --port 8080 --transcript t.json`.
"""

import argparse
import gzip
import http.server
import json
import os
import re
import signal
import socketserver
import sys
import threading
import time
import traceback
import urllib.parse
import zlib

SEARCH = "echo"
FOUND = "fixture_echo"
TYPO = "fixture_ecoh"
FINAL = "done"
# The `mcpScript` step: two calls in one script, one combined result.
SCRIPT = ("const [a, b] = await Promise.all([tools.call('fixture_echo', {text: 'scripted'}), "
          "tools.call('fixture_add', {a: 20, b: 22})]); return `${a} ${b.sum}`;")
SCRIPTED = "scripted 42"


def mcp_tool_name(names):
    """The host's name for pimcp's `mcp` tool among `names`, or None."""
    for name in names:
        if name in ("mcp", "pimcp__mcp", "mcp__pimcp__mcp", "mcp_pimcp_mcp", "pimcp.mcp", "pimcp_mcp"):
            return name
    for name in names:
        if "pimcp" in name and name.endswith("mcp"):
            return name
    return None


def script_tool_name(names):
    """The host's name for pimcp's `mcpScript` tool among `names`, or None."""
    for name in names:
        if "pimcp" in name and name.endswith("mcpScript"):
            return name
    return "mcpScript" if "mcpScript" in names else None


def tool_search_name(names):
    """The host's tool-search tool (Claude Code `ToolSearch`, Codex `tool_search`), or None."""
    for name in names:
        if name.lower().replace("_", "") in ("toolsearch", "searchtools", "tooldiscovery"):
            return name
    return None


def strings_of(value):
    """Every string in a JSON value, one per line (where a host lists its deferred tools' names)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(strings_of(v) for v in value)
    if isinstance(value, dict):
        return "\n".join(strings_of(v) for v in value.values())
    return ""


def text_of(value):
    """Flattens a tool result (a string, content blocks, a JSON object) to text for the checks."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(v) for v in value)
    if isinstance(value, dict):
        for key in ("text", "output", "content", "result", "error", "llmContent"):
            if key in value and isinstance(value[key], (str, list, dict)):
                inner = text_of(value[key])
                if inner:
                    return inner
        return json.dumps(value)
    return str(value)


class Conversation:
    """What one request says, in a form the script understands: the tools offered and the calls/results so far."""

    code_mode = False

    def __init__(self, tool_names, events, tool_specs):
        self.tool_names = tool_names  # names of the tools the host offers, as sent
        self.events = events  # [("call", id, name, args) | ("result", id, name, text, is_error)] in order
        self.tool_specs = tool_specs  # name -> the tool's definition as sent

    def last_call_and_result(self):
        """(call, result) of the model's last tool call, result None if the host has not answered it yet."""
        calls = [e for e in self.events if e[0] == "call"]
        if not calls:
            return None, None
        call = calls[-1]
        for e in self.events[self.events.index(call) + 1:]:
            if e[0] == "result" and (e[1] == call[1] or not e[1] or not call[1]):
                return call, e
        return call, None


class Script:
    """The scripted model: decides each main-turn answer from the conversation and records the steps."""

    def __init__(self, host):
        self.host = host
        self.lock = threading.Lock()
        self.steps = {}  # step name -> record (a retried request overwrites its step)
        self.tool_name = None
        self.tool_search = None
        self.deferred = None
        self.code_mode = False
        self.failure = None
        self.finished = False
        self.counter = 0

    def call_id(self, step):
        with self.lock:
            self.counter += 1
            return f"call_pimcp_{step}_{self.counter}"

    def record(self, step, **fields):
        with self.lock:
            self.steps[step] = dict(step=step, **fields)
            if not fields.get("ok", True) and self.failure is None:
                self.failure = f"{step}: {fields.get('why', 'failed')}"

    def step_of(self, call):
        _, _, name, args = call
        if name != self.tool_name and name == self.tool_search:
            return "tool_search"
        if name and name.endswith("mcpScript"):
            return "script"
        args = args if isinstance(args, dict) else {}
        if "search" in args:
            return "search"
        if args.get("tool") == FOUND:
            return "call"
        if args.get("tool") == TYPO:
            return "typo"
        return "other"

    def search_args(self, conv, wanted):
        """Arguments for the host's tool-search tool that select `wanted`."""
        spec = conv.tool_specs.get(self.tool_search) or {}
        props = {}
        for key in ("input_schema", "parameters", "parametersJsonSchema", "inputSchema"):
            if isinstance(spec.get(key), dict):
                props = spec[key].get("properties") or {}
        if self.tool_search == "ToolSearch" and "query" in props:
            # the name when the host lists it among its deferred tools, else (its server still connecting) the
            # keyword form that requires `pimcp` in the name
            return {"query": f"select:{wanted}" if wanted else "+pimcp mcp", "max_results": 5}
        for key in ("query", "q", "search", "pattern"):
            if key in props:
                return {key: "pimcp mcp"}
        return {"query": "pimcp mcp"}

    def decide(self, conv, deferred_text):
        """("tool", name, args, id) or ("text", text) for a main-turn request."""
        name = mcp_tool_name(conv.tool_names)
        if name:
            self.tool_name = self.tool_name or name
        search_tool = tool_search_name(conv.tool_names)
        if getattr(conv, "code_mode", False) and not search_tool:
            search_tool = "exec"  # code mode: a first `exec` lists ALL_TOOLS, where deferred MCP tools are
            self.code_mode = True
        if search_tool:
            self.tool_search = self.tool_search or search_tool
        call, result = conv.last_call_and_result()
        if call is not None and result is None:
            return self.fail("last", f"the host sent no result for the model's call {call[2]}({json.dumps(call[3])})")
        step = self.step_of(call) if call else None
        text = result[3] if result else ""
        is_error = bool(result[4]) if result else False
        excerpt = text[:2000]

        def call_mcp(next_step, args):
            if not name:
                return self.fail(next_step, f"pimcp's mcp tool is not among the tools the host offers: {conv.tool_names}")
            return ("tool", name, args, self.call_id(next_step))

        if step is None:
            if name:
                self.deferred = self.deferred if self.deferred is not None else False
                return call_mcp("search", {"search": SEARCH})
            if search_tool:
                self.deferred = True
                wanted = next(iter(re.findall(r"(?<![\w.-])[\w.-]*pimcp[\w.-]*mcp\b", deferred_text)), None)
                return ("tool", search_tool, self.search_args(conv, wanted), self.call_id("tool_search"))
            return self.fail("start", f"neither pimcp's mcp tool nor a tool search among the host's tools: {conv.tool_names}")
        if step == "tool_search":
            ok = name is not None
            self.record("tool_search", tool=call[2], args=call[3], result=excerpt, is_error=is_error, ok=ok,
                        why=None if ok else f"the mcp tool is still not offered after {call[2]}: {conv.tool_names}")
            return call_mcp("search", {"search": SEARCH}) if ok else self.fail_text()
        if step == "search":
            ok = FOUND in text and not is_error
            self.record("search", tool=call[2], args=call[3], result=excerpt, is_error=is_error, ok=ok,
                        why=None if ok else f"no {FOUND} in the search result (cold cache)")
            if not ok:
                return self.fail_text()
            return call_mcp("call", {"tool": FOUND, "args": {"text": f"hello from {self.host}"}})
        if step == "call":
            ok = f"hello from {self.host}" in text and not is_error
            self.record("call", tool=call[2], args=call[3], result=excerpt, is_error=is_error, ok=ok,
                        why=None if ok else f"no 'hello from {self.host}' in the call's result")
            if not ok:
                return self.fail_text()
            return call_mcp("typo", {"tool": TYPO, "args": {"text": "x"}})
        if step == "typo":
            erred = is_error or "not found" in text.lower() or "error" in text.lower()[:200]
            ok = FOUND in text and erred
            self.record("typo", tool=call[2], args=call[3], result=excerpt, is_error=is_error, ok=ok,
                        why=None if ok else f"the typo's result is not an error suggesting {FOUND}")
            if not ok:
                return self.fail_text()
            script = script_tool_name(conv.tool_names)
            if script and not self.code_mode:
                return ("tool", script, {"code": SCRIPT}, self.call_id("script"))
            return self.finish()
        if step == "script":
            ok = SCRIPTED in text and not is_error
            self.record("script", tool=call[2], args=call[3], result=excerpt, is_error=is_error, ok=ok,
                        why=None if ok else f"no '{SCRIPTED}' in the script's result")
            return self.finish() if ok else self.fail_text()
        return self.fail("unexpected", f"unexpected last call {call[2]}({json.dumps(call[3])})")

    def finish(self):
        with self.lock:
            self.finished = True
        self.record("final", text=FINAL, ok=True)
        return ("text", FINAL)

    def fail(self, step, why):
        self.record(step, ok=False, why=why)
        return self.fail_text()

    def fail_text(self):
        return ("text", f"FAILED: {self.failure}")

    def verdict(self):
        with self.lock:
            order = ["tool_search", "search", "call", "typo", "script", "final"]
            steps = [self.steps[s] for s in order if s in self.steps]
            steps += [v for k, v in self.steps.items() if k not in order]
            missing = [s for s in ("search", "call", "typo", "final") if s not in self.steps]
            ok = self.failure is None and not missing and self.finished
            reason = self.failure or (f"steps never reached: {missing}" if missing else None)
            return {"ok": ok, "reason": reason, "tool_name": self.tool_name, "tool_search": self.tool_search,
                    "deferred": self.deferred, "code_mode": self.code_mode, "steps": steps}


# ---------------------------------------------------------------- Anthropic Messages


def anthropic_parse(body):
    tools = body.get("tools") or []
    names = [t.get("name") for t in tools if isinstance(t, dict) and t.get("name")]
    specs = {t.get("name"): t for t in tools if isinstance(t, dict)}
    events = []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                events.append(("call", block.get("id"), block.get("name"), block.get("input")))
            elif block.get("type") == "tool_result":
                events.append(("result", block.get("tool_use_id"), None, text_of(block.get("content")),
                               bool(block.get("is_error"))))
    return Conversation(names, events, specs)


def anthropic_message(model, action):
    if action[0] == "tool":
        block = {"type": "tool_use", "id": "toolu_" + action[3][len("call_"):], "name": action[1], "input": action[2]}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": action[1]}
        stop = "end_turn"
    return {"id": f"msg_{int(time.time() * 1000)}", "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


def anthropic_sse(message):
    out = []

    def ev(name, data):
        out.append(f"event: {name}\ndata: {json.dumps(data)}\n\n")

    start = dict(message, content=[], stop_reason=None)
    start["usage"] = dict(message["usage"], output_tokens=1)
    ev("message_start", {"type": "message_start", "message": start})
    for i, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            ev("content_block_start", {"type": "content_block_start", "index": i,
                                       "content_block": dict(block, input={})})
            ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                       "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        else:
            ev("content_block_start", {"type": "content_block_start", "index": i,
                                       "content_block": {"type": "text", "text": ""}})
            ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                       "delta": {"type": "text_delta", "text": block["text"]}})
        ev("content_block_stop", {"type": "content_block_stop", "index": i})
    ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                         "usage": {"output_tokens": 5}})
    ev("message_stop", {"type": "message_stop"})
    return "".join(out)


# ---------------------------------------------------------------- OpenAI Responses
#
# Codex presents MCP tools in one of three ways, chosen by the model's catalog entry:
# - as functions in a `namespace` tool (`mcp__pimcp` holding `mcp`), called as {namespace, name};
# - deferred behind a client-executed `tool_search` tool whose `tool_search_output` carries the namespace;
# - in code mode: one freeform `exec` tool (JavaScript in a V8 isolate) whose global `tools` object holds every
#   nested tool, MCP tools deferred (listed only in `ALL_TOOLS`). The script then writes JS: a first `exec` lists
#   `ALL_TOOLS` entries naming pimcp, later ones `await tools.NAME(ARGS)`. A marker comment on the first line
#   (`// pimcp-script: {...}`) lets a later request tell which step an `exec` call was.

CODE_MARK = "// pimcp-script: "


def responses_tools(tools, names, specs):
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        name = t.get("name") or (t.get("function") or {}).get("name")
        if t.get("type") == "namespace" or isinstance(t.get("tools"), list):
            # a namespace of tools: the model calls them as {namespace, name}; named here `namespace.name`
            prefix = t.get("name") or ""
            for inner in t.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    if prefix == "functions":  # Codex's own namespace in code mode: `exec` is called plainly
                        full = inner["name"]
                        specs[full] = dict(inner)
                    else:
                        full = f"{prefix}.{inner['name']}"
                        specs[full] = dict(inner, namespace=prefix)
                    names.append(full)
            continue
        if not name and t.get("type"):
            name = t["type"]  # hosted tools (`web_search`, `tool_search`, …) are named by their type
        if name:
            names.append(name)
            specs[name] = t


def is_code_mode_exec(spec):
    return (isinstance(spec, dict) and spec.get("type") == "custom" and spec.get("name") == "exec"
            and "tools" in (spec.get("description") or ""))


def responses_parse(body):
    names, specs = [], {}
    responses_tools(body.get("tools"), names, specs)
    items = body.get("input")
    items = items if isinstance(items, list) else []
    for item in items:  # code mode sends its tools as an `additional_tools` input item
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            responses_tools(item.get("tools"), names, specs)
    code_mode = is_code_mode_exec(specs.get("exec"))
    events = []
    discovered = []
    pending = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "")
        if kind == "tool_search_output":
            found_names, found_specs = [], {}
            responses_tools(item.get("tools"), found_names, found_specs)
            names.extend(found_names)
            specs.update(found_specs)
            events.append(("result", item.get("call_id"), None, json.dumps(item.get("tools")), False))
        elif kind.endswith("_output") and "output" in item:
            output = item.get("output")
            text = text_of(output)
            is_error = isinstance(output, dict) and output.get("success") is False
            call = pending.get(item.get("call_id"))
            if call and call[0] == "code":
                is_error = is_error or bool(re.search(r'"isError"\s*:\s*true', text))
                if call[1] == "exec":  # the discovery step: the names ALL_TOOLS holds for pimcp
                    discovered += re.findall(r'"name"\s*:\s*"([^"]*pimcp[^"]*)"', text)
            events.append(("result", item.get("call_id"), None, text, is_error))
        elif kind == "custom_tool_call" and item.get("name") == "exec":
            source = item.get("input") or ""
            first = source.split("\n", 1)[0]
            if first.startswith(CODE_MARK):
                step = json.loads(first[len(CODE_MARK):])
                events.append(("call", item.get("call_id"), step["tool"], step["args"]))
                pending[item.get("call_id")] = ("code", step["tool"])
            else:
                events.append(("call", item.get("call_id"), "exec", {"source": source}))
        elif kind.endswith("_call") and (item.get("name") or kind == "tool_search_call"):
            args = item.get("arguments")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {"raw": args}
            name = item.get("name") or "tool_search"
            if item.get("namespace"):
                name = f"{item['namespace']}.{name}"
            events.append(("call", item.get("call_id"), name, args))
    if code_mode:
        for name in discovered:
            if name not in names:
                names.append(name)
                specs[name] = {"type": "code_mode_nested", "name": name}
    conv = Conversation(names, events, specs)
    conv.code_mode = code_mode
    return conv


def code_mode_source(name, args):
    mark = CODE_MARK + json.dumps({"tool": name, "args": args})
    if name == "exec":
        return (mark + "\n"
                "text(JSON.stringify(ALL_TOOLS.filter(t => /pimcp/.test(t.name + ' ' + t.description))));")
    return (mark + "\n"
            f"const result = await tools.{name}({json.dumps(args)});\n"
            "text(JSON.stringify(result));")


def responses_sse(model, action, spec, code_mode=False):
    rid = f"resp_{int(time.time() * 1000)}"
    if action[0] == "tool":
        name, args, call_id = action[1], action[2], action[3]
        if code_mode and (name == "exec" or (spec or {}).get("type") == "code_mode_nested"):
            item = {"type": "custom_tool_call", "id": "ctc_" + call_id, "call_id": call_id, "name": "exec",
                    "input": code_mode_source(name, args), "status": "completed"}
        elif spec and spec.get("type") == "tool_search":
            item = {"type": "tool_search_call", "id": "ts_" + call_id, "call_id": call_id, "execution": "client",
                    "arguments": args, "status": "completed"}
        else:
            item = {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "name": name,
                    "arguments": json.dumps(args), "status": "completed"}
            if spec and spec.get("namespace"):
                item["namespace"] = spec["namespace"]
                item["name"] = name[len(spec["namespace"]) + 1:]
    else:
        item = {"type": "message", "id": "msg_" + rid, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": action[1], "annotations": []}]}
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
    out = []
    seq = [0]

    def ev(name, data):
        data = dict(data, type=name, sequence_number=seq[0])
        seq[0] += 1
        out.append(f"event: {name}\ndata: {json.dumps(data)}\n\n")

    ev("response.created", {"response": dict(base, status="in_progress", output=[])})
    ev("response.output_item.added", {"output_index": 0, "item": dict(item, status="in_progress")})
    if item["type"] == "message":
        ev("response.output_text.delta", {"output_index": 0, "content_index": 0, "item_id": item["id"],
                                          "delta": action[1]})
    ev("response.output_item.done", {"output_index": 0, "item": item})
    ev("response.completed", {"response": dict(base, status="completed", output=[item], usage=usage)})
    return "".join(out)


# ---------------------------------------------------------------- Gemini


def gemini_parse(body):
    names, specs = [], {}
    for t in body.get("tools") or []:
        for decl in (t or {}).get("functionDeclarations") or []:
            if decl.get("name"):
                names.append(decl["name"])
                specs[decl["name"]] = decl
    events = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if "functionCall" in part:
                fc = part["functionCall"]
                events.append(("call", fc.get("id"), fc.get("name"), fc.get("args")))
            elif "functionResponse" in part:
                fr = part["functionResponse"]
                response = fr.get("response") or {}
                is_error = isinstance(response, dict) and "error" in response
                events.append(("result", fr.get("id"), fr.get("name"), text_of(response), is_error))
    return Conversation(names, events, specs)


def schema_instance(schema):
    """A value that fits a (small) JSON schema, for the host's own structured side requests."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    kind = kind.lower() if isinstance(kind, str) else kind
    if schema.get("enum"):
        values = schema["enum"]
        for preferred in ("user", "flash", "false"):
            if preferred in values:
                return preferred
        return values[0]
    if kind == "object" or "properties" in schema:
        return {k: schema_instance(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)  # Gemini CLI's router wants a complexity score of 1-100
    if kind == "boolean":
        return False
    return "done"


def gemini_chunk(parts, finish=True):
    chunk = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
             "modelVersion": "scripted"}
    if finish:
        chunk["candidates"][0]["finishReason"] = "STOP"
        chunk["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
    return chunk


def gemini_parts(action):
    if action[0] == "tool":
        return [{"functionCall": {"name": action[1], "args": action[2], "id": action[3]}}]
    return [{"text": action[1]}]


# ---------------------------------------------------------------- the server


class Model:
    """The loopback model API. `Model(host).start()` returns the port; `stop()` ends it."""

    def __init__(self, host, transcript_path=None, port=0):
        self.host = host
        self.script = Script(host)
        self.requests = []
        self.lock = threading.Lock()
        self.transcript_path = transcript_path
        model = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                model.handle(self, None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    raw = read_chunked(self.rfile)
                model.handle(self, raw)

            do_PUT = do_POST
            do_DELETE = do_GET
            do_HEAD = do_GET

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", port), Handler)
        self.thread = None

    @property
    def port(self):
        return self.server.server_address[1]

    def start(self):
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()
        return self.port

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def transcript(self):
        with self.lock:
            requests = list(self.requests)
        return {"host": self.host, "verdict": self.script.verdict(), "requests": requests}

    def models(self):
        """The model names the host asked for in its main-turn requests."""
        with self.lock:
            names = {r["response"].get("model") for r in self.requests
                     if (r.get("response") or {}).get("kind") == "main"}
        return sorted(n for n in names if n)

    def save(self):
        if self.transcript_path:
            tmp = self.transcript_path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.transcript(), f, indent=1)
            os.replace(tmp, self.transcript_path)

    def handle(self, req, raw):
        url = urllib.parse.urlsplit(req.path)
        body = None
        if raw:
            try:
                body = json.loads(raw.decode("utf-8"))
            except ValueError:  # a compressed body (Codex can compress requests)
                for decode in (gzip.decompress, zlib.decompress, lambda b: zlib.decompress(b, -15)):
                    try:
                        body = json.loads(decode(raw).decode("utf-8"))
                        break
                    except Exception:
                        continue
                if body is None:
                    body = {"_raw": raw[:4000].decode("utf-8", "replace")}
        entry = {"n": 0, "time": round(time.time(), 3), "method": req.command, "path": req.path,
                 "headers": {k: v for k, v in req.headers.items()
                             if k.lower() in ("user-agent", "anthropic-beta", "anthropic-version", "x-app",
                                              "originator", "openai-beta", "x-goog-api-client", "content-type",
                                              "accept", "version", "session_id")},
                 "body": body}
        with self.lock:
            entry["n"] = len(self.requests) + 1
            self.requests.append(entry)
        try:
            status, ctype, payload, summary = self.answer(req.command, url, body or {})
        except Exception as e:  # a bug here must show in the transcript, not hang the host
            status, ctype, payload = 500, "application/json", json.dumps({"error": {"message": repr(e)}})
            summary = {"kind": "error", "error": traceback.format_exc()}
            self.script.record("internal", ok=False, why=f"model stand-in crashed: {e!r}")
        entry["response"] = summary
        data = payload.encode("utf-8")
        try:
            req.send_response(status)
            req.send_header("Content-Type", ctype)
            req.send_header("Content-Length", str(len(data)))
            if ctype.startswith("text/event-stream"):
                req.send_header("Cache-Control", "no-cache")
            req.send_header("request-id", f"req_{entry['n']}")
            req.send_header("x-request-id", f"req_{entry['n']}")
            req.end_headers()
            if req.command != "HEAD":
                req.wfile.write(data)
                req.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.save()

    def answer(self, method, url, body):
        path = url.path
        query = urllib.parse.parse_qs(url.query)
        # ---- Anthropic
        if path.endswith("/v1/messages/count_tokens"):
            return 200, "application/json", json.dumps({"input_tokens": 100}), {"kind": "count_tokens"}
        if path.endswith("/v1/messages") and method == "POST":
            conv = anthropic_parse(body)
            model = body.get("model", "claude")
            main = mcp_tool_name(conv.tool_names) or tool_search_name(conv.tool_names)
            if main:
                action = self.script.decide(conv, deferred_text=strings_of(body))
            else:
                action = ("text", FINAL)
            message = anthropic_message(model, action)
            summary = {"kind": "main" if main else "side", "model": model, "action": list(action[:3]),
                       "tools": conv.tool_names}
            if body.get("stream"):
                return 200, "text/event-stream; charset=utf-8", anthropic_sse(message), summary
            return 200, "application/json", json.dumps(message), summary
        # ---- OpenAI Responses
        if path.endswith("/responses") and method == "POST":
            conv = responses_parse(body)
            model = body.get("model", "gpt")
            main = (mcp_tool_name(conv.tool_names) or tool_search_name(conv.tool_names)
                    or (conv.code_mode and "pimcp" in strings_of(body)))
            action = self.script.decide(conv, deferred_text=strings_of(body)) if main else ("text", FINAL)
            spec = conv.tool_specs.get(action[1]) if action[0] == "tool" else None
            summary = {"kind": "main" if main else "side", "model": model, "action": list(action[:3]),
                       "tools": conv.tool_names}
            if conv.code_mode:
                summary["code_mode"] = True
            return 200, "text/event-stream", responses_sse(model, action, spec, conv.code_mode), summary
        if path.endswith("/models") and method == "GET":
            return 200, "application/json", json.dumps({"object": "list", "data": [], "models": []}), {"kind": "models"}
        # ---- Gemini
        m = re.search(r"/models/([^/:]+):(\w+)$", path)
        if m and method == "POST":
            verb = m.group(2)
            if verb == "countTokens":
                return 200, "application/json", json.dumps({"totalTokens": 100}), {"kind": "countTokens"}
            if verb in ("embedContent", "batchEmbedContents"):
                return 200, "application/json", json.dumps({"embedding": {"values": [0.0]}}), {"kind": verb}
            conv = gemini_parse(body)
            main = mcp_tool_name(conv.tool_names) or tool_search_name(conv.tool_names)
            gen = body.get("generationConfig") or {}
            schema = gen.get("responseJsonSchema") or gen.get("responseSchema")
            if main:
                action = self.script.decide(conv, deferred_text=strings_of(body))
                parts = gemini_parts(action)
            elif schema:
                action = ("text", json.dumps(schema_instance(schema)))
                parts = gemini_parts(action)
            else:
                action = ("text", FINAL)
                parts = gemini_parts(action)
            summary = {"kind": "main" if main else "side", "model": m.group(1), "verb": verb,
                       "action": list(action[:3]), "tools": conv.tool_names}
            chunk = gemini_chunk(parts)
            if verb == "streamGenerateContent":
                if query.get("alt") == ["sse"]:
                    return 200, "text/event-stream", f"data: {json.dumps(chunk)}\r\n\r\n", summary
                return 200, "application/json", json.dumps([chunk]), summary
            return 200, "application/json", json.dumps(chunk), summary
        return 404, "application/json", json.dumps({"error": {"code": 404, "message": f"not scripted: {path}"}}), {
            "kind": "unknown"}


def read_chunked(stream):
    data = b""
    while True:
        line = stream.readline().strip()
        size = int(line.split(b";")[0] or b"0", 16)
        if size == 0:
            stream.readline()
            return data
        data += stream.read(size)
        stream.readline()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", required=True, help="the host's label in `hello from HOST`")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--transcript", help="write the transcript (JSON) here after every request")
    args = parser.parse_args()
    model = Model(args.host, args.transcript, args.port)
    print(f"listening http://127.0.0.1:{model.start()}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    model.stop()
    model.save()
    verdict = model.script.verdict()
    print(json.dumps(verdict))
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
