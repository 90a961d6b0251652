//! The HTTP guards of `pimcp-run serve` as operators meet them: an address other than loopback is refused without
//! a token; with a token every request must carry it (and `--attach` sends it); a foreign `Host` is rejected
//! (DNS rebinding), on both `/mcp` and `/status`.

use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::support::*;

const TOKEN: &str = "ops-test-token-0123456789abcdef";

fn one_fixture() -> serde_json::Value {
    json!({ "mcpServers": { "fx": { "command": fixture(), "args": ["--event-log", "{dir}/fx.log"] } } })
}

#[test]
fn off_loopback_without_a_token_is_refused_before_binding() {
    let sandbox = Sandbox::from_config(&one_fixture());
    let out = sandbox
        .std_command(&["serve", "--http", "0.0.0.0:0"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("without a token") && stderr.contains("--auth-token"),
        "{stderr}"
    );
    assert!(!stderr.contains("serving MCP on"), "nothing was bound: {stderr}");
    // A short token is refused too, and never echoed.
    let out = sandbox
        .std_command(&["serve", "--http", "0.0.0.0:0", "--auth-token", "hunter2"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("too short") && !stderr.contains("hunter2"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_every_request_must_carry_it_and_attach_sends_it() {
    let sandbox = Sandbox::from_config(&one_fixture());
    let token_file = sandbox.path("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let serve = sandbox.serve_http(&["--auth-token-file", token_file.to_str().unwrap()]);
    assert!(!serve.log_text().contains(TOKEN), "the token is never logged");

    let (code, _) = http(serve.addr, "POST", "/mcp", &MCP_HEADERS, INITIALIZE);
    assert_eq!(code, 401, "no token");
    let wrong = [
        MCP_HEADERS[0],
        MCP_HEADERS[1],
        ("Authorization", "Bearer ops-test-token-0123456789abcdeX"),
    ];
    assert_eq!(
        http(serve.addr, "POST", "/mcp", &wrong, INITIALIZE).0,
        401,
        "wrong token"
    );
    assert_eq!(
        http(serve.addr, "GET", "/status", &[], "").0,
        401,
        "status needs it too"
    );
    let bearer = format!("Bearer {TOKEN}");
    let right = [MCP_HEADERS[0], MCP_HEADERS[1], ("Authorization", bearer.as_str())];
    assert_eq!(http(serve.addr, "POST", "/mcp", &right, INITIALIZE).0, 200);

    let host = client(&serve.url(), Some(TOKEN)).await;
    let r = call(
        host.peer(),
        "mcp",
        json!({ "tool": "fx_echo", "args": { "text": "over http" } }),
    )
    .await;
    assert_eq!(text_of(&r), "over http");

    // A stdio host attached to the same instance shares its server.
    let mut attach = sandbox.command(&[
        "--attach",
        &serve.url(),
        "--attach-token-file",
        token_file.to_str().unwrap(),
    ]);
    attach.kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(attach)
        .stderr(std::fs::File::create(sandbox.path("attach.log")).unwrap())
        .spawn()
        .unwrap();
    let attached = ().serve(transport).await.unwrap_or_else(|e| {
        panic!(
            "attach: {e}\n{}",
            std::fs::read_to_string(sandbox.path("attach.log")).unwrap_or_default()
        )
    });
    let r = call(
        attached.peer(),
        "mcp",
        json!({ "tool": "fx_echo", "args": { "text": "via attach" } }),
    )
    .await;
    assert_eq!(text_of(&r), "via attach");
    assert_eq!(
        count_events(&sandbox.path("fx.log"), "start", None),
        1,
        "one upstream process for both hosts"
    );
    let _ = tokio::time::timeout(Duration::from_secs(10), attached.cancel()).await;
    host.cancel().await.unwrap();
}

#[test]
fn a_foreign_host_header_is_rejected() {
    let sandbox = Sandbox::from_config(&one_fixture());
    let serve = sandbox.serve_http(&[]);
    let evil = [MCP_HEADERS[0], MCP_HEADERS[1], ("Host", "evil.example")];
    assert_eq!(http(serve.addr, "POST", "/mcp", &evil, INITIALIZE).0, 403);
    assert_eq!(
        http(serve.addr, "GET", "/status", &[("Host", "evil.example")], "").0,
        403
    );
    let evil_origin = [MCP_HEADERS[0], MCP_HEADERS[1], ("Origin", "http://evil.example")];
    assert_eq!(http(serve.addr, "POST", "/mcp", &evil_origin, INITIALIZE).0, 403);
    assert_eq!(
        http(serve.addr, "POST", "/mcp", &MCP_HEADERS, INITIALIZE).0,
        200,
        "loopback Host is accepted"
    );
}
