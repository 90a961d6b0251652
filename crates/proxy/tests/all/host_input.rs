//! Malformed host input on `pimcp-run`'s stdio server (`serve_lines`) and `serve --http` POST bodies: one table,
//! both transports. Each line or body gets exactly the JSON-RPC 2.0 error it is owed (code and id, `null` when the
//! id cannot be read), notifications and responses get nothing, answers are rate-bounded, and the connection goes on
//! serving, also after a line over the 16 MiB limit.

use std::time::Duration;

use pimcp_proxy::{HttpOptions, ServeOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

use super::support::*;

fn one_server() -> Value {
    json!({ "mcpServers": { "fx": stdio(&["--event-log", "{dir}/fx.log"]) } })
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

fn deep(depth: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"mcp","arguments":{{"a":{}{}}}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// Each malformed line, the error code it is owed (`None`: no answer) and the id that answer carries.
fn table() -> Vec<(String, Option<i64>, Value)> {
    let s = |l: &str| l.to_owned();
    vec![
        (s("{this is not json"), Some(-32700), Value::Null),
        (
            s(r#"{"jsonrpc":"2.0","id":1,"method":"ping""#),
            Some(-32700),
            Value::Null,
        ),
        (
            s(r#"{"jsonrpc":"2.0","id":1,"method":"ping"} trailing"#),
            Some(-32700),
            Value::Null,
        ),
        (
            s(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"\ud800"}}"#),
            Some(-32700),
            Value::Null,
        ),
        (deep(200), Some(-32700), Value::Null),
        (
            s(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[1]}"#),
            Some(-32602),
            json!(4),
        ),
        (
            s(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"x"}"#),
            Some(-32602),
            json!(5),
        ),
        (
            s(r#"{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":5}}"#),
            Some(-32602),
            json!("p"),
        ),
        (
            s(r#"[{"jsonrpc":"2.0","id":6,"method":"ping"}]"#),
            Some(-32600),
            Value::Null,
        ),
        (s("[]"), Some(-32600), Value::Null),
        (s(r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#), Some(-32600), json!(7)),
        (s(r#"{"id":"q","method":"ping"}"#), Some(-32600), json!("q")),
        (
            s(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            Some(-32600),
            Value::Null,
        ),
        (
            s(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#),
            Some(-32600),
            Value::Null,
        ),
        (
            s(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            Some(-32600),
            Value::Null,
        ),
        (s(r#"{"jsonrpc":"2.0","id":8,"method":42}"#), Some(-32600), json!(8)),
        (s(r#"{"jsonrpc":"2.0","id":9}"#), Some(-32600), json!(9)),
        (s("42"), Some(-32600), Value::Null),
        (s(r#""a string""#), Some(-32600), Value::Null),
        (
            s(r#"{"jsonrpc":"2.0","id":10,"method":"no/such/method"}"#),
            Some(-32601),
            json!(10),
        ),
        // Notifications and responses get nothing.
        (
            s(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}"#),
            None,
            Value::Null,
        ),
        (
            s(r#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#),
            None,
            Value::Null,
        ),
        (
            s(r#"{"jsonrpc":"2.0","method":"no/such/notification","params":"x"}"#),
            None,
            Value::Null,
        ),
        (
            s(r#"{"jsonrpc":"2.0","id":11,"result":"not an object"}"#),
            None,
            Value::Null,
        ),
    ]
}

/// Newline-delimited JSON-RPC against `serve_lines`, as the host process sees `pimcp-run`'s stdio.
struct Raw {
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    read: BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    served: tokio::task::JoinHandle<pimcp_proxy::Result<()>>,
}

impl Raw {
    fn start(env: &Env) -> Raw {
        let (server_io, client_io) = tokio::io::duplex(1 << 20);
        let (server_read, server_write) = tokio::io::split(server_io);
        let served = tokio::spawn(pimcp_proxy::serve_lines(
            env.server(),
            server_read,
            server_write,
            CancellationToken::new(),
        ));
        let (read, write) = tokio::io::split(client_io);
        Raw {
            write,
            read: BufReader::new(read),
            served,
        }
    }

    async fn send(&mut self, line: &str) {
        self.write.write_all(line.as_bytes()).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
        self.write.flush().await.unwrap();
    }

    async fn next(&mut self) -> Value {
        next(&mut self.read).await
    }

    async fn close(self) {
        let Raw { write, read, served } = self;
        drop(write);
        drop(read);
        tokio::time::timeout(DEADLINE, served).await.unwrap().unwrap().unwrap();
    }
}

/// The next line the server writes (within the deadline).
async fn next(read: &mut BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>) -> Value {
    let mut line = String::new();
    let n = tokio::time::timeout(DEADLINE, read.read_line(&mut line))
        .await
        .expect("an answer within the deadline")
        .unwrap();
    assert!(n > 0, "the server closed the connection");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

fn assert_error(answer: &Value, code: i64, id: &Value, line: &str) {
    assert_eq!(answer["jsonrpc"], "2.0", "{line} → {answer}");
    assert_eq!(answer["error"]["code"], code, "{line} → {answer}");
    assert!(answer["error"]["message"].is_string(), "{line} → {answer}");
    let object = answer.as_object().unwrap();
    assert!(object.contains_key("id"), "no id member: {line} → {answer}");
    assert_eq!(&answer["id"], id, "{line} → {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_host_lines_get_exactly_the_json_rpc_error_they_are_owed_and_serving_continues() {
    let env = start(one_server()).await;
    let mut raw = Raw::start(&env);
    raw.send(INIT).await;
    assert_eq!(raw.next().await["id"], "init");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    // Each line gets exactly the answer the table says (code and id, an `id` member always present), or none; a ping
    // after each line shows the connection still serves. Answers may come in either order.
    for (i, (line, code, id)) in table().into_iter().enumerate() {
        raw.send(&line).await;
        let ping = format!("ping-{i}");
        raw.send(&format!(r#"{{"jsonrpc":"2.0","id":"{ping}","method":"ping"}}"#))
            .await;
        let (mut pinged, mut answered) = (false, code.is_none());
        while !(pinged && answered) {
            let answer = raw.next().await;
            if answer["id"] == ping.as_str() {
                assert!(answer["result"].is_object(), "{answer}");
                pinged = true;
                continue;
            }
            let code = code.unwrap_or_else(|| panic!("no answer is owed: {line} → {answer}"));
            assert!(!answered, "a second answer: {line} → {answer}");
            assert_error(&answer, code, &id, &line);
            answered = true;
        }
    }
    // Nothing stray arrived after a line that is owed no answer: the next answer is this request's.
    raw.send(r#"{"jsonrpc":"2.0","id":20,"method":"tools/list"}"#).await;
    let tools = raw.next().await;
    assert_eq!(tools["id"], 20, "{tools}");
    assert_eq!(tools["result"]["tools"][0]["name"], "mcp", "{tools}");
    raw.close().await;
    env.shutdown().await;
}

/// A host that writes garbage fast gets a bounded number of answers, never a storm, and is served after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_bad_lines_are_rate_bounded() {
    let env = start(one_server()).await;
    let mut raw = Raw::start(&env);
    raw.send(INIT).await;
    assert_eq!(raw.next().await["id"], "init");
    // 1000 lines that are not JSON, in one write.
    let burst = "{not json\n".repeat(1000);
    raw.write.write_all(burst.as_bytes()).await.unwrap();
    raw.send(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#).await;
    let mut errors = 0;
    loop {
        let answer = raw.next().await;
        if answer["id"] == "after" {
            break;
        }
        assert_error(&answer, -32700, &Value::Null, "{not json");
        errors += 1;
    }
    assert!(errors < 1000, "every garbage line was answered ({errors})");
    raw.close().await;
    env.shutdown().await;
}

/// A line over the limit (`settings.maxMessageBytes`, 16 MiB) is answered with -32600 carrying its id and naming its
/// size, without being held in memory, and the next request on the connection is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_over_the_limit_is_answered_with_its_id_and_the_next_line_is_served() {
    let env = start(one_server()).await;
    let mut raw = Raw::start(&env);
    raw.send(INIT).await;
    assert_eq!(raw.next().await["id"], "init");
    let Raw {
        mut write,
        mut read,
        served,
    } = raw;
    let big = tokio::spawn(async move {
        let head = br#"{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"mcp","arguments":{"a":""#;
        write.write_all(head).await.unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..17 {
            write.write_all(&chunk).await.unwrap();
        }
        write.write_all(b"\"}}}\n").await.unwrap();
        write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"tools/list\"}\n")
            .await
            .unwrap();
        write.flush().await.unwrap();
        write
    });
    let mut answers = [next(&mut read).await, next(&mut read).await];
    answers.sort_by_key(|a| a["id"] == 21);
    let (too_large, tools) = (&answers[0], &answers[1]);
    assert_error(too_large, -32600, &json!(99), "a 17 MiB request");
    let message = too_large["error"]["message"].as_str().unwrap();
    assert!(message.contains("exceeds the 16 MiB limit"), "{message}");
    assert_eq!(tools["id"], 21, "{tools}");
    assert_eq!(tools["result"]["tools"][0]["name"], "mcp", "{tools}");
    let write = tokio::time::timeout(DEADLINE, big).await.unwrap().unwrap();
    Raw { write, read, served }.close().await;
    env.shutdown().await;
}

/// `serve --http`: a malformed POST body is answered with a JSON-RPC error body (HTTP 400), never
/// an empty answer; a valid request on the same server is served after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_http_bodies_get_a_json_rpc_error_body() {
    let mut env = start(one_server()).await;
    let runtime = env.runtime.take().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let task = tokio::spawn(pimcp_proxy::serve_http(
        runtime,
        env.proxy.clone(),
        env.bridge.clone(),
        listener,
        HttpOptions::default(),
        ServeOptions::default()
            .with_drain_bound(Duration::from_secs(1))
            .with_shutdown_token(stop.clone()),
    ));
    let client = reqwest::Client::new();
    let post = |body: String| {
        client
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
    };
    for (line, code, id) in table() {
        let Some(code) = code else { continue };
        let body = line.strip_prefix('\u{feff}').unwrap_or(&line);
        if serde_json::from_str::<rmcp::service::RxJsonRpcMessage<rmcp::RoleServer>>(body).is_ok() {
            continue; // a message rmcp decodes goes on to its session handling, which needs a session
        }
        let response = tokio::time::timeout(DEADLINE, post(line.clone()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), 400, "{line}");
        let text = response.text().await.unwrap();
        let body: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {line} → {text}"));
        assert_error(&body, code, &id, &line);
    }
    let init = tokio::time::timeout(DEADLINE, post(INIT.to_owned()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(init.status(), 200);
    let text = init.text().await.unwrap();
    assert!(text.contains("\"protocolVersion\""), "{text}");
    stop.cancel();
    tokio::time::timeout(DEADLINE, task).await.unwrap().unwrap().unwrap();
}
