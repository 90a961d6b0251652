//! A host on raw JSON-RPC lines ([`pimcp_proxy::serve_lines`], what `pimcp-run` serves stdin/stdout with): a
//! `notifications/cancelled` that reaches the upstream, in-flight calls answered when stdin ends, and large answers
//! interleaved with notifications staying whole lines over small pipes.

use std::collections::{HashMap, HashSet};

use pimcp_proxy::ProxyServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::support::*;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn fixture_server() -> Value {
    json!({ "mcpServers": { "fx": {
        "command": fixture(), "args": ["--event-log", "{dir}/fx.log"], "directTools": true,
    }}})
}

/// A host speaking raw JSON-RPC lines to a `ProxyServer` over two in-memory pipes (host → server and server → host,
/// with room for `to_server` and `to_host` bytes: a small `to_host` cuts every answer into many writes).
struct Host {
    write: Option<tokio::io::DuplexStream>,
    read: BufReader<tokio::io::DuplexStream>,
    served: tokio::task::JoinHandle<pimcp_proxy::Result<()>>,
    /// Messages read while waiting for another id.
    seen: Vec<Value>,
}

impl Host {
    fn open(server: ProxyServer, to_server: usize, to_host: usize) -> Host {
        let (write, server_read) = tokio::io::duplex(to_server);
        let (server_write, read) = tokio::io::duplex(to_host);
        let cancel = CancellationToken::new();
        let served = tokio::spawn(pimcp_proxy::serve_lines(server, server_read, server_write, cancel));
        Host {
            write: Some(write),
            read: BufReader::new(read),
            served,
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, line: &str) {
        let write = self.write.as_mut().unwrap();
        write.write_all(line.as_bytes()).await.unwrap();
        write.write_all(b"\n").await.unwrap();
        write.flush().await.unwrap();
    }

    /// The next message; `None` at end of stream. Every line must be one whole JSON message.
    async fn next(&mut self) -> Option<Value> {
        let mut line = String::new();
        let n = tokio::time::timeout(DEADLINE, self.read.read_line(&mut line))
            .await
            .expect("a line in time")
            .unwrap();
        if n == 0 {
            return None;
        }
        assert!(line.ends_with('\n'), "a cut line: {line:?}");
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not one JSON message ({e}): {line:?}")))
    }

    /// The answer to `id` (other messages are kept in `seen`).
    async fn answer(&mut self, id: &Value) -> Value {
        loop {
            let v = self
                .next()
                .await
                .expect("the server closed the stream before answering");
            if v.get("method").is_none() && v["id"] == *id {
                return v;
            }
            self.seen.push(v);
        }
    }

    async fn initialize(&mut self) {
        self.send(INIT).await;
        let init = self.answer(&json!(1)).await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        self.send(INITIALIZED).await;
    }

    /// Closes our write side (the host's stdin ends) and reads everything up to the server's end of stream.
    async fn finish(mut self) -> Vec<Value> {
        let mut write = self.write.take().unwrap();
        write.shutdown().await.unwrap();
        let mut rest = std::mem::take(&mut self.seen);
        while let Some(v) = self.next().await {
            rest.push(v);
        }
        tokio::time::timeout(DEADLINE, self.served)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        rest
    }
}

fn call_line(id: u64, name: &str, arguments: Value, meta: Option<Value>) -> String {
    let mut params = json!({ "name": name, "arguments": arguments });
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params }).to_string()
}

/// A host's `notifications/cancelled` for a call cancels the upstream call, and its answer is never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_reaches_the_upstream() {
    let env = start(fixture_server()).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let log = env.path("fx.log");
    let server = env.server();
    let mut host = Host::open(server.clone(), 1 << 20, 1 << 20);
    host.initialize().await;
    host.send(&call_line(
        5,
        "mcp",
        json!({ "tool": "fx_slow", "args": { "ms": 60000, "steps": 60 } }),
        None,
    ))
    .await;
    wait_until("the slow call to reach the fixture", DEADLINE, || {
        count_events(&log, "call", Some("slow")) == 1
    })
    .await;
    host.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user"}}"#)
        .await;
    wait_until("the fixture to see the call cancelled", DEADLINE, || {
        count_events(&log, "cancelled", Some("slow")) == 1
    })
    .await;
    wait_until("the call to end", DEADLINE, || server.in_flight() == 0).await;
    // Serving goes on; the cancelled call is never answered (read to the end of the stream).
    host.send(&call_line(6, "fx_echo", json!({ "text": "after" }), None))
        .await;
    let after = host.answer(&json!(6)).await;
    assert_eq!(after["result"]["content"][0]["text"], "after", "{after}");
    let rest = host.finish().await;
    assert!(rest.iter().all(|m| m["id"] != 5), "{rest:?}");
    env.shutdown().await;
}

/// When the host's stdin ends with calls in flight, nobody waits for them: each is cancelled upstream
/// (`notifications/cancelled`) and answered as cancelled before the stream closes, and the session ends cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_cancels_calls_in_flight_upstream_and_answers_them() {
    let env = start(fixture_server()).await;
    env.mcp(json!({ "connect": "fx" })).await;
    let log = env.path("fx.log");
    let server = env.server();
    let mut host = Host::open(server.clone(), 1 << 20, 1 << 20);
    host.initialize().await;
    for id in [7, 8] {
        host.send(&call_line(
            id,
            "mcp",
            json!({ "tool": "fx_slow", "args": { "ms": 600_000 } }),
            None,
        ))
        .await;
    }
    wait_until("both slow calls to reach the fixture", DEADLINE, || {
        count_events(&log, "call", Some("slow")) == 2
    })
    .await;
    let rest = host.finish().await;
    for id in [7, 8] {
        let answer = rest
            .iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("call {id} unanswered: {rest:?}"));
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("cancel"), "{answer}");
    }
    wait_until("both calls to be cancelled upstream", DEADLINE, || {
        count_events(&log, "cancelled", Some("slow")) == 2
    })
    .await;
    env.shutdown().await;
}

/// Large answers (over a small pipe, so every write is cut into pieces) interleaved with other answers and
/// notifications arrive as whole lines, each request answered once; large requests arriving in pieces between
/// other events are read whole. The large messages stay on the host side (search pages and validation errors are
/// made by pimcp-run itself; the upstream's messages are small).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_answers_and_notifications_stay_whole_lines() {
    let env = start(json!({ "mcpServers": { "fx": {
        "command": fixture(), "args": ["--tools", "200"], "directTools": true,
    }}}))
    .await;
    env.mcp(json!({ "connect": "fx" })).await;
    let server = env.server();
    // Small pipes both ways: requests arrive in pieces while rmcp's loop is busy with other events, answers leave in
    // pieces while other answers and notifications wait for the lock.
    let mut host = Host::open(server.clone(), 4096, 4096);
    host.initialize().await;
    let big = "x".repeat(64 * 1024);
    let mut expected = HashSet::new();
    let mut batch = String::new();
    for i in 0..40u64 {
        let id = 100 + 4 * i;
        // A large request, refused by pimcp-run's own validation.
        batch.push_str(&call_line(id, "fx_echo", json!({ "text": i, "pad": big }), None));
        batch.push('\n');
        // A large list.
        batch.push_str(&format!(r#"{{"jsonrpc":"2.0","id":{},"method":"tools/list"}}"#, id + 1));
        batch.push('\n');
        // A large search page.
        batch.push_str(&call_line(id + 2, "mcp", json!({ "search": "a", "limit": 50 }), None));
        batch.push('\n');
        // A call with progress notifications among the answers.
        batch.push_str(&call_line(
            id + 3,
            "mcp",
            json!({ "tool": "fx_slow", "args": { "ms": 10, "steps": 2 } }),
            Some(json!({ "progressToken": id + 3 })),
        ));
        batch.push('\n');
        expected.extend([id, id + 1, id + 2, id + 3]);
    }
    // Written by another task while this one reads: neither side may wait for the other.
    let mut write = host.write.take().unwrap();
    let writer = tokio::spawn(async move {
        write.write_all(batch.as_bytes()).await.unwrap();
        write.flush().await.unwrap();
        write
    });
    let mut answers: HashMap<u64, Value> = HashMap::new();
    while answers.len() < expected.len() {
        let m = host.next().await.expect("the stream ended early");
        if m.get("method").is_some() {
            continue;
        }
        let id = m["id"].as_u64().unwrap_or_else(|| panic!("{m}"));
        assert!(expected.contains(&id), "unexpected answer {m}");
        assert!(answers.insert(id, m).is_none(), "answered twice: {id}");
    }
    let search_page = answers[&102]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        search_page.len() > 4096,
        "a search page larger than the pipe: {search_page}"
    );
    for i in 0..40u64 {
        let id = 100 + 4 * i;
        assert_eq!(answers[&id]["result"]["isError"], true, "{}", answers[&id]);
        assert_eq!(
            answers[&id]["result"]["_meta"]["pimcp/category"], "validation",
            "{}",
            answers[&id]
        );
        assert!(
            answers[&(id + 1)]["result"]["tools"].as_array().unwrap().len() > 200,
            "list {}",
            id + 1
        );
        assert_eq!(
            answers[&(id + 2)]["result"]["content"][0]["text"],
            search_page,
            "search {}",
            id + 2
        );
        assert_eq!(answers[&(id + 3)]["result"]["isError"], false, "slow {}", id + 3);
    }
    host.write = Some(writer.await.unwrap());
    host.finish().await;
    env.shutdown().await;
}
