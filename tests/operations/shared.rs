//! Two different real clients use one `pimcp-run serve --http` at the same time: the Python `mcp` client (auto mode:
//! a stateless 2026-07-28 session) and `mcp-inspector --cli` in load mode (a legacy session, concurrent calls).
//! The upstream `mcp-fixture` is spawned exactly once and sees every call.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

const PYTHON_CALLS: usize = 40;
const INSPECTOR_CALLS: usize = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_inspector_share_one_serve_instance_and_one_upstream_process() {
    let sandbox = Sandbox::from_config(&json!({ "mcpServers": { "fixture": {
        "command": fixture(),
        "args": ["--event-log", "{dir}/fixture.log"],
        "directTools": ["echo"],
    } } }));
    let log = sandbox.path("fixture.log");
    let serve = sandbox.serve_http(&[]);
    let url = serve.url();
    // The direct tool `fixture_echo` appears by itself: `serve` discovers the direct-tool server nothing is cached
    // of as it starts.
    let admin = client(&url, None).await;
    assert!(
        eventually(DEADLINE, async || {
            admin
                .peer()
                .list_all_tools()
                .await
                .is_ok_and(|t| t.iter().any(|t| t.name == "fixture_echo"))
        })
        .await,
        "the direct tool appears once the start-up discovery connected the server"
    );
    admin.cancel().await.unwrap();

    let mut py = tokio::process::Command::new(python());
    py.arg(Path::new(ROOT).join("tests/operations/http_client.py"))
        .arg(&url)
        .arg(PYTHON_CALLS.to_string())
        .arg("python")
        .env_clear()
        .env("HOME", sandbox.path("home"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut inspector = tokio::process::Command::new(node());
    inspector
        .arg(inspector_js())
        .arg("--cli")
        .arg(&url)
        .args([
            "--method",
            "tools/call",
            "--tool-name",
            "fixture_echo",
            "--tool-arg",
            "text=inspector",
        ])
        .args([
            "--load",
            "--load-requests",
            &INSPECTOR_CALLS.to_string(),
            "--load-concurrency",
            "4",
        ])
        .env_clear()
        .env("HOME", sandbox.path("home"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let (py_out, inspector_out) = tokio::join!(
        tokio::time::timeout(Duration::from_secs(120), py.output()),
        tokio::time::timeout(Duration::from_secs(120), inspector.output()),
    );
    let py_out = py_out.expect("python client finished").expect("python ran");
    let inspector_out = inspector_out.expect("inspector finished").expect("inspector ran");
    let py_stdout = String::from_utf8_lossy(&py_out.stdout);
    assert!(
        py_out.status.success(),
        "python client failed:\n{py_stdout}\n{}\n--- pimcp-run\n{}",
        String::from_utf8_lossy(&py_out.stderr),
        serve.log_text()
    );
    let steps: Vec<Value> = py_stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert_eq!(steps[0]["server"], "pimcp", "{py_stdout}");
    assert_eq!(
        steps[0]["protocol"], "2026-07-28",
        "auto mode takes the stateless path: {py_stdout}"
    );
    assert_eq!(
        steps[1]["tools"],
        json!(["fixture_echo", "mcp", "mcpScript"]),
        "{py_stdout}"
    );
    assert_eq!(steps[2]["count"], PYTHON_CALLS, "{py_stdout}");

    let inspector_stdout = String::from_utf8_lossy(&inspector_out.stdout);
    assert!(
        inspector_out.status.success(),
        "inspector failed:\n{inspector_stdout}\n{}\n--- pimcp-run\n{}",
        String::from_utf8_lossy(&inspector_out.stderr),
        serve.log_text()
    );
    let load: Value = serde_json::from_str(inspector_stdout.trim())
        .unwrap_or_else(|e| panic!("inspector --load output is not JSON ({e}): {inspector_stdout}"));
    assert_eq!(load["errors"], 0, "{load:#}");
    assert_eq!(load["ok"], INSPECTOR_CALLS, "{load:#}");

    assert_eq!(
        count_events(&log, "start", None),
        1,
        "the upstream was spawned once for both clients"
    );
    assert_eq!(
        count_events(&log, "call", Some("echo")),
        PYTHON_CALLS + INSPECTOR_CALLS,
        "every call of both clients reached the one upstream"
    );
}
