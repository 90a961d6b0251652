//! Parsing the `mcp` tool's parameters into one request, with this dispatch precedence:
//! action > tool > task > connect > describe > instructions > search > server (list) > status.
//!
//! Parsing is strict where a mistake would silently do the wrong thing (unknown parameters, with a "did you mean" for
//! common misspellings; unknown actions; negative offsets; `args` without `tool`) and lenient where intent is clear
//! (numbers and booleans given as strings, empty strings meaning "absent", `limit` above the maximum clamped).

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::search::{DEFAULT_LIMIT, MAX_LIMIT, SearchQuery};
use crate::validate::parse_args;

/// The `mcp` tool's parameters.
pub const PARAMS: [&str; 12] = [
    "tool",
    "args",
    "task",
    "server",
    "search",
    "regex",
    "limit",
    "offset",
    "describe",
    "instructions",
    "connect",
    "action",
];

/// Parameters pi-mcp-adapter's `mcp` tool takes that pimcp accepts without advertising them, because what they ask
/// for is always done: `includeSchemas` (search and describe always show parameter shapes). Only a boolean is
/// accepted.
const ACCEPTED_QUIETLY: [&str; 1] = ["includeSchemas"];

/// Misspellings models make, and the parameter they meant.
const ALIASES: &[(&str, &str)] = &[
    ("arguments", "args"),
    ("params", "args"),
    ("parameters", "args"),
    ("input", "args"),
    ("name", "tool"),
    ("tool_name", "tool"),
    ("toolName", "tool"),
    ("query", "search"),
    ("q", "search"),
    ("server_name", "server"),
    ("serverName", "server"),
    ("page", "offset"),
    ("max", "limit"),
];

/// One parsed `mcp` call.
// Exhaustive on purpose: the serving crate dispatches every kind, and a new kind must fail its build until it does.
#[derive(Debug, Clone, PartialEq)]
pub enum ProxyRequest {
    /// `action: "auth"`: start a login for `server` (the answer holds the URL to open).
    AuthStart {
        /// The server to log in to.
        server: String,
    },
    /// `input` is the pasted redirect URL or code (`args.redirectUrl`, `args.code`, `args.input`, or `args` as text).
    AuthComplete {
        /// The server whose login it finishes.
        server: String,
        /// The redirect URL or code.
        input: String,
    },
    /// Call `tool` with `args`.
    Call {
        /// The tool's name (exposed, original or fuzzy).
        tool: String,
        /// Its arguments.
        args: Map<String, Value>,
        /// The server, to scope the name.
        server: Option<String>,
    },
    /// Follow a task a call left running: `handle` is `<tool>:<task id>`, as the pending call's answer gives it.
    Task {
        /// `<tool>:<task id>`.
        handle: String,
    },
    /// Connect `server` (and close its crash-loop breaker).
    Connect {
        /// The server to connect.
        server: String,
    },
    /// Show one tool's description and parameters.
    Describe {
        /// The tool's name.
        tool: String,
        /// The server, to scope the name.
        server: Option<String>,
    },
    /// Show a server's instructions.
    Instructions {
        /// The server.
        server: String,
    },
    /// Rank tools for a query.
    Search(SearchQuery),
    /// List one server's tools.
    List {
        /// The server.
        server: String,
    },
    /// The status of every server (also what no arguments mean).
    Status,
}

/// Parses the `arguments` of a `tools/call` of `mcp` (absent or `null` means status).
pub fn parse_request(params: Option<&Value>) -> Result<ProxyRequest> {
    let params = match params {
        None | Some(Value::Null) => return Ok(ProxyRequest::Status),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(invalid("arguments", "must be a JSON object")),
    };
    for key in params.keys() {
        if ACCEPTED_QUIETLY.contains(&key.as_str()) {
            boolean(params, key)?;
            continue;
        }
        if !PARAMS.contains(&key.as_str()) {
            let hint = ALIASES
                .iter()
                .find(|(alias, _)| alias == key)
                .map(|(_, meant)| format!("; did you mean `{meant}`?"));
            return Err(invalid(
                key,
                &format!(
                    "is unknown{}",
                    hint.unwrap_or_else(|| format!("; the parameters are {}", PARAMS.join(", ")))
                ),
            ));
        }
    }
    let server = text(params, "server")?;
    if let Some(action) = text(params, "action")? {
        if action != "auth-start" && action != "auth-complete" {
            return Err(invalid(
                "action",
                &format!("must be auth-start or auth-complete, got `{action}`"),
            ));
        }
        let server = server.ok_or_else(|| invalid("server", &format!("is required with action `{action}`")))?;
        return if action == "auth-start" {
            Ok(ProxyRequest::AuthStart { server })
        } else {
            Ok(ProxyRequest::AuthComplete {
                server,
                input: auth_input(params.get("args"))?,
            })
        };
    }
    if let Some(tool) = text(params, "tool")? {
        let args = parse_args(params.get("args"))?;
        return Ok(ProxyRequest::Call { tool, args, server });
    }
    if params.get("args").is_some_and(|a| !a.is_null()) {
        let nested = parse_args(params.get("args"))
            .ok()
            .and_then(|a| a.get("tool").and_then(Value::as_str).map(String::from));
        return Err(match nested {
            Some(tool) => Error::InvalidArgs(format!(
                "`tool` was nested inside `args`; pass it at the top level: mcp({{tool: \"{tool}\", args: {{…}}}})"
            )),
            None => Error::InvalidArgs("`args` was given without `tool`: mcp({tool: \"name\", args: {…}})".to_string()),
        });
    }
    if let Some(handle) = text(params, "task")? {
        return Ok(ProxyRequest::Task { handle });
    }
    if let Some(server) = text(params, "connect")? {
        return Ok(ProxyRequest::Connect { server });
    }
    if let Some(tool) = text(params, "describe")? {
        return Ok(ProxyRequest::Describe { tool, server });
    }
    if let Some(server) = text(params, "instructions")? {
        return Ok(ProxyRequest::Instructions { server });
    }
    if let Some(search) = params.get("search").filter(|v| !v.is_null()) {
        let Value::String(text) = search else {
            return Err(invalid("search", "must be a string"));
        };
        let query = SearchQuery {
            text: text.trim().to_string(),
            server,
            regex: boolean(params, "regex")?.unwrap_or(false),
            limit: integer(params, "limit", 1)?.map_or(DEFAULT_LIMIT, |n| {
                usize::try_from(n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT)
            }),
            offset: integer(params, "offset", 0)?.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)),
        };
        return Ok(ProxyRequest::Search(query));
    }
    if let Some(server) = server {
        return Ok(ProxyRequest::List { server });
    }
    Ok(ProxyRequest::Status)
}

/// [`parse_request`] taking the arguments by value: a tool call's `args` object is moved into the request, not
/// copied. Only when the outcome cannot depend on it (a non-blank string `tool`, no `action`) is `args` taken out
/// before parsing; the result is the same as [`parse_request`]'s.
pub fn parse_request_owned(mut params: Option<Value>) -> Result<ProxyRequest> {
    let moved = match &mut params {
        Some(Value::Object(map))
            if map
                .get("tool")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.trim().is_empty())
                && map.get("action").is_none_or(Value::is_null) =>
        {
            match map.get_mut("args") {
                Some(args @ Value::Object(_)) => Some(std::mem::take(args)),
                _ => None,
            }
        }
        _ => None,
    };
    let mut request = parse_request(params.as_ref())?;
    if let (Some(Value::Object(moved)), ProxyRequest::Call { args, .. }) = (moved, &mut request) {
        *args = moved;
    }
    Ok(request)
}

fn invalid(param: &str, problem: &str) -> Error {
    Error::InvalidParam {
        param: param.to_string(),
        problem: problem.to_string(),
    }
}

/// A string parameter; empty or blank strings count as absent.
fn text(params: &Map<String, Value>, key: &str) -> Result<Option<String>> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Some(other) => Err(invalid(key, &format!("must be a string, got {other}"))),
    }
}

fn boolean(params: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
        Some(other) => Err(invalid(key, &format!("must be true or false, got {other}"))),
    }
}

/// A whole number at least `min` (numbers given as strings are accepted).
fn integer(params: &Map<String, Value>, key: &str, min: i64) -> Result<Option<u64>> {
    let value = match params.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let parsed: Option<i128> = match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| {
                n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| {
                    // Whole floats such as `12.0` below 2^53 convert exactly.
                    #[allow(clippy::cast_possible_truncation)]
                    let whole = f as i64;
                    i128::from(whole)
                })
            }),
        Value::String(s) => s.trim().parse::<i128>().ok(),
        _ => None,
    };
    let Some(n) = parsed else {
        return Err(invalid(key, &format!("must be a whole number, got {value}")));
    };
    if n < i128::from(min) {
        return Err(invalid(key, &format!("must be {min} or more, got {n}")));
    }
    Ok(Some(u64::try_from(n).unwrap_or(u64::MAX)))
}

fn auth_input(args: Option<&Value>) -> Result<String> {
    let from_object = |map: &Map<String, Value>| {
        ["redirectUrl", "code", "input"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
            .map(str::trim)
            .map(String::from)
    };
    let input = match args {
        Some(Value::Object(map)) => from_object(map),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(map)) => from_object(&map),
            _ => Some(s.trim().to_string()),
        },
        _ => None,
    };
    input.filter(|s| !s.is_empty()).ok_or_else(|| {
        invalid(
            "args",
            "must hold the redirect URL or code for auth-complete: args: {redirectUrl: \"http://…?code=…\"}",
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    /// Parses with [`parse_request`] and checks that [`parse_request_owned`] gives the same outcome.
    fn parse(v: Value) -> std::result::Result<ProxyRequest, String> {
        let borrowed = parse_request(Some(&v)).map_err(|e| e.to_string());
        let owned = parse_request_owned(Some(v.clone())).map_err(|e| e.to_string());
        assert_eq!(borrowed, owned, "{v}");
        borrowed
    }

    /// The owned parse moves `args` only where that cannot change the outcome.
    #[test]
    fn owned_parsing_is_the_same_parse() {
        for v in [
            json!({ "tool": "a", "args": { "x": 1 } }),
            json!({ "tool": "a", "server": "s", "args": { "x": { "y": [1] } } }),
            json!({ "tool": "  ", "args": { "x": 1 } }),
            json!({ "tool": "", "args": { "tool": "b" } }),
            json!({ "tool": 5, "args": { "x": 1 } }),
            json!({ "tool": "a", "action": "auth-complete", "server": "s", "args": { "code": "c" } }),
            json!({ "tool": "a", "action": null, "args": { "x": 1 } }),
            json!({ "tool": "a", "args": "{\"x\": 1}" }),
            json!({ "tool": "a", "args": [1] }),
            json!({ "tool": "a", "args": null }),
            json!({ "tool": "a", "args": { "x": 1 }, "bogus": 1 }),
            json!({ "tool": "a", "server": 3, "args": { "x": 1 } }),
            json!({ "args": { "tool": "a", "args": {} } }),
            json!({ "search": "q", "tool": "a", "args": { "x": 1 } }),
        ] {
            let _ = parse(v);
        }
        assert_eq!(parse_request_owned(None).unwrap(), ProxyRequest::Status);
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn precedence_table() {
        let q = |text: &str| SearchQuery::new(text);
        let cases: Vec<(Value, ProxyRequest)> = vec![
            (json!({}), ProxyRequest::Status),
            (json!(null), ProxyRequest::Status),
            (json!({"server": "s"}), ProxyRequest::List { server: "s".into() }),
            (json!({"server": "  "}), ProxyRequest::Status),
            (
                json!({"search": "echo", "server": "s"}),
                ProxyRequest::Search(q("echo").with_server("s")),
            ),
            (
                json!({"search": "", "server": "s"}),
                ProxyRequest::Search(q("").with_server("s")),
            ),
            (
                json!({"instructions": "s", "search": "x"}),
                ProxyRequest::Instructions { server: "s".into() },
            ),
            (
                json!({"describe": "t", "instructions": "s", "server": "a"}),
                ProxyRequest::Describe {
                    tool: "t".into(),
                    server: Some("a".into()),
                },
            ),
            (
                json!({"connect": "s", "describe": "t"}),
                ProxyRequest::Connect { server: "s".into() },
            ),
            (
                json!({"tool": "t", "args": {"a": 1}, "connect": "s"}),
                ProxyRequest::Call {
                    tool: "t".into(),
                    args: obj(json!({"a": 1})),
                    server: None,
                },
            ),
            (
                json!({"tool": "t", "args": "{\"a\": 1}", "server": "s"}),
                ProxyRequest::Call {
                    tool: "t".into(),
                    args: obj(json!({"a": 1})),
                    server: Some("s".into()),
                },
            ),
            (
                json!({"tool": "t"}),
                ProxyRequest::Call {
                    tool: "t".into(),
                    args: Map::new(),
                    server: None,
                },
            ),
            (
                json!({"action": "auth-start", "server": "s", "tool": "t"}),
                ProxyRequest::AuthStart { server: "s".into() },
            ),
            (
                json!({"action": "auth-complete", "server": "s", "args": {"redirectUrl": "http://127.0.0.1/cb?code=1"}}),
                ProxyRequest::AuthComplete {
                    server: "s".into(),
                    input: "http://127.0.0.1/cb?code=1".into(),
                },
            ),
            (
                json!({"action": "auth-complete", "server": "s", "args": " abc "}),
                ProxyRequest::AuthComplete {
                    server: "s".into(),
                    input: "abc".into(),
                },
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input.clone()), Ok(want), "{input}");
        }
    }

    #[test]
    fn search_options_table() {
        type Want = std::result::Result<(bool, usize, usize), &'static str>;
        let cases: Vec<(Value, Want)> = vec![
            (json!({"search": "x"}), Ok((false, DEFAULT_LIMIT, 0))),
            (
                json!({"search": "x", "regex": true, "limit": 5, "offset": 10}),
                Ok((true, 5, 10)),
            ),
            (
                json!({"search": "x", "regex": "TRUE", "limit": "5", "offset": "3"}),
                Ok((true, 5, 3)),
            ),
            (json!({"search": "x", "limit": 12.0}), Ok((false, 12, 0))),
            (json!({"search": "x", "limit": 100_000}), Ok((false, MAX_LIMIT, 0))),
            (
                json!({"search": "x", "offset": 1e300}),
                Err("parameter `offset` of the mcp tool must be a whole number, got 1e+300"),
            ),
            (
                json!({"search": "x", "offset": -3}),
                Err("parameter `offset` of the mcp tool must be 0 or more, got -3"),
            ),
            (
                json!({"search": "x", "limit": 0}),
                Err("parameter `limit` of the mcp tool must be 1 or more, got 0"),
            ),
            (
                json!({"search": "x", "limit": 2.5}),
                Err("parameter `limit` of the mcp tool must be a whole number, got 2.5"),
            ),
            (
                json!({"search": "x", "regex": "yes"}),
                Err("parameter `regex` of the mcp tool must be true or false, got \"yes\""),
            ),
            (
                json!({"search": 3}),
                Err("parameter `search` of the mcp tool must be a string"),
            ),
        ];
        for (input, want) in cases {
            let got = parse(input.clone()).map(|r| match r {
                ProxyRequest::Search(q) => (q.regex, q.limit, q.offset),
                other => panic!("{other:?}"),
            });
            assert_eq!(got, want.map_err(String::from), "{input}");
        }
    }

    #[test]
    fn include_schemas_is_accepted_with_search_and_describe() {
        let search = parse_request(Some(&json!({"search": "read file", "includeSchemas": true}))).unwrap();
        assert!(
            matches!(search, ProxyRequest::Search(ref q) if q.text == "read file"),
            "{search:?}"
        );
        let describe = parse_request(Some(&json!({"describe": "fx_echo", "includeSchemas": false}))).unwrap();
        assert!(matches!(describe, ProxyRequest::Describe { ref tool, .. } if tool == "fx_echo"));
        let wrong = parse_request(Some(&json!({"search": "x", "includeSchemas": [1]}))).unwrap_err();
        assert!(wrong.to_string().contains("includeSchemas"), "{wrong}");
    }

    #[test]
    fn mistakes_table() {
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"tool": "t", "arguments": {}}),
                "parameter `arguments` of the mcp tool is unknown; did you mean `args`?",
            ),
            (
                json!({"query": "x"}),
                "parameter `query` of the mcp tool is unknown; did you mean `search`?",
            ),
            (
                json!({"frob": 1}),
                "parameter `frob` of the mcp tool is unknown; the parameters are tool, args, task, server, search, regex, limit, offset, describe, instructions, connect, action",
            ),
            (
                json!({"args": {"tool": "echo", "args": {}}}),
                "`tool` was nested inside `args`; pass it at the top level: mcp({tool: \"echo\", args: {…}})",
            ),
            (
                json!({"args": {"message": "hi"}}),
                "`args` was given without `tool`: mcp({tool: \"name\", args: {…}})",
            ),
            (
                json!({"tool": "t", "args": [1]}),
                "`args` must be a JSON object, got an array",
            ),
            (
                json!({"tool": 5}),
                "parameter `tool` of the mcp tool must be a string, got 5",
            ),
            (
                json!({"action": "auth-start"}),
                "parameter `server` of the mcp tool is required with action `auth-start`",
            ),
            (
                json!({"action": "install", "server": "s"}),
                "parameter `action` of the mcp tool must be auth-start or auth-complete, got `install`",
            ),
            (
                json!({"action": "auth-complete", "server": "s"}),
                "parameter `args` of the mcp tool must hold the redirect URL or code for auth-complete: args: {redirectUrl: \"http://…?code=…\"}",
            ),
            (
                json!([1]),
                "parameter `arguments` of the mcp tool must be a JSON object",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input.clone()), Err(want.to_string()), "{input}");
        }
    }
}
