//! OAuth through the `mcp` tool against `mcp-fixture --http --oauth`: a call gets `needs-auth`, `auth-start` gives
//! the URL, `auth-complete` with the redirect the browser was sent to logs in and lists the tools, and the call
//! then goes through. Tokens live in an in-memory store; no browser is opened.

use std::sync::Arc;
use std::time::Duration;

use pimcp_actors::{Runtime, RuntimeOptions};
use pimcp_proxy::Proxy;
use serde_json::json;

use crate::support::{assert_error, assert_ok, fixture, load, tuning, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_start_then_auth_complete_through_the_mcp_tool() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let mut child = tokio::process::Command::new(fixture())
        .args(["--http", "127.0.0.1:0", "--oauth", "--port-file"])
        .arg(&port_file)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_until("fixture port", Duration::from_secs(20), || {
        std::fs::read_to_string(&port_file).is_ok_and(|p| p.trim().parse::<u16>().is_ok())
    })
    .await;
    let port = std::fs::read_to_string(&port_file).unwrap().trim().to_owned();
    let config = load(
        &json!({"mcpServers": {"web": {"url": format!("http://127.0.0.1:{port}/mcp"), "protocol": "legacy"}}}),
        dir.path(),
    );
    let mut options = RuntimeOptions::new(config.clone(), dir.path().join("agent"), dir.path().join("data"));
    options.tuning = tuning();
    options.auth.store = Some(Arc::new(pimcp_actors::MemoryStore::new()));
    options.auth.open_browser = false;
    options.auth.callback_port = Some(pimcp_actors::CallbackPort::Preferred(0));
    let runtime = Runtime::start(options).await.unwrap();
    let proxy = Proxy::new(runtime.handle(), &config).unwrap();
    let mcp = |arguments: serde_json::Value| {
        let proxy = proxy.clone();
        async move {
            proxy
                .handle_arguments(Some(&arguments), &pimcp_proxy::CallContext::default())
                .await
        }
    };

    let refused = mcp(json!({"tool": "web_echo", "args": {"text": "x"}})).await;
    assert_error(&refused, "needs-auth");

    let started = mcp(json!({"action": "auth-start", "server": "web"})).await;
    assert_ok(&started);
    let text = started.text();
    let url = text
        .lines()
        .find(|l| l.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {text}"));
    assert!(text.contains("auth-complete"), "{text}");
    let location = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(url)
        .send()
        .await
        .unwrap()
        .headers()["location"]
        .to_str()
        .unwrap()
        .to_owned();

    let bad = mcp(json!({"action": "auth-complete", "server": "web", "args": {"redirectUrl": "http://127.0.0.1:1/cb?code=x&state=forged"}})).await;
    assert_error(&bad, "needs-auth");
    let done = mcp(json!({"action": "auth-complete", "server": "web", "args": {"redirectUrl": location}})).await;
    assert_ok(&done);
    assert!(done.text().starts_with("Logged in to \"web\"."), "{}", done.text());
    assert!(done.text().contains("web_echo"), "{}", done.text());
    let called = mcp(json!({"tool": "web_echo", "args": {"text": "after login"}})).await;
    assert_ok(&called);
    assert!(called.text().contains("after login"));

    let unknown = mcp(json!({"action": "auth-start", "server": "nope"})).await;
    assert_error(&unknown, "config");
    runtime.shutdown(Duration::from_secs(5)).await;
    let _ = child.kill().await;
}
