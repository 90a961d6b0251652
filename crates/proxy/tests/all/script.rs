//! `mcpScript`: the `tools` bridge against a real fixture server, errors as `ToolError`s, every limit, the sandbox's
//! boundary, approvals from a script, and the tool on the `pimcp-run` surface.

use std::time::Duration;

use pimcp_config::ScriptLimits;
use pimcp_proxy::{CallContext, ScriptError, ScriptOutcome};
use serde_json::{Value, json};

use crate::support::*;

fn one_fixture() -> Value {
    json!({ "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) } })
}

async fn run(env: &Env, code: &str) -> ScriptOutcome {
    env.proxy.script(code, &CallContext::default()).await
}

async fn run_with(env: &Env, code: &str, limits: ScriptLimits) -> ScriptOutcome {
    env.proxy
        .script_with_limits(code, limits, &CallContext::default())
        .await
}

fn short(timeout_ms: u64) -> ScriptLimits {
    ScriptLimits::DEFAULT.with_timeout(Duration::from_millis(timeout_ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_chains_calls_searches_and_describes_and_returns_only_its_value() {
    let env = start(one_fixture()).await;
    let outcome = run(
        &env,
        r#"
        const sum = await tools.call("fx_add", {a: 2, b: 3});
        const hits = await tools.search("echo text", {limit: 3});
        const described = await tools.describe("fx_echo");
        const echoed = await Promise.all(["p", "q", "r"].map(text => tools.call("fx_echo", {text})));
        console.log("sum is", sum, 42);
        return {sum: sum.sum, first: hits[0].tool, params: described.params, echoed: echoed.join("")};
        "#,
    )
    .await;
    let value = outcome.value.clone().unwrap();
    assert_eq!(value["sum"], 5, "structuredContent when present: {value}");
    assert_eq!(value["first"], "fx_echo");
    assert!(value["params"].as_str().unwrap().contains("text"), "{value}");
    assert_eq!(value["echoed"], "pqr", "text when no structuredContent");
    assert_eq!(outcome.logs, ["sum is {\"sum\":5} 42"]);
    let tools: Vec<&str> = outcome.calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools.len(), 4, "search and describe are not calls: {tools:?}");
    assert!(outcome.calls.iter().all(|c| c.category.is_none()));
    assert_eq!(count_events(&env.path("fx.log"), "call", Some("echo")), 3);
    // The model reads the value and the console, nothing of the intermediate results.
    let text = env.proxy.script_response(&outcome).text();
    assert!(text.starts_with("{\"sum\":5,\"first\":\"fx_echo\""), "{text}");
    assert!(text.ends_with("--- console ---\nsum is {\"sum\":5} 42"), "{text}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_requests_throw_tool_errors_with_their_category() {
    let env = start(one_fixture()).await;
    let outcome = run(
        &env,
        r#"
        const seen = [];
        for (const [tool, args] of [["fx_nope", {}], ["fx_add", {a: "x", b: 1}], ["fx_fail", {}]]) {
            try { await tools.call(tool, args); } catch (e) { seen.push([e.name, e.category, e instanceof ToolError]); }
        }
        try { await tools.describe("fx_nothing_like_it"); } catch (e) { seen.push([e.name, e.category, true]); }
        return seen;
        "#,
    )
    .await;
    assert_eq!(
        outcome.value.unwrap(),
        json!([
            ["ToolError", "unknown-tool", true],
            ["ToolError", "validation", true],
            ["ToolError", "tool-error", true],
            ["ToolError", "unknown-tool", true]
        ])
    );
    // Uncaught, it ends the script as an error result naming it.
    let outcome = run(&env, r#"await tools.call("fx_add", {a: "x", b: 1}); return 1;"#).await;
    match &outcome.value {
        Err(ScriptError::Thrown { name, category, .. }) => {
            assert_eq!((name.as_str(), category.as_deref()), ("ToolError", Some("validation")));
        }
        other => panic!("{other:?}"),
    }
    let response = env.proxy.script_response(&outcome);
    assert_error(&response, "script");
    assert!(
        response.text().starts_with("Uncaught ToolError (validation): "),
        "{}",
        response.text()
    );
    // A syntax error names its line.
    let outcome = run(&env, "const x = 1;\nreturn x +;").await;
    match &outcome.value {
        Err(ScriptError::Thrown { name, message, .. }) => assert_eq!(name, "SyntaxError", "{message}"),
        other => panic!("{other:?}"),
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_limit_ends_the_script_with_its_own_error_and_nothing_else() {
    let env = start(one_fixture()).await;
    // Wall time: a busy loop, a pending promise, an endless chain of promises, a pending tool call.
    for code in [
        "while (true) {}",
        "await new Promise(() => {});",
        "const spin = () => Promise.resolve().then(spin); spin(); await new Promise(() => {});",
        r#"await tools.call("fx_slow", {ms: 60000});"#,
    ] {
        let outcome = run_with(&env, code, short(300)).await;
        assert_eq!(
            outcome.value,
            Err(ScriptError::Timeout(Duration::from_millis(300))),
            "{code}"
        );
    }
    // Memory.
    let limits = ScriptLimits::DEFAULT.with_memory_bytes(16 << 20);
    let outcome = run_with(
        &env,
        "const a = []; while (true) a.push(new Array(100000).fill(7));",
        limits,
    )
    .await;
    assert_eq!(outcome.value, Err(ScriptError::Memory(16 << 20)));
    let outcome = run_with(&env, "return 'x'.repeat(1 << 28).length;", limits).await;
    assert_eq!(outcome.value, Err(ScriptError::Memory(16 << 20)));
    // Stack.
    let outcome = run(&env, "const f = n => f(n + 1) + 1; return f(0);").await;
    assert_eq!(outcome.value, Err(ScriptError::Stack));
    // Calls per script.
    let limits = ScriptLimits::DEFAULT.with_max_calls(3);
    let outcome = run_with(
        &env,
        r#"
        const got = [];
        for (let i = 0; i < 5; i++) {
            try { got.push(await tools.call("fx_echo", {text: String(i)})); } catch (e) { got.push(e.category); }
        }
        return got;
        "#,
        limits,
    )
    .await;
    assert_eq!(outcome.value.unwrap(), json!(["0", "1", "2", "script", "script"]));
    // The result passes the output guard.
    let outcome = run(&env, "return 'line\\n'.repeat(100000);").await;
    let text = env.proxy.script_response(&outcome).text();
    assert!(text.len() < 60_000 && text.contains("[… omitted "), "{}", &text[..200]);
    // Nothing of it touched the process or the server: a call goes through as before.
    let r = env
        .mcp(json!({ "tool": "fx_echo", "args": { "text": "still here" } }))
        .await;
    assert_eq!(r.text(), "still here");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_reaches_nothing_but_tools() {
    let env = start(one_fixture()).await;
    let outcome = run(
        &env,
        r#"
        const names = ["require", "process", "fetch", "XMLHttpRequest", "setTimeout", "setInterval", "std", "os",
            "Deno", "Bun", "WebAssembly", "__host_call", "__host_search", "__host_describe", "__host_log", "__host_sleep"];
        const present = names.filter(n => typeof globalThis[n] !== "undefined");
        let imported;
        try { await import("fs"); imported = "loaded"; } catch (e) { imported = e.name; }
        const viaFunction = typeof (new Function("return this"))().__host_call;
        try { tools.call = null; } catch (e) {}
        const frozen = typeof tools.call;
        return {present, imported, viaFunction, frozen};
        "#,
    )
    .await;
    assert_eq!(
        outcome.value.unwrap(),
        json!({"present": [], "imported": "ReferenceError", "viaFunction": "undefined", "frozen": "function"})
    );
    // `sleep` exists and is bounded by the wall time.
    let outcome = run_with(&env, "await sleep(600000); return 1;", short(300)).await;
    assert_eq!(outcome.value, Err(ScriptError::Timeout(Duration::from_millis(300))));
    let outcome = run(&env, "await sleep(1); return 'slept';").await;
    assert_eq!(outcome.value.unwrap(), json!("slept"));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_gate_calls_made_from_a_script() {
    // No host to ask: the call fails closed, inside the script, and never reaches the server.
    let env = start(json!({
        "settings": { "approveTools": ["echo"] },
        "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) },
    }))
    .await;
    let outcome = run(
        &env,
        r#"try { await tools.call("fx_echo", {text: "x"}); } catch (e) { return e.category; }"#,
    )
    .await;
    assert_eq!(outcome.value.unwrap(), json!("approval"));
    assert_eq!(count_events(&env.path("fx.log"), "call", Some("echo")), 0);

    // A host session that can be asked: the approval reaches it, and the script's call runs.
    let session = connect(env.server(), TestHost::capable()).await;
    *session.probe.approval.lock().unwrap() = Some("allow_once".into());
    let r = session
        .call(
            "mcpScript",
            json!({ "code": "return await tools.call('fx_echo', {text: 'approved'});" }),
        )
        .await;
    assert_eq!(text_of(&r), "approved");
    let asked = session.probe.elicitations.lock().unwrap().clone();
    assert!(
        asked[0].starts_with("MCP server `fx` wants to run tool `echo`."),
        "{asked:?}"
    );
    assert_eq!(count_events(&env.path("fx.log"), "call", Some("echo")), 1);
    session.client.cancel().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_sits_next_to_mcp_unless_script_mode_is_off() {
    let env = start(one_fixture()).await;
    let session = connect(env.server(), TestHost::plain()).await;
    assert_eq!(session.tool_names().await, ["mcp", "mcpScript"]);
    // Both definitions together stay small with one server.
    let tools = env.server().tools();
    let chars: usize = tools
        .iter()
        .map(|t| serde_json::to_string(t).unwrap().chars().count())
        .sum();
    assert!(chars <= 1700, "mcp + mcpScript = {chars} characters");
    let r = session
        .call(
            "mcpScript",
            json!({ "code": "return (await tools.call('fx_add', {a: 1, b: 1})).sum;" }),
        )
        .await;
    assert_eq!(text_of(&r), "2");
    let r = session.call("mcpScript", json!({})).await;
    assert_eq!(category_of(&r).as_deref(), Some("validation"), "{}", text_of(&r));
    session.client.cancel().await.unwrap();
    env.shutdown().await;

    let off = json!({ "settings": { "scriptMode": false }, "mcpServers": { "fx": stdio(&[]) } });
    let env = start(off).await;
    assert_eq!(names(&env), ["mcp"]);
    env.shutdown().await;
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let env = start_env(
        dir,
        json!({ "mcpServers": { "fx": stdio(&[]) } }),
        &[("MCP_SCRIPT_MODE", "0")],
    )
    .await;
    assert_eq!(names(&env), ["mcp"]);
    env.shutdown().await;
    let limited = json!({ "settings": { "scriptMode": { "timeoutMs": 5000, "maxCalls": 7 } }, "mcpServers": { "fx": stdio(&[]) } });
    let env = start(limited).await;
    let description = env.server().tools()[1].description.clone().unwrap_or_default();
    assert!(
        description.contains("7 per script") && description.contains("5 s"),
        "{description}"
    );
    env.shutdown().await;
}

fn names(env: &Env) -> Vec<String> {
    env.server().tools().iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_trace_records_a_scripts_calls_but_not_its_code_arguments_or_results() {
    let env = start(json!({
        "settings": { "trace": { "enabled": true, "file": "{dir}/trace.jsonl" } },
        "mcpServers": { "fx": stdio(&[]) },
    }))
    .await;
    let outcome = run(
        &env,
        r#"
        const secretCode = "c0de-s3cret";
        const echoed = await tools.call("fx_echo", {text: "arg-s3cret"});
        try { await tools.call("fx_fail", {}); } catch (e) {}
        return echoed;
        "#,
    )
    .await;
    assert_eq!(outcome.value.unwrap(), json!("arg-s3cret"));
    let path = env.path("trace.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let script: Vec<pimcp_actors::ScriptTraceLine> = text
        .lines()
        .filter(|l| l.contains("\"kind\":\"script\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(script.len(), 1, "{text}");
    assert_eq!(script[0].outcome, "ok");
    let calls: Vec<(&str, Option<&str>)> = script[0]
        .calls
        .iter()
        .map(|c| (c.tool.as_str(), c.error.as_deref()))
        .collect();
    assert_eq!(calls, [("fx_echo", None), ("fx_fail", Some("tool-error"))]);
    // The upstream calls are traced as usual, and no line holds the code, the arguments or the results.
    assert!(
        text.lines().filter(|l| l.contains("\"method\":\"tools/call\"")).count() >= 4,
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
    env.shutdown().await;
}
