//! `mcp-inspector --cli` (npm `@modelcontextprotocol/inspector`) drives `pimcp-run` over stdio with `mcp-fixture` as
//! the upstream. Each inspector run starts a new `pimcp-run`: the search in the third run finds the fixture's tools
//! from the metadata cache the `connect` run wrote, without connecting anything.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Sandbox, inspector_js, node, pimcp_run, run_to_end};

/// Runs the inspector CLI against `pimcp-run --config <sandbox config>` and returns its JSON output.
async fn inspect(sandbox: &Sandbox, method_args: &[&str]) -> Value {
    let mut cmd = tokio::process::Command::new(node());
    cmd.arg(inspector_js()).arg("--cli");
    // The inspector gives stdio servers only a minimal environment: pass pimcp's sandbox variables explicitly.
    for (key, value) in sandbox.env() {
        if key != "PATH" && key != "HOME" {
            cmd.arg("-e").arg(format!("{key}={}", value.display()));
        }
    }
    cmd.args(method_args)
        .arg("--")
        .arg(pimcp_run())
        .arg("--config")
        .arg(&sandbox.config)
        .env_clear()
        .current_dir(&sandbox.dir);
    for (key, value) in sandbox.env() {
        cmd.env(key, value);
    }
    let out = run_to_end(cmd, Duration::from_secs(120)).await;
    assert_eq!(out.code, Some(0), "mcp-inspector {method_args:?} failed:\n{out:#?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("inspector output is not JSON ({e}):\n{out:#?}"))
}

fn text(result: &Value) -> String {
    assert_eq!(result["isError"], false, "{result:#}");
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_drives_pimcp_run() {
    let sandbox = Sandbox::new(json!({ "fixture": { "command": mcp_fixture::bin_path() } }));

    let listed = inspect(&sandbox, &["--method", "tools/list"]).await;
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["mcp", "mcpScript"], "{listed:#}");
    let description = listed["tools"][0]["description"].as_str().unwrap();
    assert!(!description.is_empty());

    let connected = inspect(
        &sandbox,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "mcp",
            "--tool-arg",
            "connect=fixture",
        ],
    )
    .await;
    let listing = text(&connected);
    assert!(
        listing.starts_with("fixture: ") && listing.contains("fixture_echo"),
        "{connected:#}"
    );

    let found = inspect(
        &sandbox,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "mcp",
            "--tool-arg",
            "search=echo",
        ],
    )
    .await;
    assert!(text(&found).contains("fixture_echo"), "{found:#}");

    let called = inspect(
        &sandbox,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "mcp",
            "--tool-arg",
            "tool=fixture_echo",
            r#"args={"text": "hello from the inspector"}"#,
        ],
    )
    .await;
    assert_eq!(text(&called), "hello from the inspector");
}
