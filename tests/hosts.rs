//! Real agent hosts drive `pimcp-run` as their one MCP server: Claude Code, Codex CLI and Gemini CLI (pinned, installed
//! by `.ci/setup-hosts` into `.ci/hosts`; a missing host fails with that command), each run non-interactively by
//! `tests/hosts/run.py` in a throwaway HOME against a scripted model on loopback (`tests/hosts/model_api.py`, which
//! speaks the host's model API). On a cold pimcp cache the model finds pimcp's `mcp` tool as the host presents it,
//! searches `echo`, calls `fixture_echo`, then a typo, then (where the host offers it up front) one `mcpScript` that
//! makes two calls, and checks each tool result the host sent back; the host's own `mcp list` must show pimcp. The upstreams are `mcp-fixture` and server-everything (`.ci/setup-peers`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::{ROOT, everything_js, fixture, node, pimcp_run, run_to_end};

/// The host's entry point installed by `.ci/setup-hosts`; panics (the test fails) when it is missing.
fn host_bin(name: &str) -> PathBuf {
    let path = Path::new(ROOT).join(".ci/hosts/node_modules/.bin").join(name);
    assert!(
        path.exists(),
        "host missing: {} — run `bash .ci/setup-hosts` (it installs the pinned Claude Code, Codex CLI and Gemini CLI \
         into .ci/hosts)",
        path.display()
    );
    path
}

/// Runs `tests/hosts/run.py HOST EXTRA…` with the cargo-built binaries and returns its JSON summary, which must say
/// `"ok": true`.
async fn drive(host: &str, bin: &str, extra: &[&str]) -> Value {
    host_bin(bin);
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(Path::new(ROOT).join("tests/hosts/run.py"))
        .arg(host)
        .arg("--pimcp-run")
        .arg(pimcp_run())
        .arg("--mcp-fixture")
        .arg(fixture())
        .arg("--node")
        .arg(node())
        .arg("--everything")
        .arg(everything_js())
        .args(["--timeout", "180"])
        .args(extra)
        .current_dir(ROOT);
    let out = run_to_end(cmd, Duration::from_secs(480)).await;
    let summary: Value = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("run.py {host} printed no JSON summary:\n{out:#?}"));
    eprintln!("{host} {}: {summary}", extra.join(" "));
    assert_eq!(
        out.code,
        Some(0),
        "{host} {extra:?} failed: {}\n{summary:#}\n--- stderr\n{}",
        summary["error"],
        out.stderr
    );
    assert_eq!(summary["ok"], true, "{summary:#}");
    summary
}

fn step<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["steps"]
        .as_array()
        .and_then(|steps| steps.iter().find(|s| s["step"] == name))
        .unwrap_or_else(|| panic!("no `{name}` step in:\n{summary:#}"))
}

/// The steps every host must have relayed: the cold search finds `fixture_echo`, the call echoes, the typo's
/// result suggests `fixture_echo`, and the host ends with the model's `done`.
fn assert_relayed(summary: &Value, host: &str) {
    for name in ["search", "call", "typo", "final"] {
        assert_eq!(step(summary, name)["ok"], true, "step `{name}`:\n{summary:#}");
    }
    let result = |name: &str| step(summary, name)["result"].as_str().unwrap_or_default().to_owned();
    assert!(result("search").contains("fixture_echo"), "{summary:#}");
    assert!(result("call").contains(&format!("hello from {host}")), "{summary:#}");
    let typo = result("typo");
    assert!(
        typo.contains("fixture_ecoh") && typo.contains("fixture_echo"),
        "{summary:#}"
    );
    assert_eq!(summary["final_text"], "done", "{summary:#}");
    assert_eq!(
        summary["upstreams"],
        serde_json::json!(["everything", "fixture"]),
        "{summary:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_defers_pimcp_behind_tool_search_and_relays_search_call_and_typo() {
    let summary = drive("claude-code", "claude", &[]).await;
    assert_relayed(&summary, "claude-code");
    // The mcp tool is only named in the system prompt until ToolSearch loads it (a `tool_reference` result); it is
    // then sent with `defer_loading: true`.
    assert_eq!(summary["tool_search"], "ToolSearch", "{summary:#}");
    assert_eq!(summary["deferred"], true, "{summary:#}");
    assert_eq!(summary["tool_name"], "mcp__pimcp__mcp", "{summary:#}");
    assert!(
        step(&summary, "tool_search")["result"]
            .as_str()
            .is_some_and(|r| r.contains("tool_reference"))
    );
    // Claude Code marks the typo's result as an error for the model.
    assert_eq!(step(&summary, "typo")["is_error"], true, "{summary:#}");
    let list = summary["mcp_list"].as_str().unwrap_or_default();
    assert!(list.contains("pimcp:") && list.contains("Connected"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_in_code_mode_behind_tool_search_and_with_plain_functions_relays_search_call_and_typo() {
    // No model set: Codex's catalog default, which (like every catalog model but gpt-5.5) runs in code mode. Its one
    // `exec` tool runs JavaScript; MCP tools are deferred to `ALL_TOOLS` and called as `tools.mcp__pimcp__mcp(…)`.
    let summary = drive("codex", "codex", &[]).await;
    assert_relayed(&summary, "codex");
    assert_eq!(summary["code_mode"], true, "{summary:#}");
    assert_eq!(summary["tool_search"], "exec", "{summary:#}");
    assert_eq!(summary["tool_name"], "mcp__pimcp__mcp", "{summary:#}");
    assert_eq!(step(&summary, "typo")["is_error"], true, "{summary:#}");

    // gpt-5.5: MCP tools deferred behind the client-executed `tool_search`, which returns the `mcp__pimcp` namespace.
    let summary = drive("codex", "codex", &["--codex-model", "gpt-5.5"]).await;
    assert_relayed(&summary, "codex");
    assert_eq!(summary["code_mode"], false, "{summary:#}");
    assert_eq!(summary["tool_search"], "tool_search", "{summary:#}");
    assert_eq!(summary["tool_name"], "mcp__pimcp.mcp", "{summary:#}");

    // A model Codex's catalog does not know: fallback metadata, the `mcp__pimcp` namespace sent up front.
    let summary = drive("codex", "codex", &["--codex-model", "pimcp-scripted"]).await;
    assert_relayed(&summary, "codex");
    assert_eq!(summary["deferred"], false, "{summary:#}");
    assert_eq!(summary["tool_name"], "mcp__pimcp.mcp", "{summary:#}");
    // `codex mcp list` shows the configuration only (it connects nothing).
    let list = summary["mcp_list"].as_str().unwrap_or_default();
    assert!(
        list.lines().any(|l| l.starts_with("pimcp ") && l.contains("enabled")),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_lists_pimcp_mcp_up_front_and_relays_search_call_and_typo() {
    let summary = drive("gemini-cli", "gemini", &[]).await;
    assert_relayed(&summary, "gemini-cli");
    assert_eq!(summary["deferred"], false, "{summary:#}");
    assert_eq!(summary["tool_name"], "mcp_pimcp_mcp", "{summary:#}");
    assert_eq!(step(&summary, "typo")["is_error"], true, "{summary:#}");
    // `mcpScript` is offered next to `mcp`: one call runs two upstream calls and returns their combined result.
    let script = step(&summary, "script");
    assert_eq!(script["tool"], "mcp_pimcp_mcpScript", "{summary:#}");
    assert!(
        script["result"].as_str().is_some_and(|r| r.contains("scripted 42")),
        "{summary:#}"
    );
    let list = summary["mcp_list"].as_str().unwrap_or_default();
    assert!(list.contains("pimcp:") && list.contains("Connected"), "{list}");
}
