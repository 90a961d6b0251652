//! The JSON-RPC 2.0 error a host's message is owed when it yields no message, one table for both host transports:
//! the pre-check in front of rmcp on `serve --http` request bodies, and [`HostLines`], the policy of the stdio
//! host's line transport (`pimcp_actors::lines`), which hands rmcp only valid messages.
//!
//! Only messages the decode refused get an answer here (an HTTP body over the size limit is refused before, with
//! 413; a stdio line over `settings.maxMessageBytes` is answered -32600 with its id when it can be read). A
//! parse error (not JSON, a lone surrogate, nesting deeper than serde's limit) is -32700 with `"id": null`; a batch
//! (a JSON array: MCP 2025-06-18 dropped batches) is -32600 with `"id": null`; a request whose `jsonrpc`, `id` or
//! `method` is wrong is -32600 with its id when the id is an integer or a string, else `null`; a well-formed request
//! whose params do not fit its method is -32602 with its id. A notification (a `method` without an `id`) and a
//! response get nothing. Messages never quote the body (it may carry secrets).

use std::time::{Duration, Instant};

use pimcp_actors::lines::{LinePolicy, Oversized, Vetted};
use rmcp::RoleServer;
use rmcp::service::RxJsonRpcMessage;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

pub(crate) const PARSE_ERROR: i32 = -32700;
pub(crate) const INVALID_REQUEST: i32 = -32600;
pub(crate) const INVALID_PARAMS: i32 = -32602;

/// The methods of rmcp's `ClientRequest` variants (all but `CustomRequest`), spelled by rmcp's own method types.
const KNOWN_METHODS: [&str; 21] = {
    use rmcp::model::*;
    [
        InitializeResultMethod::VALUE,
        PingRequestMethod::VALUE,
        DiscoverRequestMethod::VALUE,
        CompleteRequestMethod::VALUE,
        SetLevelRequestMethod::VALUE,
        GetPromptRequestMethod::VALUE,
        ListPromptsRequestMethod::VALUE,
        ListResourcesRequestMethod::VALUE,
        ListResourceTemplatesRequestMethod::VALUE,
        ReadResourceRequestMethod::VALUE,
        ReadResourceDirectoryRequestMethod::VALUE,
        SubscribeRequestMethod::VALUE,
        UnsubscribeRequestMethod::VALUE,
        SubscriptionsListenRequestMethod::VALUE,
        CallToolRequestMethod::VALUE,
        ListToolsRequestMethod::VALUE,
        GetTaskMethod::VALUE,
        UpdateTaskMethod::VALUE,
        CancelTaskMethod::VALUE,
        ListSkillsRequestMethod::VALUE,
        GetSkillRequestMethod::VALUE,
    ]
};

/// Whether rmcp decodes `method` into a request type of its own (not a custom request): a request for one of them
/// whose decode fell through to a custom request had params that do not fit it.
pub(crate) fn is_known_method(method: &str) -> bool {
    KNOWN_METHODS.contains(&method)
}

/// Why a body yields no message.
#[derive(Debug)]
pub(crate) enum Skip {
    /// Not JSON (or cut short).
    Unparsable(serde_json::Error),
    /// A notification rmcp does not know: ignored.
    UnknownNotification,
    /// JSON, but not a valid message.
    Invalid,
}

/// Decodes `body` as rmcp will (a leading UTF-8 BOM ignored); `Err` says why it yields no message.
pub(crate) fn decode(body: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, Skip> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let e = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(body) {
        Ok(message) => return Ok(message),
        Err(e) => e,
    };
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => Err(Skip::Unparsable(e)),
        serde_json::error::Category::Data | serde_json::error::Category::Io => {
            let notification = serde_json::from_slice::<Envelope<'_>>(body)
                .is_ok_and(|envelope| envelope.method.is_some() && envelope.id.is_none());
            Err(if notification {
                Skip::UnknownNotification
            } else {
                Skip::Invalid
            })
        }
    }
}

/// The answer to a body that yields no message (see the module docs): one serialized message, or `None` for no
/// answer.
pub(crate) fn reject(body: &[u8], skip: &Skip) -> Option<Vec<u8>> {
    match skip {
        Skip::Unparsable(e) => Some(error_line(PARSE_ERROR, &format!("Parse error: {e}"), None)),
        Skip::UnknownNotification => None,
        Skip::Invalid => invalid(body),
    }
}

/// The top-level members of a message, unparsed. A member given as `null` is `Some` (`"id": null` is an id).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// A line that is JSON but not a message rmcp accepts.
fn invalid(line: &[u8]) -> Option<Vec<u8>> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    // rmcp's decode may fail on the type of a value before it reaches a syntax error after it (`0 x`).
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(line) {
        return Some(error_line(PARSE_ERROR, &format!("Parse error: {e}"), None));
    }
    if line.trim_ascii_start().starts_with(b"[") {
        return Some(error_line(
            INVALID_REQUEST,
            "Invalid request: batches are not supported",
            None,
        ));
    }
    let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(line) else {
        return Some(error_line(
            INVALID_REQUEST,
            "Invalid request: not a JSON-RPC message",
            None,
        ));
    };
    if envelope.method.is_none() && (envelope.result.is_some() || envelope.error.is_some()) {
        tracing::debug!("ignoring an invalid response from the host");
        return None;
    }
    if envelope.method.is_some() && envelope.id.is_none() {
        return None;
    }
    let id = envelope.id.filter(|id| is_valid_id(id));
    let fault = if envelope.jsonrpc.map(RawValue::get) != Some(r#""2.0""#) {
        "Invalid request: \"jsonrpc\" must be \"2.0\""
    } else if id.is_none() {
        "Invalid request: \"id\" must be an integer or a string"
    } else if !envelope.method.is_some_and(|m| m.get().starts_with('"')) {
        "Invalid request: \"method\" must be a string"
    } else {
        return Some(error_line(INVALID_PARAMS, "Invalid params", id));
    };
    Some(error_line(INVALID_REQUEST, fault, id))
}

/// An id rmcp reads: a string, or an integer that fits an `i64`.
fn is_valid_id(id: &RawValue) -> bool {
    let text = id.get();
    if text.starts_with('"') {
        return serde_json::from_str::<String>(text).is_ok();
    }
    text.parse::<i64>().is_ok()
}

/// One JSON-RPC error response (no newline); `id` is the raw JSON of a valid id, or `null`.
pub(crate) fn error_line(code: i32, message: &str, id: Option<&RawValue>) -> Vec<u8> {
    let id = id.map_or("null", RawValue::get);
    let message = serde_json::Value::from(message);
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#).into_bytes()
}

/// At most this many error answers per [`ANSWER_WINDOW`] on one stdio connection: a host (or a loop between two
/// programs) that writes garbage fast gets the first answers, then silence, never an error storm.
pub(crate) const MAX_ANSWERS_PER_WINDOW: u32 = 64;
pub(crate) const ANSWER_WINDOW: Duration = Duration::from_secs(1);

/// The stdio host's line policy: valid messages go to rmcp, bad requests are answered here (see the module docs),
/// and the end of the host's input is signalled on `closed` (calls in flight are then cancelled: nobody waits for
/// them).
pub(crate) struct HostLines {
    closed: CancellationToken,
    window: Instant,
    answered: u32,
}

impl HostLines {
    pub(crate) fn new(closed: CancellationToken) -> HostLines {
        HostLines {
            closed,
            window: Instant::now(),
            answered: 0,
        }
    }

    /// Whether one more error answer fits the rate bound.
    fn may_answer(&mut self) -> bool {
        if self.window.elapsed() >= ANSWER_WINDOW {
            self.window = Instant::now();
            self.answered = 0;
        }
        self.answered += 1;
        if self.answered == MAX_ANSWERS_PER_WINDOW + 1 {
            tracing::warn!(
                limit = MAX_ANSWERS_PER_WINDOW,
                "the host sends many messages that are not valid; not answering more of them for a second"
            );
        }
        self.answered <= MAX_ANSWERS_PER_WINDOW
    }

    fn answer(&mut self, line: Option<Vec<u8>>) -> Vetted<RoleServer> {
        match line {
            Some(line) if self.may_answer() => Vetted::Answer(line),
            _ => Vetted::Skip,
        }
    }
}

impl LinePolicy<RoleServer> for HostLines {
    fn line(&mut self, line: &[u8]) -> Vetted<RoleServer> {
        match decode(line) {
            Ok(message) => Vetted::Message(message),
            Err(skip) => {
                tracing::debug!(bytes = line.len(), ?skip, "a host line that is no message");
                let answer = reject(line, &skip);
                self.answer(answer)
            }
        }
    }

    fn oversized(&mut self, line: Oversized) -> Vetted<RoleServer> {
        tracing::warn!(
            size = line.size,
            limit = line.limit,
            "a message from the host is too large"
        );
        if line.response {
            return Vetted::Skip;
        }
        let id = line.id.as_ref().and_then(|id| serde_json::value::to_raw_value(id).ok());
        let message = format!("Invalid request: the message of {}", line.describe());
        let answer = error_line(INVALID_REQUEST, &message, id.as_deref());
        self.answer(Some(answer))
    }

    fn end(&mut self) {
        self.closed.cancel();
    }
}

#[cfg(test)]
#[path = "host_input_tests.rs"]
mod tests;
