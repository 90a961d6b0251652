// The `mcpScript` prelude (crates/proxy/src/script/engine.rs): the script's only way out of the sandbox.
"use strict";
(() => {
  const g = globalThis;
  const host = {
    call: g.__host_call,
    search: g.__host_search,
    describe: g.__host_describe,
    log: g.__host_log,
    sleep: g.__host_sleep,
  };
  for (const name of ["__host_call", "__host_search", "__host_describe", "__host_log", "__host_sleep"]) {
    delete g[name];
  }

  class ToolError extends Error {
    constructor(message, category) {
      super(message);
      this.name = "ToolError";
      this.category = category;
    }
  }

  const answer = (text) => {
    const reply = JSON.parse(text);
    if (reply.error) throw new ToolError(reply.error.message, reply.error.category);
    return reply.ok;
  };
  const json = (value) => JSON.stringify(value === undefined ? {} : value);
  const show = (value) => {
    if (typeof value === "string") return value;
    try {
      const text = JSON.stringify(value);
      return text === undefined ? String(value) : text;
    } catch (e) {
      return String(value);
    }
  };
  const log = (...values) => host.log(values.map(show).join(" "));

  g.console = Object.freeze({ log, info: log, warn: log, error: log, debug: log });
  g.tools = Object.freeze({
    call: async (name, args) => answer(await host.call(String(name), json(args))),
    search: async (query, options) => answer(await host.search(String(query), json(options))),
    describe: async (name) => answer(await host.describe(String(name))),
  });
  g.sleep = (ms) => host.sleep(Number(ms) || 0);
  g.ToolError = ToolError;
})();
