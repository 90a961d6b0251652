//! `pimcp-run`'s stdio fast path for host `tools/call` requests: a [`Transport`] around pimcp's [`LineTransport`]
//! that answers a host's tool calls itself, beside rmcp's service loop, and hands every other message to rmcp.
//!
//! rmcp 3.11 serves each request by spawning a task holding a ~25 KB future (the dispatch over every request type),
//! building a `RequestContext`, sending the result back to its loop over a channel and writing it from there as a
//! `ServerResult`: about half of the instructions a proxied call costs `pimcp-run`. [`FastCalls`] reads the host's
//! lines on a task of its own and takes each decoded `tools/call` of an initialized session itself: it builds the
//! same `RequestContext` rmcp would (the session's peer,
//! a cancellation token, the request's `_meta` with its progress token, its extensions), runs the same handler
//! ([`ProxyServer`]'s `call_tool`, so `with_caller`, approvals, progress relaying, the drain counter and the
//! `proxy_request` span are unchanged) on its own task, and writes the answer as one line through the transport's
//! [`LineWriter`] (same lock and framing as rmcp's sends), serializing the `CallToolResult` directly.
//!
//! What rmcp's loop and `ServerHandler::handle_request` do for such a request, and this module does too:
//! - the result of a session negotiated before 2026-07-28 loses `resultType: "complete"` and non-object
//!   `structuredContent` (rmcp's `strip_*_for_legacy_peer`); an `InputRequiredResult` or an undeclared task becomes
//!   the same JSON-RPC error; a handler `Err` is a JSON-RPC error;
//! - `notifications/cancelled` for a fast call's id cancels its token and its answer is never written (the
//!   notification still goes on to rmcp, which finds no request of its own and runs the handler's `on_cancelled`);
//! - when the session ends, calls still running get the bound rmcp gives its own handlers (5 s after stdin's end,
//!   2 s after a cancellation), then their tokens are cancelled and the stream is closed.
//!
//! Only requests rmcp would serve with exactly that logic take this path, and only those that asked for no progress
//! (a `progressToken` call is answered by rmcp's loop, after the progress notifications queued before its answer):
//! the session was opened with `initialize`
//! at a version before 2026-07-28 and the request names no protocol version in its `_meta` (the inline 2026-07-28
//! lifecycle has per-request negotiation and metadata checks; those requests go to rmcp). Not reproduced, and not
//! observable on stdio: rmcp's task-local `ORIGINATING_REQUEST`, which tags the server→client requests a handler
//! makes with an in-memory extension that only its Streamable HTTP transport reads (stdio serializes without it).

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pimcp_actors::transport::{LineTransport, LineWriter};
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ClientNotification, ClientRequest, ErrorData, Extensions,
    GetExtensions as _, GetMeta as _, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, JsonRpcResponse,
    JsonRpcVersion2_0, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{Peer, RequestContext, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServerHandler as _};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::server::ProxyServer;

/// How long fast calls may still run after the host's stdin ended while their answers can still be read (a script
/// piping requests in and reading the answers); a host that is gone altogether has its calls cancelled at once.
pub(crate) const EOF_DRAIN: Duration = Duration::from_secs(2);
/// How often the drain after the host's stdin ended asks whether the host still reads our answers.
const HOST_GONE_POLL: Duration = Duration::from_millis(50);
/// Whether nobody reads the answers any more (the host closed its end of our stdout too).
pub(crate) type HostGone = fn() -> bool;
/// How long fast calls may still run after the session was cancelled (rmcp's bound for its own handlers).
pub(crate) const CANCEL_DRAIN: Duration = Duration::from_secs(2);

/// See the module docs. Build with [`FastCalls::new`] and serve it inside [`offering_peer`] with its
/// [`FastCalls::peer_slot`].
///
/// The host's lines are read by a task of its own, which starts fast calls itself and passes every other message
/// to rmcp over a channel in the order read. So a fast call never wakes rmcp's loop, and a line is never cut short:
/// rmcp's loop drops an unfinished `receive` whenever another event comes first, and the line transport would lose
/// the part of a line it had read (its `receive` is not cancel-safe); here `receive` is a channel's, which is.
pub(crate) struct FastCalls<W> {
    state: Arc<State<W>>,
    /// Messages for rmcp, in the order read.
    to_rmcp: tokio::sync::mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    /// Reads the host's lines until the session is cancelled, then closes the stream.
    reader: Option<tokio::task::JoinHandle<()>>,
}

/// Messages read ahead for rmcp's loop before the reader waits for it.
const READ_AHEAD: usize = 64;

/// Set once with the session's peer when the session may use the fast path.
pub(crate) type PeerSlot = Arc<OnceLock<Peer<RoleServer>>>;

struct State<W> {
    server: ProxyServer,
    writer: LineWriter<W>,
    peer: PeerSlot,
    /// Fast calls whose answer is still owed, by request id (rmcp's `local_ct_pool` for these).
    calls: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Parent of every call's token; cancelled when the session ends.
    session: CancellationToken,
    /// Fast call tasks not finished (answer written or dropped).
    running: AtomicUsize,
    idle: tokio::sync::Notify,
    /// When the host's stdin ended.
    eof: OnceLock<tokio::time::Instant>,
    /// Asked during the drain after the host's stdin ended (stdio only).
    host_gone: Option<HostGone>,
}

impl<W: AsyncWrite + Send + Unpin + 'static> FastCalls<W> {
    /// Starts reading `lines` on a task of its own (on the current tokio runtime, in the current span).
    pub(crate) fn new<R: AsyncRead + Send + Unpin + 'static>(
        server: ProxyServer,
        lines: LineTransport<RoleServer, R, W>,
        host_gone: Option<HostGone>,
    ) -> Self {
        let writer = lines.writer();
        let state = Arc::new(State {
            server,
            writer,
            peer: PeerSlot::default(),
            calls: Mutex::new(HashMap::new()),
            session: CancellationToken::new(),
            running: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            eof: OnceLock::new(),
            host_gone,
        });
        let (tx, to_rmcp) = tokio::sync::mpsc::channel(READ_AHEAD);
        let reader = tokio::spawn(read_lines(lines, state.clone(), tx).instrument(tracing::Span::current()));
        FastCalls {
            state,
            to_rmcp,
            reader: Some(reader),
        }
    }

    /// Where the session's peer goes once `initialize` is answered; until then every request goes to rmcp.
    pub(crate) fn peer_slot(&self) -> PeerSlot {
        self.state.peer.clone()
    }
}

tokio::task_local! {
    /// The peer slot of the session whose `initialize` the current task answers (see [`offering_peer`]).
    static OFFERED: PeerSlot;
}

/// Runs `serving` (one session's handshake and service) so that [`offer_peer`], called by the `initialize` handler
/// on this task, fills `slot`. rmcp answers `initialize` on the task that awaits `serve`, before its loop starts.
pub(crate) fn offering_peer<F: Future>(
    slot: PeerSlot,
    serving: F,
) -> tokio::task::futures::TaskLocalFuture<PeerSlot, F> {
    OFFERED.scope(slot, serving)
}

/// Gives `peer` to the fast path of the session being initialized on this task, if it has one.
pub(crate) fn offer_peer(peer: &Peer<RoleServer>) {
    let _ = OFFERED.try_with(|slot| slot.set(peer.clone()));
}

/// Whether rmcp would serve `request` with the plain legacy-session logic this module reproduces; the session's
/// peer if so.
fn fast_peer(slot: &PeerSlot, request: &ClientRequest) -> Option<Peer<RoleServer>> {
    let peer = slot.get()?;
    let info = peer.peer_info()?;
    let legacy = info.protocol_version.as_str() < ProtocolVersion::V_2026_07_28.as_str();
    let meta = request.get_meta();
    // A call that asked for progress stays on rmcp's path: there its answer is written by the same loop, after the
    // progress notifications already queued for the host; written from here it could overtake them.
    (legacy && meta.protocol_version().is_none() && meta.get_progress_token().is_none()).then(|| peer.clone())
}

impl<W: AsyncWrite + Send + Unpin + 'static> State<W> {
    /// Starts answering one host `tools/call` on its own task, as rmcp's loop would.
    fn start(self: &Arc<Self>, id: RequestId, mut request: ClientRequest, peer: Peer<RoleServer>) {
        // By id only: arguments and results may hold secrets (rmcp's own logs of them are filtered out by
        // pimcp-run's log filter; this module's would not be).
        tracing::debug!(%id, "received tool call (fast path)");
        // The same moves as rmcp's loop: the `_meta` first (it lives in the extensions), then the extensions.
        let mut meta = RequestMetaObject::new();
        std::mem::swap(&mut meta, request.get_meta_mut());
        let mut extensions = Extensions::new();
        std::mem::swap(&mut extensions, request.extensions_mut());
        let ClientRequest::CallToolRequest(call) = request else {
            return;
        };
        let ct = self.session.child_token();
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), ct.clone());
        let mut context = RequestContext::new(id.clone(), peer);
        context.ct = ct;
        context.meta = meta;
        context.extensions = extensions;
        self.running.fetch_add(1, Ordering::SeqCst);
        self.server.count_fast_call();
        let state = self.clone();
        // The handler's future is large (the whole call path's state machine): it is built and boxed inside the task,
        // so spawning moves a small future instead of copying the large one several times; boxed as it is created
        // (no wrapper around it holding the request a second time), it is copied once.
        let task = async move {
            let _running = Running(&state);
            let client_declared_tasks = context.client_capabilities().is_some_and(|caps| caps.supports_tasks());
            // Allocated first and written in place (`Box::pin(f())` builds `f()` on the stack and copies it).
            let handler = Box::write(Box::new_uninit(), state.server.call_tool(call.params, context));
            let result = Box::into_pin(handler).await;
            state.answer(id, result, client_declared_tasks).await;
        };
        tokio::spawn(task.instrument(tracing::Span::current()));
    }

    /// Writes the handler's `result` for request `id`, unless the request was cancelled meanwhile.
    async fn answer(&self, id: RequestId, result: Result<CallToolResponse, ErrorData>, client_declared_tasks: bool) {
        let line = match encode_answer(result, client_declared_tasks, id.clone()) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!(%id, error = %e, "cannot serialize a tool call's answer");
                return;
            }
        };
        let owed = self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
        let Some(ct) = owed else {
            tracing::debug!(%id, "dropping response for cancelled request");
            return;
        };
        ct.cancel();
        if let Err(error) = self.writer.send_line(line).await {
            if self.session.is_cancelled() {
                tracing::debug!(%id, %error, "session closed before the answer was written");
            } else {
                tracing::error!(%error, "fail to response message");
            }
        }
    }

    /// A host cancelled request `id`: a fast call's token is cancelled and its answer will not be written.
    fn cancel(&self, id: &RequestId, reason: Option<&str>) {
        let ct = self
            .calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
        if let Some(ct) = ct {
            tracing::info!(%id, reason, "cancelled");
            ct.cancel();
        }
    }

    /// Starts `message` as a fast call (`None`), or returns it for rmcp; a `notifications/cancelled` also cancels
    /// the fast call it names.
    fn route(self: &Arc<Self>, message: RxJsonRpcMessage<RoleServer>) -> Option<RxJsonRpcMessage<RoleServer>> {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest { id, request, jsonrpc })
                if matches!(request, ClientRequest::CallToolRequest(_)) =>
            {
                match fast_peer(&self.peer, &request) {
                    Some(peer) => {
                        self.start(id, request, peer);
                        None
                    }
                    None => Some(JsonRpcMessage::Request(JsonRpcRequest { jsonrpc, id, request })),
                }
            }
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(ref cancelled),
                ..
            }) => {
                if let Some(id) = &cancelled.params.request_id {
                    self.cancel(id, cancelled.params.reason.as_deref());
                }
                Some(message)
            }
            other => Some(other),
        }
    }

    async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// The reader task: each line of the host is a fast call started here or a message for rmcp's loop. At the end of
/// the stream rmcp is told (its channel closes); the stream is closed once the session is cancelled.
async fn read_lines<R, W>(
    mut lines: LineTransport<RoleServer, R, W>,
    state: Arc<State<W>>,
    to_rmcp: tokio::sync::mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
) where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let stop = state.session.clone();
    loop {
        let message = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            message = lines.receive() => message,
        };
        let Some(message) = message else {
            let _ = state.eof.set(tokio::time::Instant::now());
            drop(to_rmcp);
            stop.cancelled().await;
            break;
        };
        let Some(message) = state.route(message) else {
            continue;
        };
        let sent = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            sent = to_rmcp.send(message) => sent,
        };
        if sent.is_err() {
            // rmcp's side is gone; the session ends.
            stop.cancelled().await;
            break;
        }
    }
    if let Err(e) = Transport::<RoleServer>::close(&mut lines).await {
        tracing::debug!(error = %e, "closing the host stream failed");
    }
}

/// Counts one fast call task.
struct Running<'a, W>(&'a State<W>);

impl<W> Drop for Running<'_, W> {
    fn drop(&mut self) {
        if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The line rmcp's `handle_request` and loop would write for a legacy session's `tools/call` that returned `result`
/// (no trailing newline). A complete result is serialized directly as a `JsonRpcResponse<CallToolResult>`.
pub(crate) fn encode_answer(
    result: Result<CallToolResponse, ErrorData>,
    client_declared_tasks: bool,
    id: RequestId,
) -> serde_json::Result<Vec<u8>> {
    let result = match result {
        Ok(CallToolResponse::Complete(result)) => {
            let mut result = ServerResult::CallToolResult(result);
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            match result {
                ServerResult::CallToolResult(result) => return encode_result(result, id),
                other => Ok(other),
            }
        }
        Ok(CallToolResponse::Task(_)) if !client_declared_tasks => Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )),
        Ok(CallToolResponse::InputRequired(_)) => Err(ErrorData::invalid_request(
            "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
            None,
        )),
        Ok(response) => Ok(ServerResult::from(response)),
        Err(error) => Err(error),
    };
    let message = match result {
        Ok(result) => ServerJsonRpcMessage::response(result, id),
        Err(error) => {
            tracing::warn!(%id, code = error.code.0, "response error");
            ServerJsonRpcMessage::error(error, Some(id))
        }
    };
    serde_json::to_vec(&message)
}

fn encode_result(result: CallToolResult, id: RequestId) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&JsonRpcResponse {
        jsonrpc: JsonRpcVersion2_0,
        id,
        result,
    })
}

impl<W: AsyncWrite + Send + Unpin + 'static> Transport<RoleServer> for FastCalls<W> {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "FastCalls".into()
    }

    /// Through the line transport's writer: its lock and framing.
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.state.writer.clone();
        async move { writer.send(&item).await }
    }

    /// Cancel-safe: a channel's `recv`.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.to_rmcp.recv().await
    }

    /// Gives fast calls still running the bound rmcp gives its own handlers, cancels the rest, closes the stream.
    async fn close(&mut self) -> Result<(), Self::Error> {
        let deadline = match self.state.eof.get() {
            Some(eof) => *eof + EOF_DRAIN,
            None => tokio::time::Instant::now() + CANCEL_DRAIN,
        };
        let host_gone = async {
            match (self.state.eof.get(), self.state.host_gone) {
                (Some(_), Some(gone)) => {
                    while !gone() {
                        tokio::time::sleep(HOST_GONE_POLL).await;
                    }
                }
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            drained = tokio::time::timeout_at(deadline, self.state.wait_idle()) => if drained.is_err() {
                tracing::warn!(
                    calls = self.state.running.load(Ordering::SeqCst),
                    "timed out draining in-flight tool calls"
                );
            },
            () = host_gone => tracing::debug!(
                calls = self.state.running.load(Ordering::SeqCst),
                "the host is gone: cancelling the calls in flight"
            ),
        }
        self.state.session.cancel();
        if let Some(reader) = self.reader.take() {
            reader.await.map_err(std::io::Error::other)?;
        }
        Ok(())
    }
}

impl<W> Drop for FastCalls<W> {
    fn drop(&mut self) {
        self.state.session.cancel();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use rmcp::model::{
        ContentBlock as Content, CreateTaskResult, InputRequiredResult, MetaObject, ResultType, Task, TaskStatus,
    };
    use serde_json::json;

    /// What rmcp's path writes for the same handler outcome: `handle_request`'s mapping, then the loop's
    /// `JsonRpcMessage::response` / `error`, serialized by the line transport.
    fn rmcp_line(result: Result<CallToolResponse, ErrorData>, tasks: bool, id: RequestId) -> Vec<u8> {
        let mapped = result.and_then(|response| {
            if matches!(response, CallToolResponse::Task(_)) && !tasks {
                return Err(ErrorData::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                ));
            }
            let mut result = ServerResult::from(response);
            if matches!(result, ServerResult::InputRequiredResult(_)) {
                return Err(ErrorData::invalid_request(
                    "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                    None,
                ));
            }
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            Ok(result)
        });
        let message = match mapped {
            Ok(result) => ServerJsonRpcMessage::response(result, id),
            Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
        };
        serde_json::to_vec(&message).unwrap()
    }

    fn results() -> Vec<CallToolResult> {
        let mut with_meta = CallToolResult::success(vec![Content::text("a")]);
        let mut meta = serde_json::Map::new();
        meta.insert("pimcp/category".into(), json!("validation"));
        with_meta.meta = Some(MetaObject(meta));
        with_meta.is_error = Some(true);
        let mut structured = CallToolResult::structured(json!({ "sum": 3 }));
        structured.result_type = Some(ResultType::COMPLETE);
        let mut custom_type = CallToolResult::success(vec![]);
        custom_type.result_type = Some(ResultType::INPUT_REQUIRED);
        let non_object = CallToolResult::structured(json!([1, 2, 3]));
        let mut non_object_text = CallToolResult::success(vec![Content::text("[1,2]")]);
        non_object_text.structured_content = Some(json!([1, 2]));
        vec![
            CallToolResult::success(vec![Content::text("hi \"there\" é\n")]),
            CallToolResult::error(vec![Content::text("boom")]),
            CallToolResult::success(vec![
                Content::text("t"),
                Content::image("aGk=", "image/png"),
                Content::resource_link(rmcp::model::Resource::new("file:///a", "a")),
            ]),
            CallToolResult::success(vec![]),
            with_meta,
            structured,
            custom_type,
            non_object,
            non_object_text,
        ]
    }

    /// The fast encoding is byte for byte what rmcp writes, and decodes to the same message, for every result shape
    /// and outcome (complete results, handler errors, input-required and task responses).
    #[test]
    fn answers_are_what_rmcp_writes() {
        let mut outcomes: Vec<(Result<CallToolResponse, ErrorData>, bool)> = results()
            .into_iter()
            .map(|r| (Ok(CallToolResponse::Complete(r)), false))
            .collect();
        outcomes.push((Err(ErrorData::invalid_params("bad", Some(json!({ "x": 1 })))), false));
        outcomes.push((Err(ErrorData::internal_error("oops", None)), false));
        let input_required = InputRequiredResult::new(None, Some("state".into()));
        outcomes.push((Ok(CallToolResponse::InputRequired(input_required)), false));
        let task = CreateTaskResult::new(Task::new(
            "t1",
            TaskStatus::Working,
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Z",
        ));
        outcomes.push((Ok(CallToolResponse::Task(task.clone())), false));
        outcomes.push((Ok(CallToolResponse::Task(task)), true));
        for (i, (outcome, tasks)) in outcomes.into_iter().enumerate() {
            for id in [RequestId::Number(7), RequestId::String("r-1".into())] {
                let ours = encode_answer(outcome.clone(), tasks, id.clone()).unwrap();
                let theirs = rmcp_line(outcome.clone(), tasks, id);
                assert_eq!(
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&theirs),
                    "outcome {i}"
                );
                assert!(!ours.contains(&b'\n'));
                let ours: rmcp::model::ServerJsonRpcMessage = serde_json::from_slice(&ours).unwrap();
                let theirs: rmcp::model::ServerJsonRpcMessage = serde_json::from_slice(&theirs).unwrap();
                assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "outcome {i}");
            }
        }
    }
}
