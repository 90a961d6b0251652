//! The metadata-only JSONL protocol trace (`settings.trace` / per-server `trace`): a transport wrapper that
//! writes one line per JSON-RPC message a connection sends or receives — method, id, size, round-trip duration and
//! error category, never params, results, URLs, headers or tokens — into one size-capped file per runtime that
//! rotates to `<file>.1` (one old file kept).
//!
//! API boundary: the runtime builds one [`TraceSink`] from the settings and the agent directory; each connect attempt
//! of a server with tracing on carries a [`ProtocolTrace`] in its `ConnectSpec`, and the transport wraps itself in
//! [`TracedTransport`]. A write failure disables the sink (one warning); the protocol never waits on or fails
//! because of the trace.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use pimcp_config::{ServerConfig, TraceSettings};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::{IntoTransport, Transport};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::transport::kind::TransportKind;

/// Name of the default trace file, inside `<agentDir>/pimcp/`.
pub const TRACE_FILE_NAME: &str = "trace.jsonl";
/// Size at which the trace file rotates when `settings.trace.maxBytes` is not set (one old file is kept, so the
/// trace takes at most twice this).
pub const DEFAULT_TRACE_MAX_BYTES: u64 = 1024 * 1024;
/// Smallest accepted `maxBytes` (a smaller value is raised to it so a file holds at least a few lines).
pub const MIN_TRACE_MAX_BYTES: u64 = 512;
/// Version of the line format (the `v` field).
pub const TRACE_VERSION: u32 = 1;
/// Longest method name written as is; longer or odd-looking names are replaced.
const MAX_METHOD_LEN: usize = 100;

/// Whether `server` is traced: its own `trace` wins (also `false`), else `settings.trace.enabled`.
pub fn trace_enabled(settings: &TraceSettings, server: &ServerConfig) -> bool {
    server.trace.unwrap_or(settings.enabled)
}

/// The trace file of one runtime: opened on the first line, appended with `O_APPEND`, mode 0600, rotated to
/// `<file>.1` once the next line would pass the cap. Several processes may share the file: rotation happens under
/// an exclusive lock on the current file, and a writer whose file was rotated away reopens the path.
#[derive(Clone)]
pub struct TraceSink {
    inner: Arc<SinkInner>,
}

struct SinkInner {
    path: PathBuf,
    max_bytes: u64,
    file: Mutex<Option<OpenFile>>,
    disabled: AtomicBool,
}

struct OpenFile {
    file: File,
    ino: u64,
}

impl std::fmt::Debug for TraceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceSink")
            .field("path", &self.inner.path)
            .field("max_bytes", &self.inner.max_bytes)
            .finish_non_exhaustive()
    }
}

impl TraceSink {
    /// A sink writing `path`, rotating at `max_bytes` (at least [`MIN_TRACE_MAX_BYTES`]). Nothing is created until
    /// the first line.
    pub fn new(path: impl Into<PathBuf>, max_bytes: u64) -> TraceSink {
        TraceSink {
            inner: Arc::new(SinkInner {
                path: path.into(),
                max_bytes: max_bytes.max(MIN_TRACE_MAX_BYTES),
                file: Mutex::new(None),
                disabled: AtomicBool::new(false),
            }),
        }
    }

    /// The sink `settings.trace` asks for: `file` (already absolute after config loading) or
    /// `<agent_dir>/pimcp/trace.jsonl`, `maxBytes` or [`DEFAULT_TRACE_MAX_BYTES`].
    pub fn from_settings(settings: &TraceSettings, agent_dir: &Path) -> TraceSink {
        let path = settings
            .file
            .clone()
            .unwrap_or_else(|| agent_dir.join("pimcp").join(TRACE_FILE_NAME));
        TraceSink::new(path, settings.max_bytes.unwrap_or(DEFAULT_TRACE_MAX_BYTES))
    }

    /// The trace file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Where the previous file goes on rotation (`<file>.1`).
    pub fn rotated_path(&self) -> PathBuf {
        let mut name = self.inner.path.clone().into_os_string();
        name.push(".1");
        PathBuf::from(name)
    }

    /// The size at which the file rotates.
    pub fn max_bytes(&self) -> u64 {
        self.inner.max_bytes
    }

    /// Appends one line (without its newline); on an I/O error the sink turns itself off with one warning.
    fn write_line(&self, mut line: Vec<u8>) {
        if self.inner.disabled.load(Ordering::Relaxed) {
            return;
        }
        line.push(b'\n');
        let mut slot = match self.inner.file.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Err(e) = self.append(&mut slot, &line) {
            *slot = None;
            if !self.inner.disabled.swap(true, Ordering::Relaxed) {
                tracing::warn!(path = %self.inner.path.display(), error = %e, "protocol trace disabled: cannot write the trace file");
            }
        }
    }

    fn append(&self, slot: &mut MutexGuard<'_, Option<OpenFile>>, line: &[u8]) -> std::io::Result<()> {
        // A few rounds at most: each one either writes or (re)opens because the path changed under us.
        for _ in 0..4 {
            if slot.is_none() {
                **slot = Some(open_append(&self.inner.path)?);
            }
            let Some(open) = slot.as_mut() else { continue };
            fs4::FileExt::lock(&open.file)?;
            let outcome = self.append_locked(open, line);
            let _ = fs4::FileExt::unlock(&open.file);
            match outcome? {
                Appended::Done => return Ok(()),
                Appended::Reopen => **slot = None,
                Appended::Rotated(fresh) => **slot = Some(fresh),
            }
        }
        Err(std::io::Error::other("the trace file keeps changing under the writer"))
    }

    /// With the lock held: write when `open` is still the file at the path, rotate first when the line would pass
    /// the cap.
    fn append_locked(&self, open: &mut OpenFile, line: &[u8]) -> std::io::Result<Appended> {
        let current = match std::fs::metadata(&self.inner.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Appended::Reopen),
            Err(e) => return Err(e),
        };
        if pimcp_config::private_fs::identity(&current) != open.ino {
            return Ok(Appended::Reopen);
        }
        let len = current.len();
        if len > 0 && len + line.len() as u64 > self.inner.max_bytes {
            std::fs::rename(&self.inner.path, self.rotated_path())?;
            let mut fresh = open_append(&self.inner.path)?;
            fs4::FileExt::lock(&fresh.file)?;
            let written = fresh.file.write_all(line);
            let _ = fs4::FileExt::unlock(&fresh.file);
            written?;
            return Ok(Appended::Rotated(fresh));
        }
        open.file.write_all(line)?;
        Ok(Appended::Done)
    }
}

enum Appended {
    Done,
    Reopen,
    Rotated(OpenFile),
}

fn open_append(path: &Path) -> std::io::Result<OpenFile> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        pimcp_config::private_fs::dir(std::fs::DirBuilder::new().recursive(true)).create(parent)?;
    }
    let file = pimcp_config::private_fs::file(std::fs::OpenOptions::new().append(true).create(true)).open(path)?;
    // A file that already existed keeps its mode from creation; make sure it is private.
    pimcp_config::private_fs::restrict(&file)?;
    Ok(OpenFile {
        ino: pimcp_config::private_fs::identity(&file.metadata()?),
        file,
    })
}

/// What one server's connect attempts need to trace: the runtime's sink and the server's name.
#[derive(Clone, Debug)]
pub struct ProtocolTrace {
    sink: TraceSink,
    server: Arc<str>,
}

impl ProtocolTrace {
    /// The trace of one server's connection, written to `sink`.
    pub fn new(sink: TraceSink, server: &str) -> ProtocolTrace {
        ProtocolTrace {
            sink,
            server: server.into(),
        }
    }

    /// `Some` when `server` is traced (see [`trace_enabled`]).
    pub fn for_server(sink: &TraceSink, settings: &TraceSettings, server: &ServerConfig) -> Option<ProtocolTrace> {
        trace_enabled(settings, server).then(|| ProtocolTrace::new(sink.clone(), &server.name))
    }

    /// The recorder of one connection over `transport`.
    pub(crate) fn connection(&self, transport: TransportKind) -> ConnTrace {
        ConnTrace {
            sink: self.sink.clone(),
            server: self.server.clone(),
            transport,
            pending: Arc::new(Mutex::new(Pending::default())),
        }
    }
}

/// Requests waiting for their response, per direction.
#[derive(Default)]
struct Pending {
    /// Our requests to the server: id → (method, sent at).
    outbound: HashMap<IdKey, (String, Instant)>,
    /// The server's requests to us (sampling, elicitation, roots, ping).
    inbound: HashMap<IdKey, (String, Instant)>,
}

/// A JSON-RPC id as a map key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum IdKey {
    Number(i64),
    String(String),
}

impl IdKey {
    fn from_json(v: &serde_json::Value) -> Option<IdKey> {
        match v {
            serde_json::Value::Number(n) => n.as_i64().map(IdKey::Number),
            serde_json::Value::String(s) => Some(IdKey::String(s.clone())),
            _ => None,
        }
    }

    /// Numbers as they are; strings (which a server could fill with anything) only as a short hash that still
    /// pairs a request with its response.
    fn to_json(&self) -> serde_json::Value {
        match self {
            IdKey::Number(n) => serde_json::Value::from(*n),
            IdKey::String(s) => {
                let digest = sha2::Sha256::digest(s.as_bytes());
                serde_json::Value::from(format!("sha256:{}", &hex::encode(digest)[..12]))
            }
        }
    }
}

/// The only parts of a message the trace ever reads. Everything else (params, results, error messages) is skipped
/// by the deserializer and never reaches the line.
#[derive(Deserialize)]
struct Peek {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    error: Option<PeekError>,
    #[serde(default)]
    result: Option<PeekResult>,
    #[serde(default)]
    params: Option<PeekParams>,
}

#[derive(Deserialize)]
struct PeekError {
    code: i64,
}

#[derive(Deserialize)]
struct PeekResult {
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
}

#[derive(Deserialize)]
struct PeekParams {
    #[serde(default, rename = "requestId")]
    request_id: Option<serde_json::Value>,
}

/// Which way a message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// pimcp → server.
    Out,
    /// server → pimcp.
    In,
}

/// What a message was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MessageKind {
    /// A JSON-RPC request.
    Request,
    /// A JSON-RPC result.
    Response,
    /// A JSON-RPC notification.
    Notification,
    /// A JSON-RPC error response.
    Error,
    /// Sending the message failed on the transport (it may not have reached the peer).
    SendFailed,
}

/// One line of the trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceLine {
    /// [`TRACE_VERSION`].
    pub v: u32,
    /// UTC, RFC 3339 with milliseconds.
    pub ts: String,
    /// The server's name.
    pub server: String,
    /// The transport the message went over.
    pub transport: TransportKind,
    /// Which way it went.
    pub dir: Direction,
    /// What it was.
    pub kind: MessageKind,
    /// The method (for responses: the method of the request they answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Numeric ids as sent; string ids as `sha256:<12 hex>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<serde_json::Value>,
    /// `notifications/cancelled`: the id of the cancelled request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub related_id: Option<serde_json::Value>,
    /// Size of the message as JSON.
    pub bytes: u64,
    /// Responses and errors: time since the request was sent (or received); `notifications/cancelled`: the age of
    /// the cancelled request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    /// JSON-RPC error code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// Error category: `validation` (-32602), `input-required` (-32042), `tool-error` (a result with `isError`),
    /// `connection` (send failed), `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One `mcpScript` run (`"kind": "script"`): how it ended and the tools it called, in the order they ended. Never
/// the script's code, arguments or results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptTraceLine {
    /// [`TRACE_VERSION`].
    pub v: u32,
    /// UTC, RFC 3339 with milliseconds, when the script ended.
    pub ts: String,
    /// Always `script`.
    pub kind: String,
    /// `ok`, or the error category that ended it (`script`, `timeout`, …).
    pub outcome: String,
    /// How long the script ran.
    pub duration_ms: f64,
    /// Its tool calls, in the order they ended.
    pub calls: Vec<ScriptTraceCall>,
}

/// One `tools.call` of a script.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptTraceCall {
    /// The exposed tool name.
    pub tool: String,
    /// How long the call took.
    pub duration_ms: f64,
    /// The error category when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl TraceSink {
    /// Appends one script's line.
    pub fn record_script(&self, outcome: &str, duration: std::time::Duration, calls: Vec<ScriptTraceCall>) {
        let line = ScriptTraceLine {
            v: TRACE_VERSION,
            ts: rfc3339_millis(SystemTime::now()),
            kind: "script".into(),
            outcome: outcome.into(),
            duration_ms: duration.as_secs_f64() * 1000.0,
            calls,
        };
        if let Ok(json) = serde_json::to_vec(&line) {
            self.write_line(json);
        }
    }
}

/// The recorder of one live connection.
#[derive(Clone)]
pub(crate) struct ConnTrace {
    sink: TraceSink,
    server: Arc<str>,
    transport: TransportKind,
    pending: Arc<Mutex<Pending>>,
}

impl ConnTrace {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        match self.pending.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Records a message; returns the line written (for `SendFailed` follow-ups).
    fn record<M: Serialize>(&self, dir: Direction, message: &M) -> Option<TraceLine> {
        let bytes = serde_json::to_vec(message).ok()?;
        let peek: Peek = serde_json::from_slice(&bytes).ok()?;
        let now = Instant::now();
        let id = peek.id.as_ref().and_then(IdKey::from_json);
        let method = peek.method.as_deref().map(safe_method);
        let mut line = TraceLine {
            v: TRACE_VERSION,
            ts: rfc3339_millis(SystemTime::now()),
            server: self.server.to_string(),
            transport: self.transport,
            dir,
            kind: MessageKind::Notification,
            method: None,
            id: id.as_ref().map(IdKey::to_json),
            related_id: None,
            bytes: bytes.len() as u64,
            duration_ms: None,
            error_code: None,
            error: None,
        };
        let mut guard = self.pending();
        let pending = &mut *guard;
        let (mine, theirs) = match dir {
            Direction::Out => (&mut pending.outbound, &mut pending.inbound),
            Direction::In => (&mut pending.inbound, &mut pending.outbound),
        };
        match (method, id) {
            (Some(method), Some(id)) => {
                line.kind = MessageKind::Request;
                mine.insert(id, (method.clone(), now));
                line.method = Some(method);
            }
            (Some(method), None) => {
                if method == "notifications/cancelled"
                    && let Some(related) = peek.params.and_then(|p| p.request_id)
                    && let Some(key) = IdKey::from_json(&related)
                {
                    line.related_id = Some(key.to_json());
                    // A cancellation names a request sent in the same direction; it will get no response, so
                    // close it here with its age.
                    if let Some((_, at)) = mine.remove(&key) {
                        line.duration_ms = Some(millis(now - at));
                    }
                }
                line.method = Some(method);
            }
            (None, id) => {
                // A response or error answers a request that went the other way.
                let answered = id.and_then(|k| theirs.remove(&k));
                if let Some((method, at)) = answered {
                    line.method = Some(method);
                    line.duration_ms = Some(millis(now - at));
                }
                if let Some(e) = peek.error {
                    line.kind = MessageKind::Error;
                    line.error_code = Some(e.code);
                    line.error = Some(error_category(e.code).into());
                } else {
                    line.kind = MessageKind::Response;
                    if peek.result.and_then(|r| r.is_error) == Some(true) {
                        line.error = Some("tool-error".into());
                    }
                }
            }
        }
        drop(guard);
        self.write(&line);
        Some(line)
    }

    fn send_failed(&self, sent: TraceLine) {
        let mut line = sent;
        line.ts = rfc3339_millis(SystemTime::now());
        line.kind = MessageKind::SendFailed;
        line.duration_ms = None;
        line.error = Some("connection".into());
        if let Some(id) = line.id.as_ref().and_then(IdKey::from_json) {
            self.pending().outbound.remove(&id);
        }
        self.write(&line);
    }

    fn write(&self, line: &TraceLine) {
        if let Ok(bytes) = serde_json::to_vec(line) {
            self.sink.write_line(bytes);
        }
    }
}

/// The error category of a JSON-RPC error code.
fn error_category(code: i64) -> &'static str {
    match code {
        -32602 => "validation",
        -32042 => "input-required",
        _ => "other",
    }
}

/// The method name when it looks like one (`a-z0-9/_.-$`, at most 100 characters), else `[invalid]`: a peer
/// cannot smuggle data into the trace through it.
fn safe_method(method: &str) -> String {
    let ok = !method.is_empty()
        && method.len() <= MAX_METHOD_LEN
        && method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'.' | b'-' | b'$'));
    if ok { method.to_owned() } else { "[invalid]".to_owned() }
}

fn millis(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1_000.0
}

/// `2026-07-28T12:34:56.789Z`.
fn rfc3339_millis(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A client transport that records every message it carries (when it has a recorder) and otherwise just passes
/// them through.
pub(crate) struct TracedTransport<T> {
    inner: T,
    trace: Option<ConnTrace>,
}

impl<T> TracedTransport<T> {
    pub(crate) fn new(inner: T, trace: Option<ConnTrace>) -> TracedTransport<T> {
        TracedTransport { inner, trace }
    }
}

/// Wraps anything rmcp accepts as a client transport; `trace: None` costs one branch per message.
pub(crate) fn traced<T, E, A>(
    transport: T,
    trace: Option<&ProtocolTrace>,
    kind: TransportKind,
) -> TracedTransport<impl Transport<RoleClient, Error = E> + 'static>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    TracedTransport::new(transport.into_transport(), trace.map(|t| t.connection(kind)))
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for TracedTransport<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Recorded before sending, so the request line always precedes its response.
        let sent = self
            .trace
            .as_ref()
            .and_then(|t| t.record(Direction::Out, &item).map(|line| (t.clone(), line)));
        let fut = self.inner.send(item);
        async move {
            let result = fut.await;
            if result.is_err()
                && let Some((trace, line)) = sent
            {
                trace.send_failed(line);
            }
            result
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        let trace = self.trace.clone();
        let fut = self.inner.receive();
        async move {
            let message = fut.await;
            if let (Some(trace), Some(m)) = (&trace, &message) {
                trace.record(Direction::In, m);
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
