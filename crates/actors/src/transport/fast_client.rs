//! The fast request path of line-framed client connections (child stdio, Unix sockets): requests the runtime writes
//! itself beside rmcp, and a transport wrapper under rmcp that hands their answers straight back.
//!
//! rmcp's client sends a request by queueing it to its service task, which assigns an id, spawns the write, later
//! matches the response in its loop and hands it over through a oneshot; `await_response` adds its own timeout and
//! progress bookkeeping. A proxied tool call needs none of that machinery: [`FastCalls::begin`] registers an id from
//! a range rmcp never uses (rmcp counts `u32` ids from 0; fast ids start at 2³² and stay below 2⁵³, so they survive
//! any JSON parser), the request is written with the transport's [`LineWriter`] (same lock and framing as rmcp's own
//! sends), and [`FastClient::receive`] delivers a response or error with a fast id to its [`FastRequest`] instead of
//! passing it up. `notifications/progress` for a fast request's progress token (the same number as its id) count as
//! progress on that request (they restart its timeout, as rmcp's `reset_timeout_on_progress` does) and are not
//! passed up either. Everything else goes to rmcp unchanged. A response to a fast id nobody waits for (the call was
//! cancelled or timed out) is dropped.
//!
//! The wrapper also keeps the ids of rmcp's own requests in flight (recorded as rmcp sends them, forgotten when their
//! answer comes or rmcp cancels them): a response or error whose id matches no request of either kind is stray output
//! of the server, dropped with a warning naming the server, before and after the handshake alike. (rmcp's handshake
//! would fail on it with `ConflictInitResponseId` or `UncorrelatedErrorResponse`; its service loop drops it without a
//! word.) An error without an id still goes to rmcp, which takes it for the answer to its request.
//!
//! When the stream ends, every waiting fast request learns that the connection closed, and later ones are refused;
//! at close, the wrapper first sends `notifications/cancelled` for every fast request still waiting, as
//! `CancelOnClose` does for rmcp's.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::RoleClient;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification, InputResponses,
    JsonObject, JsonRpcMessage, NumberOrString, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::transport::Transport;
use serde::Serialize;
use serde::ser::SerializeMap as _;
use serde_json::value::RawValue;
use tokio::io::AsyncWrite;
use tokio::sync::Notify;

use super::LineWriter;

/// The first fast request id: above every id rmcp's `u32` counter can produce.
pub(crate) const FIRST_FAST_ID: u64 = 1 << 32;
/// One past the last fast id: JSON numbers stay exact below 2⁵³.
const FAST_ID_END: u64 = 1 << 53;
/// The `reason` of the cancellations sent at close.
const CLOSE_REASON: &str = "the client is closing the connection";
/// The most ids of rmcp's requests kept as in flight. rmcp forgets a request whose caller gave up without cancelling
/// it; past this many, the oldest (lowest) id is forgotten too, so the set stays bounded.
const RMCP_IN_FLIGHT_MAX: usize = 4096;

/// Writing one line. It owns what it needs: a caller that stops waiting for it must not drop it half-way (that
/// would leave half a line on the stream), so it hands it to [`finish_write`] instead.
pub(crate) type LineWrite = Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + 'static>>;

/// Lets an unfinished line write complete in the background, so the stream's framing stays intact.
pub(crate) fn finish_write(write: LineWrite) {
    tokio::spawn(async move {
        if let Err(e) = write.await {
            tracing::debug!(error = %e, "a fast request line could not be written");
        }
    });
}

/// Writes one line to the connection's stream; the transport's [`LineWriter`] with its stream type erased.
trait LineSink: Send + Sync {
    fn send_line(&self, line: Vec<u8>) -> LineWrite;
}

impl<W: AsyncWrite + Send + Unpin + 'static> LineSink for LineWriter<W> {
    fn send_line(&self, line: Vec<u8>) -> LineWrite {
        let writer = self.clone();
        Box::pin(async move { writer.send_line(line).await })
    }
}

/// State shared by the wrapper (which delivers) and the request side (which registers and writes).
struct Shared {
    sink: Box<dyn LineSink>,
    next_id: AtomicU64,
    pending: Mutex<Pending>,
    /// The ids of rmcp's requests in flight on this connection.
    rmcp: Mutex<BTreeSet<IdKey>>,
    /// The server's name, for the log lines of stray output.
    server: Arc<str>,
}

/// A request id as responses match it: rmcp accepts the numeric string `"5"` as the answer to request `5`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum IdKey {
    Number(i64),
    String(String),
}

impl IdKey {
    fn of(id: &NumberOrString) -> IdKey {
        match id {
            NumberOrString::Number(n) => IdKey::Number(*n),
            NumberOrString::String(s) => s.parse().map_or_else(|_| IdKey::String(s.to_string()), IdKey::Number),
        }
    }
}

#[derive(Default)]
struct Pending {
    /// The stream ended or the transport was closed: no fast request can be answered any more.
    closed: bool,
    waiting: HashMap<u64, Arc<Slot>>,
}

/// Where the wrapper leaves what happened to one fast request, and how it wakes the request's task.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    wake: Notify,
}

#[derive(Default)]
struct SlotState {
    answer: Option<ServerJsonRpcMessage>,
    closed: bool,
    progress: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        lock(&self.pending)
    }

    /// Notes what rmcp sends: a request's id is in flight from now on, a cancellation ends the wait for one.
    fn sent_by_rmcp(&self, message: &ClientJsonRpcMessage) {
        match message {
            JsonRpcMessage::Request(r) => {
                let mut rmcp = lock(&self.rmcp);
                rmcp.insert(IdKey::of(&r.id));
                if rmcp.len() > RMCP_IN_FLIGHT_MAX {
                    rmcp.pop_first();
                }
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    lock(&self.rmcp).remove(&IdKey::of(id));
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
    }

    /// Whether `message`, a response or error to none of our fast ids, answers a request of rmcp's in flight (which
    /// it then no longer is). Other messages, and errors without an id, are rmcp's.
    fn is_rmcp_answer(&self, message: &ServerJsonRpcMessage) -> bool {
        let id = match message {
            JsonRpcMessage::Response(r) => &r.id,
            JsonRpcMessage::Error(e) => match &e.id {
                Some(id) => id,
                None => return true,
            },
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => return true,
        };
        if lock(&self.rmcp).remove(&IdKey::of(id)) {
            return true;
        }
        let kind = if matches!(message, JsonRpcMessage::Error(_)) {
            "error"
        } else {
            "response"
        };
        tracing::warn!(server = %self.server, kind, "dropping a response from the server whose id matches no request");
        false
    }

    /// Takes `message` when it belongs to a fast request (delivered, or dropped when nobody waits for it); gives it
    /// back otherwise.
    fn claim(&self, message: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        let id = match &message {
            JsonRpcMessage::Response(r) => fast_number(&r.id),
            JsonRpcMessage::Error(e) => e.id.as_ref().and_then(fast_number),
            JsonRpcMessage::Notification(n) => match &n.notification {
                ServerNotification::ProgressNotification(p) => {
                    let Some(token) = fast_number(&p.params.progress_token.0) else {
                        return Some(message);
                    };
                    if let Some(slot) = self.pending().waiting.get(&token).cloned() {
                        lock(&slot.state).progress += 1;
                        slot.wake.notify_one();
                    }
                    return None;
                }
                _ => None,
            },
            JsonRpcMessage::Request(_) => None,
        };
        let Some(id) = id else { return Some(message) };
        let slot = self.pending().waiting.remove(&id);
        match slot {
            Some(slot) => {
                lock(&slot.state).answer = Some(message);
                slot.wake.notify_one();
            }
            None => tracing::debug!(id, "dropping the answer to a fast request nobody waits for"),
        }
        None
    }

    /// Marks the connection closed, wakes every waiting request, and returns their ids.
    fn close_all(&self) -> Vec<u64> {
        let drained: Vec<(u64, Arc<Slot>)> = {
            let mut pending = self.pending();
            pending.closed = true;
            pending.waiting.drain().collect()
        };
        let mut ids = Vec::with_capacity(drained.len());
        for (id, slot) in drained {
            lock(&slot.state).closed = true;
            slot.wake.notify_one();
            ids.push(id);
        }
        ids.sort_unstable();
        ids
    }
}

/// A fast id, if `id` is one.
fn fast_number(id: &NumberOrString) -> Option<u64> {
    match id {
        NumberOrString::Number(n) => u64::try_from(*n).ok().filter(|n| *n >= FIRST_FAST_ID),
        NumberOrString::String(_) => None,
    }
}

fn request_id(id: u64) -> RequestId {
    // Fast ids are below 2⁵³, so they fit an i64.
    NumberOrString::Number(i64::try_from(id).unwrap_or(i64::MAX))
}

fn cancellation(id: u64, reason: &str) -> ClientJsonRpcMessage {
    let notification = CancelledNotification::new(CancelledNotificationParam::new(
        Some(request_id(id)),
        Some(reason.to_owned()),
    ));
    ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(notification))
}

/// Wraps a line-framed client transport (see the module docs); build with [`fast_client`].
pub(crate) struct FastClient<T> {
    inner: T,
    shared: Arc<Shared>,
}

/// The request side of a [`FastClient`] before the handshake finished; [`FastLink::ready`] turns it into
/// [`FastCalls`] once the per-request `_meta` is known.
pub(crate) struct FastLink {
    shared: Arc<Shared>,
}

/// Puts a [`FastClient`] around `inner`, the connection to `server`, writing fast requests with `writer` (from the
/// same [`super::LineTransport`]).
pub(crate) fn fast_client<T, W>(inner: T, writer: LineWriter<W>, server: &str) -> (FastClient<T>, FastLink)
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    let shared = Arc::new(Shared {
        sink: Box::new(writer),
        next_id: AtomicU64::new(FIRST_FAST_ID),
        pending: Mutex::default(),
        rmcp: Mutex::default(),
        server: server.into(),
    });
    (
        FastClient {
            inner,
            shared: shared.clone(),
        },
        FastLink { shared },
    )
}

impl FastLink {
    /// The request side, sending `meta` in every request's `_meta` (what rmcp sends on this connection: the
    /// protocol version, client info and capabilities on a 2026-07-28 connection, nothing on a legacy one) beside
    /// the progress token.
    pub(crate) fn ready(self, meta: RequestMetaObject) -> FastCalls {
        // Serialized once here: written verbatim into every request.
        let meta = meta
            .0
            .0
            .into_iter()
            .filter(|(k, _)| k != "progressToken")
            .filter_map(|(k, v)| Some((k, serde_json::value::to_raw_value(&v).ok()?)))
            .collect();
        FastCalls {
            shared: self.shared,
            meta: Arc::new(meta),
        }
    }

    /// The `_meta` rmcp adds to every request on `client`'s connection, besides the progress token.
    pub(crate) fn meta_of<S: rmcp::Service<RoleClient>>(
        client: &rmcp::service::RunningService<RoleClient, S>,
    ) -> RequestMetaObject {
        let mut meta = RequestMetaObject::default();
        if let Some(info) = client.peer_info()
            && !info.protocol_version.has_initialize()
        {
            let config = client.service().get_info();
            meta.set_protocol_version(info.protocol_version.clone());
            meta.set_client_info(config.client_info);
            meta.set_client_capabilities(config.capabilities);
        }
        meta
    }
}

/// Sends fast requests on one connection; cheap to clone.
#[derive(Clone)]
pub(crate) struct FastCalls {
    shared: Arc<Shared>,
    /// The `_meta` entries of every request besides its progress token, serialized.
    meta: Arc<Vec<(String, Box<RawValue>)>>,
}

impl std::fmt::Debug for FastCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastCalls").finish_non_exhaustive()
    }
}

/// Why [`FastCalls::begin`] gave no request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotBegun {
    /// The connection's stream ended or it was closed.
    Closed,
    /// Every fast id has been used (after 2⁵³ − 2³² requests): use rmcp's path.
    Exhausted,
}

impl FastCalls {
    /// Registers a new fast request (its answer is kept from now on, until it is dropped).
    pub(crate) fn begin(&self) -> Result<FastRequest, NotBegun> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        if id >= FAST_ID_END {
            return Err(NotBegun::Exhausted);
        }
        let slot = Arc::new(Slot::default());
        {
            let mut pending = self.shared.pending();
            if pending.closed {
                return Err(NotBegun::Closed);
            }
            pending.waiting.insert(id, slot.clone());
        }
        Ok(FastRequest {
            calls: self.clone(),
            id,
            slot,
            progress_seen: 0,
        })
    }

    /// Whether the connection's stream ended (or it was closed): the transport is dead even if rmcp's service has
    /// not noticed yet.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.pending().closed
    }

    /// Writes `notifications/cancelled` for request `id`.
    pub(crate) fn cancel(&self, id: u64, reason: &str) -> LineWrite {
        match serde_json::to_vec(&cancellation(id, reason)) {
            Ok(line) => self.shared.sink.send_line(line),
            Err(e) => Box::pin(std::future::ready(Err(std::io::Error::other(e)))),
        }
    }

    /// Fast requests waiting for their answer (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.shared.pending().waiting.len()
    }
}

/// What a fast request asks of the server.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FastAsk<'a> {
    /// `tools/call`.
    ToolCall {
        name: &'a str,
        arguments: Option<&'a JsonObject>,
        input_responses: Option<&'a InputResponses>,
        request_state: Option<&'a str>,
    },
    /// `resources/read`.
    ReadResource { uri: &'a str },
}

/// A fast request as it goes on the wire (the fields of rmcp's `CallToolRequestParams` and
/// `ReadResourceRequestParams`; a unit test compares the result with rmcp's own serialization).
#[derive(Serialize)]
struct WireRequest<'a> {
    jsonrpc: &'static str,
    id: u64,
    method: &'static str,
    params: WireParams<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireParams<'a> {
    #[serde(rename = "_meta")]
    meta: WireMeta<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uri: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a JsonObject>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_responses: Option<&'a InputResponses>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_state: Option<&'a str>,
}

/// The connection's per-request `_meta` entries plus the progress token.
struct WireMeta<'a> {
    base: &'a [(String, Box<RawValue>)],
    progress_token: u64,
}

impl Serialize for WireMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.base.len() + 1))?;
        for (k, v) in self.base {
            map.serialize_entry(k, v)?;
        }
        map.serialize_entry("progressToken", &self.progress_token)?;
        map.end()
    }
}

/// What happened to a fast request while its task waited.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // moved once per call; boxing the answer would add an allocation per call
pub(crate) enum FastEvent {
    /// Its response or JSON-RPC error.
    Answer(ServerJsonRpcMessage),
    /// The connection closed before the answer came.
    Closed,
    /// The server reported progress on it.
    Progress,
}

/// One registered fast request; dropping it forgets the request (a late answer is then dropped).
pub(crate) struct FastRequest {
    calls: FastCalls,
    id: u64,
    slot: Arc<Slot>,
    progress_seen: u64,
}

impl FastRequest {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The request's id as rmcp types it.
    #[cfg(test)]
    pub(crate) fn request_id(&self) -> RequestId {
        request_id(self.id)
    }

    /// Writes `ask` with this request's id, and its id as progress token in `_meta` beside the connection's
    /// per-request metadata: the message rmcp would send for the same request, serialized straight from borrowed
    /// parts (rmcp turns every request's params into a `serde_json::Value` tree first to merge its `_meta`).
    pub(crate) fn send(&self, ask: &FastAsk<'_>) -> LineWrite {
        match serde_json::to_vec(&self.message(ask)) {
            Ok(line) => self.calls.shared.sink.send_line(line),
            Err(e) => Box::pin(std::future::ready(Err(std::io::Error::other(e)))),
        }
    }

    fn message<'a>(&'a self, ask: &'a FastAsk<'a>) -> WireRequest<'a> {
        let meta = WireMeta {
            base: &self.calls.meta,
            progress_token: self.id,
        };
        let (method, params) = match *ask {
            FastAsk::ToolCall {
                name,
                arguments,
                input_responses,
                request_state,
            } => (
                "tools/call",
                WireParams {
                    meta,
                    name: Some(name),
                    uri: None,
                    arguments,
                    input_responses,
                    request_state,
                },
            ),
            FastAsk::ReadResource { uri } => (
                "resources/read",
                WireParams {
                    meta,
                    name: None,
                    uri: Some(uri),
                    arguments: None,
                    input_responses: None,
                    request_state: None,
                },
            ),
        };
        WireRequest {
            jsonrpc: "2.0",
            id: self.id,
            method,
            params,
        }
    }

    /// Waits for the next thing that happens to this request. Cancel-safe.
    pub(crate) async fn next(&mut self) -> FastEvent {
        loop {
            {
                let mut state = lock(&self.slot.state);
                if let Some(answer) = state.answer.take() {
                    return FastEvent::Answer(answer);
                }
                if state.closed {
                    return FastEvent::Closed;
                }
                if state.progress != self.progress_seen {
                    self.progress_seen = state.progress;
                    return FastEvent::Progress;
                }
            }
            self.slot.wake.notified().await;
        }
    }
}

impl Drop for FastRequest {
    fn drop(&mut self) {
        self.calls.shared.pending().waiting.remove(&self.id);
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for FastClient<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Before the write: the answer may come before the write's future is polled again.
        self.shared.sent_by_rmcp(&item);
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let Some(message) = self.inner.receive().await else {
                self.shared.close_all();
                return None;
            };
            if let Some(message) = self.shared.claim(message)
                && self.shared.is_rmcp_answer(&message)
            {
                return Some(message);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let ids = self.shared.close_all();
        super::cancel_on_close::cancel_then_close(
            &mut self.inner,
            ids.into_iter().map(|id| cancellation(id, CLOSE_REASON)),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::transport::LineTransport;
    use rmcp::model::ClientRequest;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    async fn send_echo(r: &FastRequest, text: &str) {
        let args = json!({ "text": text }).as_object().cloned().unwrap();
        let ask = FastAsk::ToolCall {
            name: "echo",
            arguments: Some(&args),
            input_responses: None,
            request_state: None,
        };
        r.send(&ask).await.unwrap();
    }

    /// The per-request `_meta` of a 2026-07-28 connection.
    fn stateless_meta() -> RequestMetaObject {
        let mut meta = RequestMetaObject::default();
        meta.set_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28);
        meta.set_client_info(rmcp::model::Implementation::new("pimcp", "1.2.3"));
        meta.set_client_capabilities(rmcp::model::ClientCapabilities::default());
        meta
    }

    /// The fast wire form of every request shape equals rmcp's serialization of the same request with the same
    /// `_meta` (as JSON values: key order aside).
    #[test]
    fn the_wire_form_is_what_rmcp_sends() {
        use rmcp::model::{
            CallToolRequest, CallToolRequestParams, GetMeta as _, ProgressToken, ReadResourceRequest,
            ReadResourceRequestParams,
        };
        let args = json!({"text": "é \"q\"\n", "n": [1, 2.5, null], "o": {"k": true}})
            .as_object()
            .cloned()
            .unwrap();
        let mut responses = InputResponses::new();
        responses.insert("r1".into(), json!({"roots": []}));
        for meta in [RequestMetaObject::default(), stateless_meta()] {
            let lines = LineTransport::<RoleClient, _, _>::new(tokio::io::empty(), tokio::io::sink());
            let (_client, link) = fast_client((), lines.writer(), "fx");
            let calls = link.ready(meta.clone());
            let asks = [
                FastAsk::ToolCall {
                    name: "echo",
                    arguments: None,
                    input_responses: None,
                    request_state: None,
                },
                FastAsk::ToolCall {
                    name: "echo",
                    arguments: Some(&args),
                    input_responses: None,
                    request_state: None,
                },
                FastAsk::ToolCall {
                    name: "roots",
                    arguments: Some(&args),
                    input_responses: Some(&responses),
                    request_state: Some("state-1"),
                },
                FastAsk::ReadResource {
                    uri: "fixture://readme",
                },
            ];
            for ask in asks {
                let r = calls.begin().unwrap();
                let ours = serde_json::to_value(r.message(&ask)).unwrap();
                let mut request = match ask {
                    FastAsk::ToolCall {
                        name,
                        arguments,
                        input_responses,
                        request_state,
                    } => {
                        let mut p = CallToolRequestParams::new(name.to_owned());
                        p.arguments = arguments.cloned();
                        p.input_responses = input_responses.cloned();
                        p.request_state = request_state.map(str::to_owned);
                        ClientRequest::CallToolRequest(CallToolRequest::new(p))
                    }
                    FastAsk::ReadResource { uri } => ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
                        ReadResourceRequestParams::new(uri.to_owned()),
                    )),
                };
                let m = request.get_meta_mut();
                m.extend(meta.clone());
                m.set_progress_token(ProgressToken(r.request_id()));
                let theirs = serde_json::to_value(ClientJsonRpcMessage::request(request, r.request_id())).unwrap();
                assert_eq!(ours, theirs, "{ask:?}");
            }
        }
    }

    /// A fast client over a pipe pair, with the server's ends: what we write, and where it writes to us.
    struct Rig {
        client: FastClient<LineTransport<RoleClient, tokio::io::DuplexStream, tokio::io::DuplexStream>>,
        calls: FastCalls,
        from_client: BufReader<tokio::io::DuplexStream>,
        to_client: tokio::io::DuplexStream,
    }

    fn rig(meta: RequestMetaObject) -> Rig {
        let (read, to_client) = tokio::io::duplex(64 * 1024);
        let (from_client, write) = tokio::io::duplex(64 * 1024);
        let lines = LineTransport::<RoleClient, _, _>::new(read, write);
        let writer = lines.writer();
        let (client, link) = fast_client(lines, writer, "fx");
        Rig {
            client,
            calls: link.ready(meta),
            from_client: BufReader::new(from_client),
            to_client,
        }
    }

    impl Rig {
        async fn read_line(&mut self) -> Value {
            let mut line = String::new();
            self.from_client.read_line(&mut line).await.unwrap();
            serde_json::from_str(&line).unwrap()
        }

        async fn write_line(&mut self, v: Value) {
            let mut line = serde_json::to_vec(&v).unwrap();
            line.push(b'\n');
            self.to_client.write_all(&line).await.unwrap();
        }
    }

    fn result(id: Value, text: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
    }

    /// Fast requests go out with ids (and progress tokens) above rmcp's `u32` range and the connection's `_meta`;
    /// their answers, errors and progress reach them and not rmcp; rmcp's own messages and ids pass through; an
    /// answer to a fast id nobody waits for is dropped.
    #[tokio::test]
    async fn fast_answers_reach_their_requests_and_everything_else_reaches_rmcp() {
        let mut meta = RequestMetaObject::default();
        meta.set_protocol_version(rmcp::model::ProtocolVersion::V_2026_07_28);
        let mut rig = rig(meta);
        let mut a = rig.calls.begin().unwrap();
        let mut b = rig.calls.begin().unwrap();
        assert_eq!(a.id(), FIRST_FAST_ID);
        assert_eq!(b.id(), FIRST_FAST_ID + 1);
        send_echo(&a, "a").await;
        send_echo(&b, "b").await;
        // rmcp's own send goes through the same stream.
        let ping = ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(rmcp::model::PingRequest::default()),
            RequestId::Number(i64::from(u32::MAX)),
        );
        rig.client.send(ping).await.unwrap();
        let sent_a = rig.read_line().await;
        let sent_b = rig.read_line().await;
        let sent_ping = rig.read_line().await;
        assert_eq!(sent_a["id"], json!(FIRST_FAST_ID));
        assert_eq!(sent_a["method"], "tools/call");
        assert_eq!(sent_a["params"]["name"], "echo");
        assert_eq!(sent_a["params"]["arguments"], json!({"text": "a"}));
        assert_eq!(sent_a["params"]["_meta"]["progressToken"], json!(FIRST_FAST_ID));
        assert_eq!(
            sent_a["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28",
            "{sent_a}"
        );
        assert_eq!(sent_b["id"], json!(FIRST_FAST_ID + 1));
        assert_eq!(sent_ping["id"], json!(u32::MAX), "{sent_ping}");

        // Out of order, with rmcp's traffic and strays in between: answers to ids nobody asked for (rmcp's range,
        // strings, a second answer to one request) never reach rmcp.
        rig.write_line(result(json!(FIRST_FAST_ID + 1), "B")).await;
        rig.write_line(result(json!(7), "stray")).await;
        rig.write_line(json!({"jsonrpc": "2.0", "id": 8, "error": {"code": -32603, "message": "stray"}}))
            .await;
        rig.write_line(result(json!(u32::MAX.to_string()), "rmcp's")).await;
        rig.write_line(result(json!(u32::MAX), "again")).await;
        rig.write_line(result(json!(FIRST_FAST_ID + 99), "nobody's")).await;
        rig.write_line(json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": FIRST_FAST_ID, "progress": 1}}))
            .await;
        rig.write_line(json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 3, "progress": 1}}))
            .await;
        rig.write_line(json!({"jsonrpc": "2.0", "id": FIRST_FAST_ID, "error": {"code": -32602, "message": "bad"}}))
            .await;
        rig.write_line(json!({"jsonrpc": "2.0", "id": "x", "result": {}})).await;
        rig.write_line(json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}))
            .await;

        let got = rig.client.receive().await.unwrap();
        assert!(
            matches!(got, JsonRpcMessage::Response(ref r) if r.id == RequestId::String(u32::MAX.to_string().into())),
            "{got:?}"
        );
        let got = rig.client.receive().await.unwrap();
        assert!(
            matches!(got, JsonRpcMessage::Notification(ref n) if matches!(&n.notification,
                ServerNotification::ProgressNotification(p) if p.params.progress_token.0 == NumberOrString::Number(3))),
            "{got:?}"
        );
        // The fast progress (read before the token-3 one) has reached `a`; its error is not read yet.
        assert!(matches!(a.next().await, FastEvent::Progress));
        let got = rig.client.receive().await.unwrap();
        assert!(matches!(got, JsonRpcMessage::Error(ref e) if e.id.is_none()), "{got:?}");
        match b.next().await {
            FastEvent::Answer(JsonRpcMessage::Response(r)) => assert_eq!(r.id, b.request_id()),
            other => panic!("{other:?}"),
        }
        match a.next().await {
            FastEvent::Answer(JsonRpcMessage::Error(e)) => assert_eq!(e.error.code.0, -32602),
            other => panic!("{other:?}"),
        }
        drop((a, b));
        assert_eq!(rig.calls.waiting(), 0);
    }

    /// End of stream wakes every waiting fast request with `Closed` and refuses new ones; `close` sends
    /// `notifications/cancelled` for the requests still waiting, then closes the stream.
    #[tokio::test]
    async fn end_of_stream_fails_waiting_requests_and_close_cancels_them() {
        let mut rig = rig(RequestMetaObject::default());
        let mut waiting = rig.calls.begin().unwrap();
        send_echo(&waiting, "x").await;
        let sent = rig.read_line().await;
        assert!(
            sent["params"]["_meta"]
                .get("io.modelcontextprotocol/protocolVersion")
                .is_none(),
            "{sent}"
        );
        let Rig {
            mut client,
            calls,
            from_client,
            to_client,
        } = rig;
        drop(to_client);
        assert!(client.receive().await.is_none());
        assert!(matches!(waiting.next().await, FastEvent::Closed));
        assert_eq!(calls.begin().err(), Some(NotBegun::Closed));

        // A second connection: close with one request waiting.
        let mut rig2 = rig_with_waiting().await;
        let id = rig2.1;
        rig2.0.client.close().await.unwrap();
        let cancel = rig2.0.read_line().await;
        assert_eq!(cancel["method"], "notifications/cancelled");
        assert_eq!(cancel["params"]["requestId"], json!(id));
        let mut rest = String::new();
        assert_eq!(
            rig2.0.from_client.read_line(&mut rest).await.unwrap(),
            0,
            "closed after: {rest}"
        );
        assert!(matches!(rig2.2.next().await, FastEvent::Closed));
        drop(from_client);
    }

    async fn rig_with_waiting() -> (Rig, u64, FastRequest) {
        let mut rig = rig(RequestMetaObject::default());
        let r = rig.calls.begin().unwrap();
        send_echo(&r, "y").await;
        let _ = rig.read_line().await;
        let id = r.id();
        (rig, id, r)
    }

    /// A request rmcp cancelled is no longer in flight: a late answer to it is dropped, while the answer to a
    /// request still in flight reaches rmcp, once.
    #[tokio::test]
    async fn answers_to_requests_rmcp_cancelled_are_dropped() {
        let mut rig = rig(RequestMetaObject::default());
        for id in [3, 4] {
            let ping = ClientJsonRpcMessage::request(
                ClientRequest::PingRequest(rmcp::model::PingRequest::default()),
                RequestId::Number(id),
            );
            rig.client.send(ping).await.unwrap();
        }
        rig.client.send(cancellation_of(3)).await.unwrap();
        rig.write_line(result(json!(3), "late")).await;
        rig.write_line(result(json!(4), "answer")).await;
        rig.write_line(result(json!(4), "twice")).await;
        rig.write_line(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
            .await;
        let got = rig.client.receive().await.unwrap();
        assert!(
            matches!(got, JsonRpcMessage::Response(ref r) if r.id == RequestId::Number(4)),
            "{got:?}"
        );
        let got = rig.client.receive().await.unwrap();
        assert!(matches!(got, JsonRpcMessage::Notification(_)), "{got:?}");
    }

    fn cancellation_of(id: i64) -> ClientJsonRpcMessage {
        let notification =
            CancelledNotification::new(CancelledNotificationParam::new(Some(RequestId::Number(id)), None));
        ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(notification))
    }

    #[test]
    fn fast_ids_are_told_apart_from_rmcps() {
        assert_eq!(fast_number(&NumberOrString::Number(0)), None);
        assert_eq!(fast_number(&NumberOrString::Number(i64::from(u32::MAX))), None);
        assert_eq!(fast_number(&NumberOrString::Number(-1)), None);
        assert_eq!(fast_number(&NumberOrString::String("4294967296".into())), None);
        assert_eq!(fast_number(&NumberOrString::Number(1 << 32)), Some(FIRST_FAST_ID));
        const { assert!(FAST_ID_END <= 1 << 53) };
    }
}
