//! Newline-delimited JSON-RPC over a byte stream (a child's stdio, a Unix socket, `pimcp-run`'s own stdio), with a
//! fast decode for the one message kind every proxied call carries in each direction.
//!
//! rmcp's stream transport decodes every line through `JsonRpcMessage`'s untagged unions: a `tools/call` request
//! from a host fails its way through twenty request types before it reaches `CallToolRequest`, and an upstream's
//! `tools/call` result through fifteen result types (each failure formats an error message), after buffering the
//! whole line into serde's `Content` tree. Measured on `pimcp-run`, that decode was the largest single item of the
//! CPU a proxied call costs. This transport decodes a `tools/call` request (server role) and a plain tool result
//! (client role) straight into their types (in one pass for the common shapes, see `fast_decode`, else through
//! serde's derives of those types), and every other line exactly as rmcp does, through the same `JsonRpcMessage`
//! deserializer. The fast path only takes lines whose shape leaves rmcp's unions no other choice;
//! `tests` compare both decodes on every shape the fast path accepts.
//!
//! Framing follows rmcp's stream transport: lines up to 16 MiB (longer ones are discarded with an error log; on the
//! client side an over-long answer to one of our requests fails that request at once, see `oversized`),
//! `\r\n` accepted, a UTF-8 BOM ignored, blank lines skipped, unparsable lines ignored, and a line that parses as
//! JSON but is not a valid message answered with an `Invalid request` error — except on the client side, where only
//! a line shaped like a request (`method` and `id`) is answered: anything else a server writes that is not a message
//! (a JSON-RPC batch, a response of an unknown shape, a bare value) is dropped with a warning naming the server
//! ([`LineTransport::named`]) and never its content. A notification this side cannot decode
//! is ignored (rmcp ignores the non-standard ones and answers the others with that error, which JSON-RPC forbids for
//! notifications). A host-facing reader built with `rejecting` answers every line that yields no message (an
//! over-long one as soon as it is seen, without reading the rest into memory) with what its hook says instead.
//! Writes are one serialized message plus `\n` under a lock, flushed; `close` drops the writer, which
//! closes the pipe or socket.
//!
//! `receive` is cancel-safe, as rmcp's loop needs (it selects over `receive` and drops it when another event comes
//! first): a line read only in part is kept for the next call.

use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, CallToolResult, ClientRequest, ErrorData, JsonRpcMessage, JsonRpcRequest, JsonRpcResponse,
    ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};

/// The longest line read, as in rmcp's stream transport.
pub const MAX_LINE_LENGTH: usize = 16 * 1024 * 1024;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// How a host-facing reader answers a line that yields no message (see [`LineTransport::rejecting`]): `None` for a
/// line over [`MAX_LINE_LENGTH`] (discarded unread), else the line and why it was skipped. Returns the answer line
/// (one serialized message, no newline) or `None` for no answer.
pub type Reject = fn(Option<(&[u8], &Skip)>) -> Option<Vec<u8>>;

/// A role whose most frequent incoming message has a direct decode. `None` means "decode it the general way".
pub trait FastDecode: ServiceRole {
    fn fast_decode(line: &[u8]) -> Option<RxJsonRpcMessage<Self>>;
}

/// See the module docs. Build with [`LineTransport::new`] from a reader and a writer.
pub struct LineTransport<Role, R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    discarding: bool,
    /// Client role: the scan of the over-long line being discarded, for the `id` it answers (see `oversized`).
    oversized: Option<super::oversized::IdScan>,
    /// `line` holds a whole line already handed out: clear it before reading the next. A line read only in part
    /// stays, so a `receive` dropped at an await (rmcp's loop selects over it) loses nothing.
    line_done: bool,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    /// A line parsed as JSON but was not a valid message: answer `Invalid request` before reading on.
    owe_error: bool,
    /// Set by [`LineTransport::rejecting`]: answers every line that yields no message in its stead.
    reject: Option<Reject>,
    /// The answer [`Self::reject`] gave, written before reading on.
    owed: Option<Vec<u8>>,
    /// The peer's name for log lines (a server's, on the client side), if given.
    peer: Option<Arc<str>>,
    _role: PhantomData<fn() -> Role>,
}

impl<Role, R, W> std::fmt::Debug for LineTransport<Role, R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTransport").finish_non_exhaustive()
    }
}

impl<Role, R, W> LineTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            oversized: None,
            line_done: false,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            owe_error: false,
            reject: None,
            owed: None,
            peer: None,
            _role: PhantomData,
        }
    }

    /// Names the peer in the log lines about what it sent (a server's name, on the client side).
    pub fn named(mut self, peer: &str) -> Self {
        self.peer = Some(peer.into());
        self
    }

    /// Answers every line that yields no message (unparsable, not a valid message, longer than the limit) with what
    /// `reject` returns instead of the default handling; a line over the limit is answered as soon as it is seen.
    pub fn rejecting(mut self, reject: Reject) -> Self {
        self.reject = Some(reject);
        self
    }

    /// Fills `self.line` with the next line (without `\n`). `Ok(false)` at end of stream. Cancel-safe: bytes are
    /// moved from the reader into `self.line` without an await in between, and a partial line is kept.
    async fn next_line(&mut self) -> std::io::Result<bool> {
        if self.line_done {
            self.line.clear();
            self.line_done = false;
        }
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(false);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if self.discarding {
                self.discarding = newline.is_none();
                if let Some(scan) = &mut self.oversized {
                    scan.feed(&available[..take]);
                }
            } else if self.line.len().saturating_add(take) > MAX_LINE_LENGTH {
                tracing::error!(
                    max_line_length = MAX_LINE_LENGTH,
                    "incoming message exceeded the maximum line length, discarding it"
                );
                // Upstream answers: what is read of the line so far, then the rest as it is skipped, is scanned for
                // the id of the request it answers (the id may come last), keeping nothing else.
                if Role::IS_CLIENT {
                    let mut scan = super::oversized::IdScan::default();
                    scan.feed(&self.line);
                    scan.feed(&available[..take]);
                    self.oversized = Some(scan);
                }
                self.line.clear();
                self.discarding = newline.is_none();
                if let Some(reject) = self.reject {
                    // Answered now (an empty line for `receive`), not after the rest of the line has been read.
                    self.owed = reject(None);
                    self.read.consume(take);
                    self.line_done = true;
                    return Ok(true);
                }
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    self.read.consume(take);
                    self.line.pop();
                    if self.line.last() == Some(&b'\r') {
                        self.line.pop();
                    }
                    self.line_done = true;
                    return Ok(true);
                }
            }
            self.read.consume(take);
            if !self.discarding
                && let Some(scan) = self.oversized.take()
            {
                // The over-long line ended: an answer to one of our requests becomes an error for that request.
                match scan.answer() {
                    Some(answer) => {
                        tracing::warn!(
                            bytes = scan.len(),
                            max_line_length = MAX_LINE_LENGTH,
                            "an answer exceeded the maximum line length: failing its request"
                        );
                        self.line = answer;
                        self.line_done = true;
                        return Ok(true);
                    }
                    None => tracing::warn!(
                        bytes = scan.len(),
                        "a discarded over-long line carried no readable id of a request of ours"
                    ),
                }
            }
        }
    }

    /// A handle that writes whole messages to this transport's stream beside rmcp's own sends: same lock, same
    /// framing, so lines never interleave. Writing after [`Transport::close`] fails with `NotConnected`.
    pub fn writer(&self) -> LineWriter<W> {
        LineWriter {
            write: self.write.clone(),
        }
    }
}

/// The answer to a line that parsed as JSON but is not a valid message (as rmcp writes it: no id).
async fn send_invalid_request<Role: ServiceRole, W: AsyncWrite + Unpin>(
    write: &tokio::sync::Mutex<Option<W>>,
) -> std::io::Result<()> {
    let message = TxJsonRpcMessage::<Role>::error(ErrorData::invalid_request("Invalid request", None), None);
    write_message(write, &message).await
}

/// Dropping the transport closes the write half, as `close` does, even while [`LineWriter`]s exist: rmcp drops a
/// transport whose handshake failed without closing it, and a child must see its stdin end to exit. (Should a
/// writer be mid-line at that moment, the half closes when the last handle goes.)
impl<Role, R, W> Drop for LineTransport<Role, R, W> {
    fn drop(&mut self) {
        if let Ok(mut w) = self.write.try_lock() {
            drop(w.take());
        }
    }
}

/// Decodes one line (no `\n`) the way [`LineTransport`]'s `receive` does. `Err` carries why a line is skipped, and
/// whether it is owed an `Invalid request` answer.
pub fn decode_line<Role: FastDecode>(line: &[u8]) -> Result<RxJsonRpcMessage<Role>, Skip> {
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    if let Some(message) = Role::fast_decode(line) {
        return Ok(message);
    }
    decode_general::<Role>(line)
}

/// Why a line produced no message.
#[derive(Debug)]
pub enum Skip {
    /// Not JSON (or cut short): ignored.
    Unparsable(serde_json::Error),
    /// A notification this side does not know: ignored.
    UnknownNotification(serde_json::Error),
    /// JSON, but not a valid message: answered with `Invalid request`.
    Invalid(serde_json::Error),
}

fn decode_general<Role: ServiceRole>(line: &[u8]) -> Result<RxJsonRpcMessage<Role>, Skip> {
    let e = match serde_json::from_slice::<RxJsonRpcMessage<Role>>(line) {
        Ok(message) => return Ok(message),
        Err(e) => e,
    };
    match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => Err(Skip::Unparsable(e)),
        serde_json::error::Category::Data | serde_json::error::Category::Io => {
            let shape = serde_json::from_slice::<Shape<'_>>(line).ok();
            if shape.is_some_and(|s| s.method.is_some() && !s.id) {
                Err(Skip::UnknownNotification(e))
            } else {
                Err(Skip::Invalid(e))
            }
        }
    }
}

/// Whether `line` is a JSON object with both `method` and `id`: a request, if a malformed one.
fn is_request_shaped(line: &[u8]) -> bool {
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    serde_json::from_slice::<Shape<'_>>(line).is_ok_and(|s| s.method.is_some() && s.id)
}

/// See [`LineTransport::writer`].
pub struct LineWriter<W> {
    write: Arc<tokio::sync::Mutex<Option<W>>>,
}

impl<W> Clone for LineWriter<W> {
    fn clone(&self) -> Self {
        LineWriter {
            write: self.write.clone(),
        }
    }
}

impl<W> std::fmt::Debug for LineWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineWriter").finish_non_exhaustive()
    }
}

impl<W: AsyncWrite + Unpin> LineWriter<W> {
    /// Writes `message` as one line and flushes.
    pub async fn send<M: serde::Serialize>(&self, message: &M) -> std::io::Result<()> {
        write_message(&self.write, message).await
    }

    /// Writes `line`, one serialized message that must not contain a newline, plus `\n`, and flushes.
    pub async fn send_line(&self, mut line: Vec<u8>) -> std::io::Result<()> {
        line.push(b'\n');
        write_line(&self.write, &line).await
    }
}

async fn write_message<M: serde::Serialize, W: AsyncWrite + Unpin>(
    write: &tokio::sync::Mutex<Option<W>>,
    message: &M,
) -> std::io::Result<()> {
    let mut buf = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    buf.push(b'\n');
    write_line(write, &buf).await
}

async fn write_line<W: AsyncWrite + Unpin>(write: &tokio::sync::Mutex<Option<W>>, buf: &[u8]) -> std::io::Result<()> {
    let mut guard = write.lock().await;
    let w = guard
        .as_mut()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, "Transport is closed"))?;
    w.write_all(buf).await?;
    w.flush().await
}

impl<Role, R, W> Transport<Role> for LineTransport<Role, R, W>
where
    Role: FastDecode,
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "LineTransport".into()
    }

    fn send(&mut self, item: TxJsonRpcMessage<Role>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move { write_message(&write, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            if self.owe_error {
                self.owe_error = false;
                // Written on a task of its own: a `receive` dropped at this await must not leave half a line.
                let write = self.write.clone();
                let answer = tokio::spawn(async move { send_invalid_request::<Role, W>(&write).await });
                if !matches!(answer.await, Ok(Ok(()))) {
                    return None;
                }
            }
            if let Some(mut line) = self.owed.take() {
                line.push(b'\n');
                let write = self.write.clone();
                let answer = tokio::spawn(async move { write_line(&write, &line).await });
                if !matches!(answer.await, Ok(Ok(()))) {
                    return None;
                }
            }
            match self.next_line().await {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    tracing::error!(error = %e, "error reading from stream");
                    return None;
                }
            }
            if self.line.is_empty() {
                continue;
            }
            let skip = match decode_line::<Role>(&self.line) {
                Ok(message) => return Some(message),
                Err(skip) => skip,
            };
            if let Some(reject) = self.reject {
                tracing::debug!(error = ?skip, "rejecting incoming line");
                self.owed = reject(Some((&self.line, &skip)));
                continue;
            }
            let peer = self.peer.as_deref().unwrap_or("");
            match skip {
                Skip::Unparsable(e) => tracing::debug!(peer, error = %e, "ignoring unparsable incoming message"),
                Skip::UnknownNotification(e) => tracing::debug!(peer, error = %e, "ignoring unknown notification"),
                // A server's output that is not a message asks nothing of us: answering it could only confuse a
                // server still waiting for `initialize`. (The decode error may quote the line: not logged.)
                Skip::Invalid(_) if Role::IS_CLIENT && !is_request_shaped(&self.line) => {
                    let kind = if self.line.first() == Some(&b'[') {
                        "batch"
                    } else {
                        "not a message"
                    };
                    tracing::warn!(
                        server = peer,
                        kind,
                        bytes = self.line.len(),
                        "dropping a line from the server that is not a valid JSON-RPC message"
                    );
                }
                Skip::Invalid(e) => {
                    tracing::debug!(peer, error = %e, "protocol error on incoming message");
                    self.owe_error = true;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}

/// The keys rmcp classifies a message by (presence, whatever the value), and `method` when it is a string.
struct Shape<'a> {
    method: Option<String>,
    id: bool,
    /// Present whenever the key is (also when its value is `null`).
    result: Option<&'a RawValue>,
    error: bool,
}

/// An object key, told apart without allocating.
enum Key {
    Method,
    Id,
    Result,
    Error,
    Content,
    /// `structuredContent`, `isError`, `_meta`, `resultType`: the other keys of a tool result.
    ToolResult,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "method" => Key::Method,
                    "id" => Key::Id,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    "content" => Key::Content,
                    "structuredContent" | "isError" | "_meta" | "resultType" => Key::ToolResult,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

impl<'de> serde::Deserialize<'de> for Shape<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON-RPC message")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape<'de>, A::Error> {
                let mut shape = Shape {
                    method: None,
                    id: false,
                    result: None,
                    error: false,
                };
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Method => {
                            // Present but not a string: still a `method` key for the classification.
                            let raw: &RawValue = map.next_value()?;
                            shape.method = Some(serde_json::from_str::<String>(raw.get()).unwrap_or_default());
                        }
                        Key::Id => {
                            shape.id = true;
                            map.next_value::<IgnoredAny>()?;
                        }
                        Key::Result => {
                            shape.result = Some(map.next_value()?);
                        }
                        Key::Error => {
                            shape.error = true;
                            map.next_value::<IgnoredAny>()?;
                        }
                        Key::Content | Key::ToolResult | Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(shape)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// True when `raw` is an object whose keys are all tool-result keys (`content`, `structuredContent`, `isError`,
/// `_meta`, `resultType`), `content` among them: no result type before `CallToolResult` in rmcp's `ServerResult`
/// union accepts such an object (each needs a key outside this set).
fn is_plain_tool_result(raw: &RawValue) -> bool {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut content = false;
            let mut plain = true;
            while let Some(key) = map.next_key::<Key>()? {
                match key {
                    Key::Content => content = true,
                    Key::ToolResult => {}
                    _ => plain = false,
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(plain && content)
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    serde::Deserializer::deserialize_map(&mut de, V).unwrap_or(false)
}

impl FastDecode for RoleClient {
    /// A response whose result is a plain tool result (`content`, optionally `structuredContent`, `isError`,
    /// `_meta`, `resultType`): in one pass when `fast_decode::tool_result` is sure of the line, else through
    /// [`typed_tool_result`].
    fn fast_decode(line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        super::fast_decode::tool_result(line).or_else(|| typed_tool_result(line))
    }
}

/// A plain tool result the slower way: a pre-scan of the keys, then serde's derived decode of
/// `JsonRpcResponse<CallToolResult>` (content blocks of any kind).
fn typed_tool_result(line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
    let shape = serde_json::from_slice::<Shape<'_>>(line).ok()?;
    if shape.method.is_some() || shape.error || !is_plain_tool_result(shape.result?) {
        return None;
    }
    let response = serde_json::from_slice::<JsonRpcResponse<CallToolResult>>(line).ok()?;
    Some(JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc: response.jsonrpc,
        id: response.id,
        result: ServerResult::CallToolResult(response.result),
    }))
}

impl FastDecode for RoleServer {
    /// A `tools/call` request (no other request type in rmcp's `ClientRequest` union accepts that method): in one
    /// pass when `fast_decode::tool_call` is sure of the line, else through [`typed_tool_call`].
    fn fast_decode(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        super::fast_decode::tool_call(line).or_else(|| typed_tool_call(line))
    }
}

/// A `tools/call` request the slower way: a pre-scan of the keys, then serde's derived decode of
/// `JsonRpcRequest<CallToolRequest>`.
fn typed_tool_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let shape = serde_json::from_slice::<Shape<'_>>(line).ok()?;
    if shape.method.as_deref() != Some("tools/call") || !shape.id || shape.result.is_some() || shape.error {
        return None;
    }
    let request = serde_json::from_slice::<JsonRpcRequest<CallToolRequest>>(line).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest {
        jsonrpc: request.jsonrpc,
        id: request.id,
        request: ClientRequest::CallToolRequest(request.request),
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::fast_decode::corpus::{self, Fingerprint, Rng, rmcp_decode};
    use super::*;
    use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
    use tokio::io::AsyncReadExt as _;

    /// rmcp's own decode of a line, fingerprinted (see `fast_decode::corpus::Fingerprint`: `Debug`, the JSON it
    /// serializes back to, and a request's `_meta`, which `Debug` does not show).
    fn general<Role: ServiceRole>(line: &str) -> Option<String>
    where
        RxJsonRpcMessage<Role>: Fingerprint,
    {
        rmcp_decode::<Role>(line)
    }

    fn debug<M: Fingerprint>(v: Option<M>) -> Option<String> {
        v.map(|m| m.fingerprint())
    }

    /// Every order of the keys of `object` (a flat list of `"key":value` entries).
    fn permutations(entries: &[&str]) -> Vec<String> {
        if entries.len() <= 1 {
            return vec![entries.join(",")];
        }
        let mut out = Vec::new();
        for i in 0..entries.len() {
            let mut rest = entries.to_vec();
            let first = rest.remove(i);
            for tail in permutations(&rest) {
                out.push(format!("{first},{tail}"));
            }
        }
        out
    }

    /// Tool results in every shape the fast path accepts, and near misses it must leave to the general decode.
    fn tool_results() -> Vec<String> {
        let contents = [
            r#"[]"#,
            r#"[{"type":"text","text":"hi"}]"#,
            r#"[{"type":"text","text":"é \"quoted\" \u00e9","annotations":{"audience":["user"],"priority":0.5}}]"#,
            r#"[{"type":"image","data":"aGk=","mimeType":"image/png"}]"#,
            r#"[{"type":"audio","data":"aGk=","mimeType":"audio/wav"}]"#,
            r#"[{"type":"resource","resource":{"uri":"file:///a","text":"x"}}]"#,
            r#"[{"type":"resource_link","uri":"file:///a","name":"a"}]"#,
            r#"[{"type":"text","text":"a","_meta":{"k":1}},{"type":"text","text":"b"}]"#,
            r#"[{"type":"unknown-kind","x":1}]"#,
            r#"{"not":"a list"}"#,
            r#"[{"text":"hi","type":"text"}]"#,
            r#"[{"type":"text","text":"a\u0000b\ud83d\ude00\/\\","x":[1,{"y":null}]}]"#,
            r#"[{"type":"text","text":"hi","annotations":{"audience":["assistant","user"],"priority":1,"lastModified":"2025-01-12"}}]"#,
            r#"[{"type":"text","text":"hi","annotations":null,"_meta":null}]"#,
            r#"[{"type":"text","text":"hi","annotations":{"audience":["robot"]}}]"#,
            r#"[{"type":"text","text":"hi","annotations":{"audience":[{"user":null}]}}]"#,
            r#"[{"type":"text","text":"hi","annotations":[["user"],0.5]}]"#,
            r#"[{"type":"text","text":"a","text":"b"}]"#,
            r#"[{"type":"text","type":"text","text":"a"}]"#,
            r#"[{"type":0,"text":"a"}]"#,
            r#"[{"type":"text"}]"#,
            r#"[{"text":"a"}]"#,
            r#"[{"type":"image","mimeType":"image/png","data":"aGk=","_meta":{"k":[1]},"annotations":{"priority":0}}]"#,
            r#"[{"type":"image","data":"aGk="}]"#,
            r#"[{"type":"text","text":"a"},{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"resource_link","uri":"file:///a","name":"a"}]"#,
            r#"null"#,
            r#"[null]"#,
        ];
        let extras = [
            "",
            r#","isError":true"#,
            r#","isError":false"#,
            r#","isError":"yes""#,
            r#","structuredContent":{"a":[1,2]}"#,
            r#","structuredContent":null"#,
            r#","structuredContent":[1,"two",3.5,-0,18446744073709551615]"#,
            r#","structuredContent":"text""#,
            r#","isError":null"#,
            r#","isError":1"#,
            r#","_meta":{"progressToken":3}"#,
            r#","_meta":[]"#,
            r#","resultType":null"#,
            r#","resultType":"other""#,
            r#","isError":true,"isError":false"#,
            r#","\u0069sError":true"#,
            r#","_meta":null"#,
            r#","resultType":"complete""#,
            r#","resultType":"input_required""#,
            r#","resultType":"task""#,
            r#","structuredContent":{"x":1},"isError":true,"_meta":{"a":"b"},"resultType":"complete""#,
            // Not plain: left to the general decode.
            r#","tools":[]"#,
            r#","nextCursor":"c""#,
            r#","task":{"taskId":"t"}"#,
        ];
        let mut lines = Vec::new();
        for c in contents {
            for x in extras {
                for id in ["1", r#""abc""#, "9223372036854775808", "1.0", "null"] {
                    lines.push(format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":{c}{x}}}}}"#
                    ));
                }
            }
        }
        lines.extend([
            r#"{"jsonrpc":"2.0","result":{"content":[]}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"error":{"code":1,"message":"m"}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"method":"x"}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_string(),
            r#"{"jsonrpc":"1.0","id":1,"result":{"content":[]}}"#.to_string(),
            r#"{"id":1,"result":{"content":[]}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]},"extra":true}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{"content":[]}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[]}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#.to_string(),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":4,"method":"roots/list"}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope"}}"#.to_string(),
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}".to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"a":1}}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}} x"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}  "#.to_string(),
            r#" {"jsonrpc" : "2.0" , "id" : 1 , "result" : { "content" : [ { "type" : "text" , "text" : "hi" } ] } } "#
                .to_string(),
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}]"#.to_string(),
        ]);
        // Every order of the keys, at the top and in the result.
        let result_keys = [
            r#""content":[{"type":"text","text":"hi"}]"#,
            r#""isError":false"#,
            r#""structuredContent":{"a":1}"#,
            r#""_meta":{"k":"v"}"#,
        ];
        for result in permutations(&result_keys) {
            let top = [r#""jsonrpc":"2.0""#, r#""id":3"#, r#""extra":[1]"#];
            let result = format!(r#""result":{{{result}}}"#);
            for top in permutations(&[top[0], top[1], top[2], &result]) {
                lines.push(format!("{{{top}}}"));
            }
        }
        lines
    }

    fn tool_calls() -> Vec<String> {
        let params = [
            r#"{"name":"echo"}"#,
            r#"{"name":"echo","arguments":{"text":"hi"}}"#,
            r#"{"name":"mcp","arguments":{"tool":"x_echo","args":"{\"text\":\"hi\"}"}}"#,
            r#"{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p1"}}"#,
            r#"{"name":"echo","arguments":{},"_meta":{"progressToken":7,"other":{"a":1}}}"#,
            r#"{"name":"echo","arguments":null}"#,
            r#"{"name":"echo","arguments":[1]}"#,
            r#"{"name":"echo","task":{"ttl":1000}}"#,
            r#"{"arguments":{}}"#,
            r#"{"name":5}"#,
            r#"[]"#,
            r#"null"#,
            r#"{"_meta":null,"name":"echo"}"#,
            r#"{"_meta":{},"name":"echo"}"#,
            r#"{"_meta":5,"name":"echo"}"#,
            r#"{"name":"echo","_meta":{"a":1},"_meta":{"b":2}}"#,
            r#"{"name":"echo","name":"other"}"#,
            r#"{"name":"a\"b\\c\u00e9\ud83d\ude00","arguments":{"k":"\n\t\u0000"}}"#,
            r#"{"n\u0061me":"echo","\u005fmeta":{"progressToken":2}}"#,
            r#"{"name":"echo","arguments":{"a":1,"a":[2],"n":[1.5,-0,1e300,18446744073709551615,-9223372036854775808]}}"#,
            r#"{"name":"echo","requestState":"s"}"#,
            r#"{"name":"echo","requestState":null}"#,
            r#"{"name":"echo","requestState":5}"#,
            r#"{"name":"echo","inputResponses":null}"#,
            r#"{"name":"echo","inputResponses":{"r":{"action":"accept"}}}"#,
            r#"{"name":"echo","meta":{"x":1},"Name":"x"}"#,
        ];
        let mut lines = Vec::new();
        for p in params {
            for id in [
                "1",
                r#""r-1""#,
                "null",
                "-0",
                "1e2",
                "1.5",
                "9223372036854775807",
                "9223372036854775808",
            ] {
                lines.push(format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{p}}}"#
                ));
            }
            lines.push(format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{p}}}"#));
        }
        lines.extend([
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"result":{}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"extra":1}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"a"}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_string(),
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"a"}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}"#.to_string(),
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"_meta":{"progressToken":1}}"#
                .to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"error":null}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}} x"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}"#.to_string(),
            r#"{"jsonrpc":"2.0","id":1,"method":"Tools/call","params":{"name":"a"}}"#.to_string(),
            r#"{"jsonrpc":2.0,"id":1,"method":"tools/call","params":{"name":"a"}}"#.to_string(),
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\"}}".to_string(),
        ]);
        // Every order of the keys, at the top and in the params.
        let param_keys = [
            r#""name":"mcp""#,
            r#""arguments":{"tool":"fixture_echo","args":{"text":"hi"}}"#,
            r#""_meta":{"progressToken":"t"}"#,
            r#""task":null"#,
        ];
        for params in permutations(&param_keys) {
            let params = format!(r#""params":{{{params}}}"#);
            let top = [r#""jsonrpc":"2.0""#, r#""id":7"#, r#""method":"tools/call""#];
            for top in permutations(&[top[0], top[1], top[2], &params]) {
                lines.push(format!("{{{top}}}"));
            }
        }
        lines
    }

    /// Every line decodes to exactly what rmcp's own decode gives (or fails where it fails), and the fast paths
    /// (the one-pass decode, then the typed one) are taken for the plain shapes.
    #[test]
    fn fast_decode_agrees_with_rmcp() {
        let (mut fast, mut one_pass) = (0, 0);
        for line in tool_results() {
            let ours = debug(decode_line::<RoleClient>(line.as_bytes()).ok());
            assert_eq!(ours, general::<RoleClient>(&line), "client line {line}");
            let stripped = line.strip_prefix('\u{feff}').unwrap_or(&line);
            if let Some(m) = RoleClient::fast_decode(stripped.as_bytes()) {
                fast += 1;
                assert_eq!(debug(Some(m)), general::<RoleClient>(&line), "fast client line {line}");
            }
            if let Some(m) = super::super::fast_decode::tool_result(stripped.as_bytes()) {
                one_pass += 1;
                assert_eq!(
                    debug(Some(m)),
                    general::<RoleClient>(&line),
                    "one-pass client line {line}"
                );
            }
        }
        assert!(fast >= 1000, "the fast path took only {fast} tool results");
        assert!(one_pass >= 800, "the one-pass decode took only {one_pass} tool results");
        let (mut fast, mut one_pass) = (0, 0);
        for line in tool_calls() {
            let ours = debug(decode_line::<RoleServer>(line.as_bytes()).ok());
            assert_eq!(ours, general::<RoleServer>(&line), "server line {line}");
            let stripped = line.strip_prefix('\u{feff}').unwrap_or(&line);
            if let Some(m) = RoleServer::fast_decode(stripped.as_bytes()) {
                fast += 1;
                assert_eq!(debug(Some(m)), general::<RoleServer>(&line), "fast server line {line}");
            }
            if let Some(m) = super::super::fast_decode::tool_call(stripped.as_bytes()) {
                one_pass += 1;
                assert_eq!(
                    debug(Some(m)),
                    general::<RoleServer>(&line),
                    "one-pass server line {line}"
                );
            }
        }
        assert!(fast >= 600, "the fast path took only {fast} tool calls");
        assert!(one_pass >= 600, "the one-pass decode took only {one_pass} tool calls");
    }

    /// The generated corpus (`fast_decode::corpus`) through the whole decode: every line as rmcp decodes it.
    #[test]
    fn generated_lines_decode_like_rmcp() {
        for (line, _) in corpus::tool_results(&mut Rng::new(0x5eed_0003), 2000) {
            let ours = debug(decode_line::<RoleClient>(line.as_bytes()).ok());
            assert_eq!(ours, general::<RoleClient>(&line), "client line {line}");
        }
        for (line, _) in corpus::tool_calls(&mut Rng::new(0x5eed_0004), 2000) {
            let ours = debug(decode_line::<RoleServer>(line.as_bytes()).ok());
            assert_eq!(ours, general::<RoleServer>(&line), "server line {line}");
        }
    }

    #[test]
    fn a_plain_echo_result_takes_the_fast_path() {
        let line = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#;
        assert!(RoleClient::fast_decode(line).is_some());
        let line = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"mcp","arguments":{}}}"#;
        assert!(RoleServer::fast_decode(line).is_some());
        // A tools/list result is not a tool result.
        let line = br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#;
        assert!(RoleClient::fast_decode(line).is_none());
    }

    #[test]
    fn skipped_lines_say_why() {
        assert!(matches!(
            decode_line::<RoleClient>(b"{not json"),
            Err(Skip::Unparsable(_))
        ));
        assert!(matches!(
            decode_line::<RoleClient>(br#"{"jsonrpc":"2.0","id":1}"#),
            Err(Skip::Invalid(_))
        ));
        assert!(matches!(
            decode_line::<RoleClient>(br#"{"jsonrpc":"2.0","method":"x/unknown","params":5}"#),
            Err(Skip::UnknownNotification(_)) | Ok(_)
        ));
    }

    /// Over a real pipe pair: messages both ways, CRLF and blank lines, garbage ignored, an invalid message answered
    /// with `Invalid request`, an oversized line discarded, end of stream, and `close` closing the write side.
    #[tokio::test]
    async fn frames_like_rmcp_over_a_pipe() {
        // One stream per direction, as a child's stdin and stdout are.
        let (r, mut their_w) = tokio::io::duplex(64 * 1024);
        let (mut their_r, w) = tokio::io::duplex(64 * 1024);
        let mut t = LineTransport::<RoleClient, _, _>::new(r, w);

        let request = ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(rmcp::model::PingRequest::default()),
            rmcp::model::RequestId::Number(9),
        );
        Transport::<RoleClient>::send(&mut t, request.clone()).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = their_r.read(&mut buf).await.unwrap();
        let written = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(written.ends_with('\n'), "{written:?}");
        assert_eq!(written.matches('\n').count(), 1);
        let back: ClientJsonRpcMessage = serde_json::from_str(written.trim_end()).unwrap();
        assert_eq!(format!("{back:?}"), format!("{request:?}"));

        their_w
            .write_all(b"\r\n\ngarbage\n{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[]}}\r\n")
            .await
            .unwrap();
        let got = t.receive().await.unwrap();
        let expected: ServerJsonRpcMessage =
            serde_json::from_str(r#"{"jsonrpc":"2.0","id":5,"result":{"content":[]}}"#).unwrap();
        assert_eq!(format!("{got:?}"), format!("{expected:?}"));

        // Valid JSON from a server, not a message (a batch, an object without `method`): dropped unanswered, and
        // the next message comes through.
        their_w
            .write_all(
                b"[{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}]\n{\"jsonrpc\":\"2.0\",\"id\":6}\n[]\n42\n\
                  {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n",
            )
            .await
            .unwrap();
        let got = t.receive().await.unwrap();
        assert!(matches!(got, JsonRpcMessage::Response(ref r) if r.id == rmcp::model::RequestId::Number(7)));
        Transport::<RoleClient>::send(&mut t, request.clone()).await.unwrap();
        let n = their_r.read(&mut buf).await.unwrap();
        let next: serde_json::Value = serde_json::from_slice(&buf[..n]).unwrap();
        assert_eq!(next["method"], "ping", "only our own message was written: {next}");

        // An oversized line is dropped whole; the one after it is read.
        let big = vec![b'x'; MAX_LINE_LENGTH + 10];
        let writer = tokio::spawn(async move {
            their_w.write_all(&big).await.unwrap();
            their_w
                .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"content\":[]}}\n")
                .await
                .unwrap();
            their_w
        });
        let got = t.receive().await.unwrap();
        assert!(matches!(got, JsonRpcMessage::Response(ref r) if r.id == rmcp::model::RequestId::Number(8)));
        let their_w = writer.await.unwrap();

        // close() drops our write half: the other side reads end of stream.
        Transport::<RoleClient>::close(&mut t).await.unwrap();
        let n = their_r.read(&mut buf).await.unwrap();
        assert_eq!(n, 0);
        let err = Transport::<RoleClient>::send(&mut t, request).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);

        drop(their_w);
        assert!(t.receive().await.is_none());
    }
    /// The server side still answers a line that is JSON but not a valid message with `Invalid request`.
    #[tokio::test]
    async fn a_server_answers_an_invalid_message() {
        let (r, mut their_w) = tokio::io::duplex(64 * 1024);
        let (mut their_r, w) = tokio::io::duplex(64 * 1024);
        let mut t = LineTransport::<RoleServer, _, _>::new(r, w);
        their_w
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":6}\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let got = t.receive().await.unwrap();
        assert!(matches!(got, JsonRpcMessage::Request(ref r) if r.id == rmcp::model::RequestId::Number(7)));
        let mut buf = vec![0u8; 4096];
        let n = their_r.read(&mut buf).await.unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&buf[..n]).unwrap();
        assert_eq!(answer["error"]["message"], "Invalid request", "{answer}");
    }

    /// The writer handle shares the transport's stream: its lines and the transport's own sends arrive whole and in
    /// order, and after `close` it fails with `NotConnected` too.
    #[tokio::test]
    async fn a_writer_shares_the_stream_and_its_close() {
        let (r, _their_w) = tokio::io::duplex(64 * 1024);
        let (mut their_r, w) = tokio::io::duplex(64 * 1024);
        let mut t = LineTransport::<RoleServer, _, _>::new(r, w);
        let writer = t.writer();
        writer
            .send(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
            .await
            .unwrap();
        writer
            .send_line(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#.to_vec())
            .await
            .unwrap();
        let pong =
            ServerJsonRpcMessage::response(rmcp::model::ServerResult::empty(()), rmcp::model::RequestId::Number(3));
        Transport::<RoleServer>::send(&mut t, pong).await.unwrap();
        let mut got = Vec::new();
        while got.iter().filter(|b| **b == b'\n').count() < 3 {
            let mut buf = [0u8; 256];
            let n = their_r.read(&mut buf).await.unwrap();
            assert_ne!(n, 0, "stream ended early: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        let ids: Vec<i64> = std::str::from_utf8(&got)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [1, 2, 3]);

        Transport::<RoleServer>::close(&mut t).await.unwrap();
        let err = writer.send_line(b"{}".to_vec()).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);
        let err = writer.clone().send(&1).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);
    }
    /// rmcp's loop selects over `receive` and drops it when another event comes first: a line read only in part
    /// must survive that, and so must the lines around it.
    #[tokio::test]
    async fn a_dropped_receive_loses_no_part_of_a_line() {
        let (r, mut their_w) = tokio::io::duplex(64 * 1024);
        let (_their_r, w) = tokio::io::duplex(64 * 1024);
        let mut t = LineTransport::<RoleClient, _, _>::new(r, w);
        let text = "x".repeat(20_000); // longer than the reader's buffer, so it takes several reads
        let line = format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#);
        let (head, tail) = line.as_bytes().split_at(12_000);
        their_w.write_all(head).await.unwrap();
        // `receive` takes what is there, then waits for the rest; the other branch is ready and wins.
        let dropped = tokio::select! {
            biased;
            m = t.receive() => Some(m),
            () = std::future::ready(()) => None,
        };
        assert!(dropped.is_none(), "the line is not complete yet: {dropped:?}");
        their_w.write_all(tail).await.unwrap();
        their_w
            .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n")
            .await
            .unwrap();
        let got = t.receive().await.unwrap();
        let JsonRpcMessage::Response(r) = got else {
            panic!("not a response: {got:?}")
        };
        assert_eq!(r.id, rmcp::model::RequestId::Number(3));
        let ServerResult::CallToolResult(result) = r.result else {
            panic!("not a tool result: {:?}", r.result)
        };
        assert_eq!(result.content[0].as_text().unwrap().text, text);
        let got = t.receive().await.unwrap();
        assert!(matches!(got, JsonRpcMessage::Response(ref r) if r.id == rmcp::model::RequestId::Number(4)));
    }
    /// A transport dropped without `close` (rmcp does that when a handshake fails) still ends the other side's
    /// input, although a writer handle outlives it.
    #[tokio::test]
    async fn dropping_the_transport_closes_its_write_half_despite_writers() {
        let (r, _their_w) = tokio::io::duplex(1024);
        let (mut their_r, w) = tokio::io::duplex(1024);
        let t = LineTransport::<RoleClient, _, _>::new(r, w);
        let writer = t.writer();
        drop(t);
        let mut buf = [0u8; 16];
        assert_eq!(
            their_r.read(&mut buf).await.unwrap(),
            0,
            "the reader sees the end of the stream"
        );
        let err = writer.send_line(b"{}".to_vec()).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotConnected);
    }
}
