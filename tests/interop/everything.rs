//! `pimcp-run` fronting the reference server `@modelcontextprotocol/server-everything`, over stdio (pimcp-run spawns
//! it) and over Streamable HTTP (the test runs it on a loopback port): connect, list, search, describe and call
//! `echo` and `get-sum` through the `mcp` tool. The server announces its capability-dependent tools with five
//! `tools/list_changed` notifications right after initialize and asks for `roots/list`: the catalog must end up
//! complete, the roots request must reach our host, and the server must stay healthy.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::support::{
    Daemon, HOST_ROOT_URI, Mcp, Sandbox, eventually, everything_js, fixture, free_port, node, wait_for_port,
};

/// Tools server-everything always has, plus those it registers after initialize for a client with roots (pimcp
/// advertises roots, sampling and elicitation upstream because its host bridge can forward them).
const EXPECTED_TOOLS: [&str; 14] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "simulate-research-query",
    "get-roots-list",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_through_the_mcp_tool() {
    let sandbox = Sandbox::new(json!({
        "everything": {
            "command": node(),
            "args": [everything_js(), "stdio"],
        }
    }));
    let mcp = sandbox.serve().await;
    exercise(&mcp, &sandbox, None).await;
    mcp.close().await;
}

/// A fresh install with three servers nothing is known of: the host's first search finds a tool of each, and the
/// next call reaches it (search, then call: two calls per tool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_search_on_a_cold_cache_finds_the_tools_of_every_server() {
    let sandbox = Sandbox::new(json!({
        "alpha": { "command": fixture(), "args": ["--name", "alpha"] },
        "beta": { "command": fixture(), "args": ["--name", "beta", "--tools", "20"] },
        "everything": { "command": node(), "args": [everything_js(), "stdio"] },
    }));
    let mcp = sandbox.serve().await;
    let text = mcp.ok(json!({ "search": "echo" })).await;
    for tool in ["alpha_echo", "beta_echo", "everything_echo"] {
        assert!(text.contains(tool), "{tool} missing from the first search:\n{text}");
    }
    assert_eq!(
        mcp.ok(json!({ "tool": "everything_echo", "args": { "message": "cold" } }))
            .await,
        "Echo: cold"
    );
    assert_eq!(
        mcp.ok(json!({ "tool": "beta_echo", "args": { "text": "cold" } })).await,
        "cold"
    );
    mcp.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_streamable_http_through_the_mcp_tool() {
    let port = free_port();
    let work = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(node());
    cmd.arg(everything_js())
        .arg("streamableHttp")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", work.path())
        .env("PORT", port.to_string())
        .current_dir(work.path());
    let server = Daemon::spawn(cmd, work.path().join("everything.log"));
    assert!(
        wait_for_port(port, Duration::from_secs(30)),
        "server-everything did not listen on port {port} within 30 s:\n{}",
        server.log_text()
    );
    let sandbox = Sandbox::new(json!({
        "everything": { "url": format!("http://127.0.0.1:{port}/mcp") }
    }));
    let mcp = sandbox.serve().await;
    exercise(&mcp, &sandbox, Some(&server)).await;
    mcp.close().await;
}

async fn exercise(mcp: &Mcp, sandbox: &Sandbox, server: Option<&Daemon>) {
    let context = || {
        format!(
            "\n--- pimcp-run stderr\n{}\n--- server log\n{}",
            sandbox.log_text(),
            server.map(Daemon::log_text).unwrap_or_default()
        )
    };
    let tools = mcp.client.list_all_tools().await.expect("tools/list");
    assert!(
        tools.iter().any(|t| t.name == "mcp"),
        "pimcp-run lists the mcp tool: {tools:?}"
    );

    let connected = mcp.mcp(json!({ "connect": "everything" })).await;
    assert!(!connected.is_error, "connect failed: {}{}", connected.text, context());
    assert!(connected.text.contains("everything_echo"), "{}", connected.text);

    // The late tools arrive through list_changed: the listing must converge to the full set.
    let mut listing = String::new();
    let complete = eventually(Duration::from_secs(15), async || {
        listing = mcp.mcp(json!({ "server": "everything" })).await.text;
        EXPECTED_TOOLS
            .iter()
            .all(|t| listing.contains(&format!("everything_{t}")))
    })
    .await;
    assert!(
        complete,
        "the catalog never listed every expected tool:\n{listing}{}",
        context()
    );

    let found = mcp.ok(json!({ "search": "sum" })).await;
    assert!(found.contains("everything_get-sum"), "search sum: {found}");
    let echo_hit = mcp.ok(json!({ "search": "echo", "server": "everything" })).await;
    assert!(echo_hit.contains("everything_echo"), "search echo: {echo_hit}");

    let described = mcp.ok(json!({ "describe": "everything_get-sum" })).await;
    assert!(
        described.contains("\"a\"") && described.contains("\"b\"") && described.contains("number"),
        "describe get-sum: {described}"
    );
    let typo = mcp.mcp(json!({ "describe": "everything_ecoh" })).await;
    assert!(
        typo.is_error && typo.text.contains("everything_echo"),
        "typo suggestion: {typo:?}"
    );

    let echoed = mcp
        .ok(json!({ "tool": "everything_echo", "args": { "message": "hello from pimcp" } }))
        .await;
    assert_eq!(echoed.trim(), "Echo: hello from pimcp");
    let sum = mcp
        .ok(json!({ "tool": "everything_get-sum", "args": { "a": 2, "b": 3 } }))
        .await;
    assert!(sum.contains("The sum of 2 and 3 is 5."), "get-sum: {sum}");
    let invalid = mcp
        .mcp(json!({ "tool": "everything_get-sum", "args": { "a": "two" } }))
        .await;
    assert!(
        invalid.is_error && invalid.text.contains("validation"),
        "bad args: {invalid:?}"
    );

    // The server's roots/list went through pimcp-run to this host and came back.
    let roots = mcp.ok(json!({ "tool": "everything_get-roots-list" })).await;
    assert!(roots.contains(HOST_ROOT_URI), "get-roots-list: {roots}{}", context());

    let status = mcp.ok(json!({})).await;
    let line = status
        .lines()
        .find(|l| l.contains("everything:"))
        .unwrap_or_else(|| panic!("no status line for everything: {status}"));
    assert!(
        line.starts_with('✓'),
        "everything is not ready after all that: {status}{}",
        context()
    );
    assert!(
        !sandbox.log_text().contains("ERROR"),
        "pimcp-run logged an error:{}",
        context()
    );
}
