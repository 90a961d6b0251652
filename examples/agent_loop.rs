//! A Rust agent loop on pimcp: the model is handed pimcp's one `mcp` tool, and each tool call it makes is answered
//! by `Pimcp::mcp`. Midway the upstream server crashes; pimcp notices, restarts it on the next call, and the session
//! goes on. The "model" here is a script of the calls a model would make, so the example runs offline:
//!
//! ```text
//! cargo run --example agent_loop
//! ```

#![allow(clippy::print_stdout, reason = "the example prints the session")]

use serde_json::{Value, json};

/// Stands in for a model: given the tool it was offered and the conversation so far, returns its next tool call
/// (the `mcp` tool's arguments), or `None` when it is done.
struct ScriptedModel {
    turns: std::vec::IntoIter<Value>,
}

impl ScriptedModel {
    fn new() -> ScriptedModel {
        let turns = vec![
            // Find a tool, learn its parameters, use it.
            json!({ "search": "echo a message" }),
            json!({ "describe": "fixture_echo" }),
            json!({ "tool": "fixture_echo", "args": { "text": "first" } }),
            // The upstream dies while answering this one.
            json!({ "tool": "fixture_crash", "args": {} }),
            // The next call reaches a fresh process.
            json!({ "tool": "fixture_echo", "args": { "text": "after the crash" } }),
        ];
        ScriptedModel {
            turns: turns.into_iter(),
        }
    }

    fn next_call(&mut self, offered: &Value, _transcript: &[String]) -> Option<Value> {
        assert_eq!(offered["name"], "mcp");
        self.turns.next()
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), pimcp::Error> {
    // Any MCP servers; the workspace's test server keeps the example offline.
    let pimcp = pimcp::Pimcp::builder()
        .config_json(json!({ "mcpServers": { "fixture": { "command": mcp_fixture::bin_path() } } }))
        .start()
        .await?;
    let tool = pimcp.tool().clone();
    println!(
        "offered to the model: `{}` ({} characters of definition)\n",
        tool["name"].as_str().unwrap_or_default(),
        tool.to_string().len()
    );

    let mut model = ScriptedModel::new();
    let mut transcript = Vec::new();
    while let Some(arguments) = model.next_call(&tool, &transcript) {
        let answer = pimcp.mcp(arguments.clone()).await;
        let text = answer.text();
        let first_line = text.lines().next().unwrap_or_default();
        let mark = if answer.is_error() { "error" } else { "ok" };
        println!("model → mcp({arguments})\n  {mark}: {first_line}\n");
        transcript.push(text);
    }

    let status = pimcp.status();
    for server in &status.servers {
        println!(
            "{}: {:?}, {} failure(s) so far, pid {:?}",
            server.name, server.state, server.failures, server.pid
        );
    }
    let report = pimcp.shutdown().await;
    println!("shut down in {:?} (graceful: {})", report.elapsed, report.graceful);
    Ok(())
}
