//! Bounded fuzzing of what a host sends pimcp (`mcp_fixture::fuzz`): JSON-RPC lines on `pimcp-run`'s stdio server
//! (`serve_lines`, the whole stack a host's bytes pass through: framing, decoding, rmcp's service, the proxy, an
//! upstream fixture server) and the `mcp` tool's arguments: request parsing,
//! argument validation against arbitrary schemas, schema shapes and result rendering. The properties: no panic, no
//! hang, no unbounded allocation; every line the server writes is JSON-RPC 2.0; the connection keeps answering; a
//! shape stays within its budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "all/support.rs"]
mod support;

use std::time::Duration;

use mcp_fixture::fuzz;
use pimcp_proxy::{ArgsValidator, parse_args, parse_request, render_call_result, shape, shape_within};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOC: fuzz::CappedAlloc = fuzz::CappedAlloc;

/// How long one line may go unanswered (the ping after it) before it counts as a hang.
const ANSWER_DEADLINE: Duration = Duration::from_secs(8);

const INIT: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}"#;

#[test]
fn host_input() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let env = rt.block_on(support::start(json!({
        "mcpServers": { "fx": support::stdio(&["--event-log", "{dir}/fx.log"]) }
    })));
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_io);
    let cancel = CancellationToken::new();
    let served = rt.spawn(pimcp_proxy::serve_lines(
        env.server(),
        server_read,
        server_write,
        cancel.clone(),
    ));
    let (read, mut write) = tokio::io::split(client_io);
    let mut read = BufReader::new(read);
    let mut pings = 0u64;
    let mut exchange = |input: &[u8]| {
        pings += 1;
        let ping = format!("fuzz-ping-{pings}");
        rt.block_on(async {
            write.write_all(input).await.unwrap();
            let line = format!("\n{{\"jsonrpc\":\"2.0\",\"id\":\"{ping}\",\"method\":\"ping\"}}\n");
            write.write_all(line.as_bytes()).await.unwrap();
            write.flush().await.unwrap();
            // Everything up to the ping's answer is what the input got; each line must be JSON-RPC 2.0.
            let deadline = tokio::time::Instant::now() + ANSWER_DEADLINE;
            loop {
                let mut line = String::new();
                let n = tokio::time::timeout_at(deadline, read.read_line(&mut line))
                    .await
                    .unwrap_or_else(|_| panic!("no answer to the ping after {ANSWER_DEADLINE:?}: a hang"))
                    .unwrap();
                assert!(n > 0, "the server closed the connection");
                let answer: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the server wrote a non-JSON line ({e}): {line}"));
                assert_eq!(answer["jsonrpc"], "2.0", "{line}");
                if answer["id"] == ping.as_str() {
                    assert!(answer.get("result").is_some(), "{line}");
                    break;
                }
            }
        });
    };
    exchange(INIT.as_bytes());
    exchange(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    fuzz::run("host_input", |input| {
        // One input is one line: a newline inside it would make the line count of the answer unpredictable, not
        // wrong, so it stays; a trailing one is the framing.
        exchange(input);
    });
    cancel.cancel();
    rt.block_on(async {
        drop(write);
        let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
    });
    drop(env);
}

/// A schema with the keywords tools use, for arguments the fuzzer makes.
fn tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": { "type": "string", "minLength": 1, "pattern": "^[^\\u0000]*$" },
            "depth": { "type": "integer", "minimum": 0, "maximum": 10 },
            "mode": { "enum": ["fast", "slow", null] },
            "tags": { "type": "array", "items": { "type": "string" }, "maxItems": 5, "uniqueItems": true },
            "opts": { "type": "object", "additionalProperties": { "type": "boolean" } },
            "any": { "anyOf": [{ "type": "number" }, { "$ref": "#/$defs/node" }] }
        },
        "required": ["path"],
        "additionalProperties": false,
        "$defs": { "node": { "type": "object", "properties": { "next": { "$ref": "#/$defs/node" } } } }
    })
}

#[test]
fn args() {
    let validator = ArgsValidator::new("fx_tool", &tool_schema());
    fuzz::run("args", |input| {
        let Ok(value) = serde_json::from_slice::<Value>(input) else {
            return;
        };
        let _ = parse_request(Some(&value));
        let _ = parse_args(Some(&value));
        if let Value::Object(args) = &value {
            let _ = validator.check(args);
            // The input as a tool's schema: validating and shaping an upstream's schema never fails the proxy.
            let as_schema = ArgsValidator::new("fuzzed", &value);
            let _ = as_schema.check(args);
            let _ = as_schema.shape();
        }
        let _ = shape(Some(&value));
        for budget in [16, 200] {
            let shaped = shape_within(Some(&value), budget);
            assert!(
                shaped.chars().count() <= budget.max(64) * 2,
                "a shape of {budget} characters came out as {}: {shaped}",
                shaped.chars().count()
            );
        }
        if let Ok(result) = serde_json::from_value::<rmcp::model::CallToolResult>(value) {
            let _ = render_call_result(&result);
        }
    });
}
