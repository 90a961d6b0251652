//! The Python `mcp` 2.x client (PyPI, default `auto` mode: `server/discover` first) drives `pimcp-run` over stdio
//! with `mcp-fixture` as the upstream: initialize, list tools, then `mcp` for connect, a search, a call and a call
//! with invalid arguments. The script is `tests/interop/client.py`.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{ROOT, Sandbox, pimcp_run, python, run_to_end};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_mcp_client_in_auto_mode_drives_pimcp_run() {
    let sandbox = Sandbox::new(json!({ "fixture": { "command": mcp_fixture::bin_path() } }));
    let mut cmd = tokio::process::Command::new(python());
    cmd.arg(Path::new(ROOT).join("tests/interop/client.py"))
        .arg(pimcp_run())
        .arg("--config")
        .arg(&sandbox.config)
        .env_clear()
        .current_dir(&sandbox.dir);
    for (key, value) in sandbox.env() {
        cmd.env(key, value);
    }
    let out = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_eq!(out.code, Some(0), "client.py failed:\n{out:#?}");
    assert!(!out.stderr.contains("panicked"), "pimcp-run panicked:\n{}", out.stderr);
    let steps: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{out:#?}")))
        .collect();
    let step = |name: &str| {
        steps
            .iter()
            .find(|s| s["step"] == name)
            .unwrap_or_else(|| panic!("no `{name}` step in:\n{out:#?}"))
            .clone()
    };

    let init = step("initialize");
    assert_eq!(init["server"], "pimcp");
    // Only `server/discover` (the auto probe) reaches 2026-07-28; a fallback to initialize would give 2025-11-25.
    assert_eq!(init["protocol"], "2026-07-28", "{out:#?}");
    assert_eq!(step("tools/list")["tools"], json!(["mcp", "mcpScript"]));

    let connect = step("connect");
    assert_eq!(connect["is_error"], false, "{connect}");
    assert!(connect["text"].as_str().unwrap().contains("fixture_echo"), "{connect}");
    let search = step("search");
    assert_eq!(search["is_error"], false, "{search}");
    assert!(search["text"].as_str().unwrap().contains("fixture_echo"), "{search}");
    let call = step("call");
    assert_eq!(
        call,
        json!({"step": "call", "text": "hello from python", "is_error": false})
    );
    let invalid = step("call-invalid");
    assert_eq!(invalid["is_error"], true, "{invalid}");
    assert!(
        invalid["text"].as_str().unwrap().ends_with("category: validation"),
        "{invalid}"
    );
}

/// 70 stdio servers written with the Python `mcp` SDK (`tests/interop/server.py`), `protocol: auto`, connected at
/// once on this small machine: Python's start-up alone keeps both cores busy, so many answer the `server/discover`
/// probe after rmcp's 10 s probe deadline, when the `initialize` fallback has gone out. Every one connects and
/// answers a call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_python_sdk_servers_connected_at_once_all_connect() {
    const SERVERS: usize = 70;
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(ROOT).join("tests/interop/server.py");
    let mut servers = serde_json::Map::new();
    for i in 0..SERVERS {
        servers.insert(
            format!("py{i}"),
            json!({ "command": python(), "args": [script], "protocol": "auto", "startupTimeout": 300 }),
        );
    }
    let config = pimcp_config::load_in_memory(
        &json!({ "mcpServers": servers }),
        &pimcp_config::LoadOptions::new(dir.path().join("home"), dir.path()),
    );
    let options = pimcp_actors::RuntimeOptions::new(config, dir.path().join("agent"), dir.path().join("data"));
    let runtime = pimcp_actors::Runtime::start(options).await.unwrap();
    let mut connects = tokio::task::JoinSet::new();
    for i in 0..SERVERS {
        let handle = runtime.handle();
        connects.spawn(async move {
            let name = format!("py{i}");
            let connected = handle.connect(&name).await;
            let pid = handle.status().server(&name).and_then(|s| s.pid);
            (name, connected, pid)
        });
    }
    let mut failures = Vec::new();
    let mut pids = std::collections::BTreeSet::new();
    while let Some(joined) = connects.join_next().await {
        let (name, connected, pid) = joined.unwrap();
        match connected {
            Ok(()) => {
                pids.insert(pid);
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {SERVERS} failed: {failures:#?}",
        failures.len()
    );
    assert_eq!(pids.len(), SERVERS, "every server has a process of its own");
    let out = runtime
        .handle()
        .call(
            "py69_echo",
            json!({ "text": "still here" }).as_object().cloned(),
            pimcp_actors::CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.text(), "still here");
    runtime.shutdown(Duration::from_secs(20)).await;
}
