//! Tests of the host-input pre-check: error lines, the ids rmcp reads, and property tests that feed arbitrary bytes,
//! generated messages and mutated valid lines through the decode and the pre-check it guards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rmcp::model::JsonRpcMessage;
use serde_json::{Value, json};

use super::*;

#[test]
fn error_lines_are_json_rpc() {
    let id = serde_json::from_str::<&RawValue>("7").unwrap();
    let v: Value = serde_json::from_slice(&error_line(-32602, "a \"b\"", Some(id))).unwrap();
    assert_eq!(
        v,
        json!({"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"a \"b\""}})
    );
}

#[test]
fn ids_rmcp_reads() {
    for (id, ok) in [
        ("1", true),
        ("-3", true),
        (r#""a""#, true),
        (r#""\u00e9""#, true),
        ("1.5", false),
        ("1e3", false),
        ("{}", false),
        ("null", false),
        ("18446744073709551615", false),
    ] {
        assert_eq!(is_valid_id(serde_json::from_str(id).unwrap()), ok, "{id}");
    }
}

/// One line through the host-input path (decode, then the pre-check for what the decode refused), checked:
/// nothing panics; an answer is one JSON-RPC error line of a known code whose id is `null` or the line's own
/// (valid) id, and small; a request with an id is decoded (rmcp answers it) or answered here, exactly one of the
/// two; only notifications and responses go unanswered.
fn check(line: &[u8]) -> Result<(), TestCaseError> {
    let body = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let value = serde_json::from_slice::<Value>(body).ok();
    let object = value.as_ref().and_then(Value::as_object);
    let has = |key: &str| object.is_some_and(|o| o.contains_key(key));
    let skip = match decode(line) {
        Ok(message) => {
            prop_assert!(value.is_some(), "decoded a line that is not JSON");
            match message {
                JsonRpcMessage::Request(r) => {
                    prop_assert_eq!(&serde_json::to_value(&r.id).unwrap(), &value.as_ref().unwrap()["id"]);
                }
                JsonRpcMessage::Notification(_) => prop_assert!(!has("id"), "a request decoded as a notification"),
                _ => {}
            }
            return Ok(());
        }
        Err(skip) => skip,
    };
    let Some(answer) = reject(line, &skip) else {
        let notification = has("method") && !has("id");
        let response = !has("method") && (has("result") || has("error"));
        prop_assert!(
            notification || response,
            "no answer for {:?}",
            String::from_utf8_lossy(line)
        );
        return Ok(());
    };
    prop_assert!(!answer.contains(&b'\n'));
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    let keys: Vec<&str> = answer.as_object().unwrap().keys().map(String::as_str).collect();
    prop_assert_eq!(keys, ["jsonrpc", "id", "error"]);
    prop_assert_eq!(&answer["jsonrpc"], "2.0");
    let code = answer["error"]["code"].as_i64().unwrap();
    prop_assert!([-32700, -32600, -32602].contains(&code), "code {}", code);
    let message = answer["error"]["message"].as_str().unwrap();
    prop_assert!(message.len() <= 512, "message of {} bytes", message.len());
    let id = &answer["id"];
    match &value {
        None => {
            prop_assert_eq!(code, -32700);
            prop_assert!(id.is_null());
        }
        Some(v) if !id.is_null() => {
            prop_assert_eq!(id, &v["id"]);
            prop_assert!(id.is_string() || id.is_i64(), "answered with id {}", id);
        }
        Some(_) => {}
    }
    Ok(())
}

const SEEDS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":"t","method":"tools/list","params":{"cursor":"c"}}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp","arguments":{"tool":"fx_echo","args":{"text":"hi \u00e9"}},"_meta":{"progressToken":1}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"x"}}"#,
    r#"{"jsonrpc":"2.0","id":"s1","result":{"content":[{"type":"text","text":"a"}]}}"#,
    r#"{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"m"}}"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"file:///a"}}"#,
];

/// Fragments that break JSON or JSON-RPC in the ways hosts and attackers do.
const SNIPPETS: &[&str] = &[
    r#"\ud800"#,
    r#"\udc00\ud800"#,
    "\"",
    "[",
    "{",
    "}",
    "]",
    ",",
    ":",
    "\\",
    "\u{feff}",
    "\u{0}",
    "\r",
    "null",
    "1.5",
    "-0",
    "1e400",
    "18446744073709551616",
    r#""id":{}"#,
    r#""id":1,"#,
    r#""jsonrpc":"1.0","#,
    r#""params":[],"#,
    r#""params":"x","#,
    r#""method":7,"#,
    r#""result":{},"#,
];

#[derive(Debug, Clone)]
enum Op {
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, &'static str),
    Delete(prop::sample::Index, usize),
    Truncate(prop::sample::Index),
    Nest(prop::sample::Index, usize),
    Batch,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Op::Flip(i, b)),
        (any::<prop::sample::Index>(), prop::sample::select(SNIPPETS)).prop_map(|(i, s)| Op::Insert(i, s)),
        (any::<prop::sample::Index>(), 1usize..16).prop_map(|(i, n)| Op::Delete(i, n)),
        any::<prop::sample::Index>().prop_map(Op::Truncate),
        (any::<prop::sample::Index>(), 100usize..300).prop_map(|(i, n)| Op::Nest(i, n)),
        Just(Op::Batch),
    ]
}

fn mutate(mut line: Vec<u8>, ops: &[Op]) -> Vec<u8> {
    for op in ops {
        let at = |i: &prop::sample::Index, len: usize| if len == 0 { 0 } else { i.index(len + 1) };
        match op {
            Op::Flip(i, b) if !line.is_empty() => {
                let i = i.index(line.len());
                line[i] = *b;
            }
            Op::Flip(..) => {}
            Op::Insert(i, s) => {
                let i = at(i, line.len());
                line.splice(i..i, s.bytes());
            }
            Op::Delete(i, n) => {
                let i = at(i, line.len()).min(line.len());
                let end = (i + n).min(line.len());
                line.drain(i..end);
            }
            Op::Truncate(i) => line.truncate(at(i, line.len())),
            Op::Nest(i, n) => {
                let i = at(i, line.len());
                let nested = format!("{}{}", "[".repeat(*n), "]".repeat(*n));
                line.splice(i..i, nested.bytes());
            }
            Op::Batch => {
                line.insert(0, b'[');
                line.push(b']');
            }
        }
    }
    // One line: the framing splits at newlines before any decode.
    line.retain(|b| *b != b'\n');
    line
}

const KEYS: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "name",
    "arguments",
    "_meta",
    "cursor",
    "uri",
];
const STRINGS: &[&str] = &[
    "2.0",
    "1.0",
    "tools/call",
    "tools/list",
    "ping",
    "initialize",
    "notifications/cancelled",
    "notifications/initialized",
    "no/such/method",
    "mcp",
];

/// JSON-RPC-ish messages: objects over the members that matter, with values of every type.
fn message() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop::sample::select(STRINGS).prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    });
    let top = prop::collection::vec((prop::sample::select(KEYS), value), 0..6)
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()));
    top.prop_map(|v| serde_json::to_vec(&v).unwrap())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn arbitrary_bytes_are_answered_or_decoded(line in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(&mutate(line, &[]))?;
    }

    #[test]
    fn generated_messages_are_answered_or_decoded(line in message(), ops in prop::collection::vec(op(), 0..2)) {
        check(&mutate(line, &ops))?;
    }

    #[test]
    fn mutated_valid_lines_are_answered_or_decoded(
        seed in prop::sample::select(SEEDS),
        ops in prop::collection::vec(op(), 0..4),
    ) {
        check(&mutate(seed.as_bytes().to_vec(), &ops))?;
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Lines of a few hundred KiB (a long argument), mutated: the answer stays one small line.
    #[test]
    fn long_lines_are_answered_or_decoded(len in 0usize..400_000, ops in prop::collection::vec(op(), 0..3)) {
        let text = "x".repeat(len);
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"mcp","arguments":{{"tool":"fx_echo","args":{{"text":"{text}"}}}}}}}}"#
        );
        check(&mutate(line.into_bytes(), &ops))?;
    }
}

/// Found by the property tests: rmcp's decode fails on a value's type before the syntax error after it, which the
/// pre-check answered as an invalid request; it is a parse error.
#[test]
fn a_value_then_garbage_is_a_parse_error() {
    for line in [
        "0\u{0}",
        "18446744073709551616{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}",
    ] {
        check(line.as_bytes()).unwrap();
        let skip = decode(line.as_bytes()).unwrap_err();
        let answer: Value = serde_json::from_slice(&reject(line.as_bytes(), &skip).unwrap()).unwrap();
        assert_eq!(answer["error"]["code"], -32700, "{line}");
        assert!(answer["id"].is_null());
    }
}

#[test]
fn the_known_methods_are_rmcp_s_own() {
    for method in [
        "initialize",
        "ping",
        "server/discover",
        "completion/complete",
        "logging/setLevel",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/directory/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "subscriptions/listen",
        "tools/call",
        "tools/list",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "skills/list",
        "skills/get",
    ] {
        assert!(is_known_method(method), "{method}");
    }
    for method in ["tools/frobnicate", "vendor/x", "", "TOOLS/CALL"] {
        assert!(!is_known_method(method), "{method}");
    }
}
