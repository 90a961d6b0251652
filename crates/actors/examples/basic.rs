//! Start the runtime from an in-memory config with one stdio server (the `mcp-fixture` test server), call its
//! `echo` tool, print the status snapshot, and shut down within a bound.
//!
//! Run with `cargo run -p pimcp-actors --example basic`.
#![allow(clippy::print_stdout)] // an example prints its result

use std::time::Duration;

use pimcp_actors::{CallOptions, Runtime, RuntimeOptions};
use pimcp_config::LoadOptions;
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let fixture = fixture_path();
    let config = pimcp_config::load_in_memory(
        &json!({ "mcpServers": { "fixture": { "command": fixture, "args": [] } } }),
        &LoadOptions::new(dir.path(), dir.path()),
    );
    let runtime = Runtime::start(RuntimeOptions::new(
        config,
        dir.path().join("agent"),
        dir.path().join("data"),
    ))
    .await?;

    // The server is lazy: this call connects it, discovers its tools, then calls `echo`.
    let args = json!({ "text": "hello from pimcp" }).as_object().cloned();
    let output = runtime.call("fixture_echo", args, CallOptions::default()).await?;
    println!("echo -> {}", output.text());

    let status = runtime.status();
    println!("{}", serde_json::to_string_pretty(&status)?);

    let report = runtime.shutdown(Duration::from_secs(5)).await;
    println!("shutdown graceful={} in {:?}", report.graceful, report.elapsed);
    Ok(())
}

/// `target/<profile>/mcp-fixture` next to `target/<profile>/examples/basic`, else the fixture crate's locator.
fn fixture_path() -> std::path::PathBuf {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(|p| p.join("mcp-fixture")))
        .filter(|p| p.is_file());
    beside.unwrap_or_else(mcp_fixture::bin_path)
}
