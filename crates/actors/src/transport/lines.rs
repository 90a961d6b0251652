//! Newline-delimited JSON-RPC over a byte stream, as an rmcp [`Transport`]: the framing of stdio and Unix-socket
//! connections, upstream (client role) and for `pimcp-run`'s host on stdio (server role).
//!
//! rmcp's own `AsyncRwTransport` drops a line over its size limit with a log line and answers a bad line without an
//! `id`; a request waiting for that line then waits for its timeout, and a host waiting for its id hangs. Here every
//! line goes through a [`LinePolicy`] of the role: a line is handed to rmcp as a message, answered on the spot
//! (the host's bad requests, with the id the line carries), or dropped; a line over the limit is reported to the
//! policy with its size and the id read from its first and last bytes (servers put `id` before or after `result`),
//! so an upstream answer that is too large fails its request at once and the connection goes on.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;

use rmcp::model::{ErrorCode, ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};

/// How many leading and trailing bytes of an oversized line are kept to find its `id`.
const ID_WINDOW: usize = 4096;

/// What a line becomes.
pub enum Vetted<Role: ServiceRole> {
    /// A message for rmcp.
    Message(RxJsonRpcMessage<Role>),
    /// No message: this line (one serialized JSON-RPC message, no newline) is written back to the peer.
    Answer(Vec<u8>),
    /// No message and no answer.
    Skip,
}

/// What a line over the limit was.
#[derive(Debug, Clone)]
pub struct Oversized {
    /// The line's length in bytes, without its newline.
    pub size: u64,
    /// The limit it exceeded.
    pub limit: usize,
    /// The message's `id` when it could be read from the line's first or last bytes.
    pub id: Option<RequestId>,
    /// Whether the line looked like a response (`"result"` or `"error"` at its start or end).
    pub response: bool,
}

impl Oversized {
    /// `"17 MiB (17825792 bytes) exceeds the 16 MiB limit of `settings.maxMessageBytes`"`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({} bytes) exceeds the {} limit of `settings.maxMessageBytes`",
            human(self.size),
            self.size,
            human(self.limit as u64)
        )
    }
}

/// A size in MiB, or KiB below 1 MiB, with one decimal when it is not whole.
fn human(bytes: u64) -> String {
    let (value, unit) = if bytes >= 1024 * 1024 {
        (bytes as f64 / (1024.0 * 1024.0), "MiB")
    } else {
        (bytes as f64 / 1024.0, "KiB")
    };
    if value.fract() == 0.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// How one role treats the lines it reads.
pub trait LinePolicy<Role: ServiceRole>: Send + 'static {
    /// A whole line (no newline, no trailing `\r`, not empty).
    fn line(&mut self, line: &[u8]) -> Vetted<Role>;
    /// A line over the limit, already discarded.
    fn oversized(&mut self, line: Oversized) -> Vetted<Role>;
    /// The input ended (or failed): no more lines.
    fn end(&mut self) {}
}

/// The upstream policy (client role): a line rmcp cannot read is dropped (logged at debug, never quoted: it may
/// carry secrets); an oversized answer becomes a JSON-RPC error for the request it answers.
#[derive(Debug, Default, Clone, Copy)]
pub struct UpstreamLines;

impl LinePolicy<rmcp::RoleClient> for UpstreamLines {
    fn line(&mut self, line: &[u8]) -> Vetted<rmcp::RoleClient> {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        match serde_json::from_slice(line) {
            Ok(message) => Vetted::Message(message),
            Err(e) => {
                tracing::debug!(error = %e, bytes = line.len(), "ignoring a line from the server that is no message");
                Vetted::Skip
            }
        }
    }

    fn oversized(&mut self, line: Oversized) -> Vetted<rmcp::RoleClient> {
        match (&line.id, line.response) {
            (Some(id), true) => {
                tracing::warn!(
                    size = line.size,
                    limit = line.limit,
                    "an answer from the server is too large"
                );
                Vetted::Message(rmcp::model::ServerJsonRpcMessage::error(
                    ErrorData::new(
                        ErrorCode::INTERNAL_ERROR,
                        format!("the server's answer of {}", line.describe()),
                        None,
                    ),
                    Some(id.clone()),
                ))
            }
            _ => {
                tracing::warn!(
                    size = line.size,
                    limit = line.limit,
                    "a message from the server is too large and is not an answer pimcp can match; dropped"
                );
                Vetted::Skip
            }
        }
    }
}

/// Newline-delimited JSON-RPC on `read`/`write` with a per-line bound, vetted by a [`LinePolicy`].
pub struct JsonLines<Role: ServiceRole, P, R, W> {
    read: BufReader<R>,
    state: LineState,
    limit: usize,
    policy: P,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    _role: PhantomData<fn() -> Role>,
}

/// Where the current line is: collecting, or discarding what is past the limit.
#[derive(Default)]
struct LineState {
    buf: Vec<u8>,
    /// Set while discarding an oversized line: its size so far, its first bytes and its last bytes.
    over: Option<Overflow>,
}

struct Overflow {
    size: u64,
    head: Vec<u8>,
    tail: VecDeque<u8>,
}

impl<Role, P, R, W> JsonLines<Role, P, R, W>
where
    Role: ServiceRole,
    P: LinePolicy<Role>,
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// A transport reading lines from `read` and writing to `write`; a line longer than `limit` bytes and every line
    /// `policy` refuses never reach rmcp.
    pub fn new(read: R, write: W, limit: usize, policy: P) -> Self {
        JsonLines {
            read: BufReader::with_capacity(64 * 1024, read),
            state: LineState::default(),
            limit,
            policy,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            _role: PhantomData,
        }
    }

    /// Reads up to the end of the next line. Cancel-safe: a partial line stays in `self.state`.
    async fn next_line(&mut self) -> std::io::Result<Option<Read>> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(None);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let chunk = &available[..newline.unwrap_or(available.len())];
            let take = newline.map_or(available.len(), |i| i + 1);
            let state = &mut self.state;
            match &mut state.over {
                Some(over) => over.push(chunk),
                None if state.buf.len() + chunk.len() > self.limit => {
                    let mut over = Overflow {
                        size: 0,
                        head: Vec::with_capacity(ID_WINDOW),
                        tail: VecDeque::with_capacity(ID_WINDOW),
                    };
                    over.push(&std::mem::take(&mut state.buf));
                    over.push(chunk);
                    state.over = Some(over);
                }
                None => state.buf.extend_from_slice(chunk),
            }
            self.read.consume(take);
            if newline.is_some() {
                return Ok(Some(match self.state.over.take() {
                    Some(over) => Read::Oversized(over),
                    None => Read::Line(std::mem::take(&mut self.state.buf)),
                }));
            }
        }
    }

    /// Writes one line to the peer on a task of its own, so that a `receive` dropped by rmcp's `select!` never
    /// leaves half an answer on the wire.
    fn answer(&self, mut line: Vec<u8>) {
        line.push(b'\n');
        let write = self.write.clone();
        tokio::spawn(async move {
            let mut write = write.lock().await;
            if let Some(w) = write.as_mut()
                && let Err(e) = async {
                    w.write_all(&line).await?;
                    w.flush().await
                }
                .await
            {
                tracing::debug!(error = %e, "cannot write an answer to a bad line");
            }
        });
    }
}

enum Read {
    Line(Vec<u8>),
    Oversized(Overflow),
}

impl Overflow {
    fn push(&mut self, bytes: &[u8]) {
        self.size += bytes.len() as u64;
        let room = ID_WINDOW.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        let keep = &bytes[bytes.len().saturating_sub(ID_WINDOW)..];
        let excess = (self.tail.len() + keep.len()).saturating_sub(ID_WINDOW);
        self.tail.drain(..excess);
        self.tail.extend(keep);
    }

    fn into_report(self, limit: usize) -> Oversized {
        let tail: Vec<u8> = self.tail.into();
        let tail = tail.strip_suffix(b"\r").unwrap_or(&tail);
        let id = head_id(&self.head).or_else(|| tail_id(tail));
        // Whichever order a server writes the members in, the large one is the result: `result` (or `error`) is
        // among the first members.
        let response = has_top_level_key(&self.head, &["result", "error"]);
        Oversized {
            size: self.size,
            limit,
            id,
            response,
        }
    }
}

impl<Role, P, R, W> Transport<Role> for JsonLines<Role, P, R, W>
where
    Role: ServiceRole,
    P: LinePolicy<Role>,
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<Role>) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut write = write.lock().await;
            let Some(w) = write.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the connection is closed",
                ));
            };
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            let vetted = match self.next_line().await {
                Ok(Some(Read::Line(line))) => {
                    let line = line.strip_suffix(b"\r").unwrap_or(&line);
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    self.policy.line(line)
                }
                Ok(Some(Read::Oversized(over))) => self.policy.oversized(over.into_report(self.limit)),
                // A last line without a newline is an incomplete message: nothing to deliver.
                Ok(None) => {
                    self.policy.end();
                    return None;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reading the connection failed");
                    self.policy.end();
                    return None;
                }
            };
            match vetted {
                Vetted::Message(message) => return Some(message),
                Vetted::Answer(line) => self.answer(line),
                Vetted::Skip => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let taken = self.write.lock().await.take();
        if let Some(mut w) = taken {
            let _ = w.shutdown().await;
        }
        Ok(())
    }
}

/// The top-level `id` of a message from its first bytes: scans the object's members at depth 1.
fn head_id(head: &[u8]) -> Option<RequestId> {
    let mut found = None;
    scan_top_level(head, |key, value| {
        if key == b"\"id\"" {
            found = parse_id(value);
            return false;
        }
        true
    });
    found
}

/// Whether one of `keys` is a top-level member in the first bytes of a message.
fn has_top_level_key(head: &[u8], keys: &[&str]) -> bool {
    let mut found = false;
    scan_top_level(head, |key, _| {
        if keys
            .iter()
            .any(|k| key.len() == k.len() + 2 && &key[1..key.len() - 1] == k.as_bytes())
        {
            found = true;
            return false;
        }
        true
    });
    found
}

/// Calls `member(key, value_start)` for each top-level member of the object at the start of `bytes` (keys as raw
/// JSON strings with quotes, values as the bytes from their start to the end of `bytes`), until it returns false or
/// the bytes end.
fn scan_top_level(bytes: &[u8], mut member: impl FnMut(&[u8], &[u8]) -> bool) {
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return;
    }
    i += 1;
    loop {
        i = skip_ws(bytes, i);
        if bytes.get(i) != Some(&b'"') {
            return;
        }
        let Some(key_end) = string_end(bytes, i) else { return };
        let key = &bytes[i..key_end];
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return;
        }
        i = skip_ws(bytes, i + 1);
        if !member(key, &bytes[i..]) {
            return;
        }
        let Some(value_end) = value_end(bytes, i) else { return };
        i = skip_ws(bytes, value_end);
        if bytes.get(i) != Some(&b',') {
            return;
        }
        i += 1;
    }
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index just past the string starting at `i` (a `"`).
fn string_end(bytes: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The index just past the JSON value starting at `i`, when it ends within `bytes`.
fn value_end(bytes: &[u8], i: usize) -> Option<usize> {
    match bytes.get(i)? {
        b'"' => string_end(bytes, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < bytes.len() {
                match bytes[j] {
                    b'"' => {
                        j = string_end(bytes, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let len = bytes[i..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
            Some(i + len)
        }
    }
}

/// An id (a string or an integer) at the start of `value`.
fn parse_id(value: &[u8]) -> Option<RequestId> {
    let end = value_end(value, 0)?;
    serde_json::from_slice::<RequestId>(&value[..end]).ok()
}

/// The top-level `id` from the last bytes of a message whose last member is `"id": …` (the JavaScript SDKs write
/// `{"result": …, "jsonrpc": "2.0", "id": 7}`).
fn tail_id(tail: &[u8]) -> Option<RequestId> {
    let text = std::str::from_utf8(tail).ok().or_else(|| {
        // The window may start inside a multi-byte character.
        (1..4).find_map(|skip| std::str::from_utf8(tail.get(skip..)?).ok())
    })?;
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    // The last member: find `"id"` followed by `:` and a value reaching the end.
    let at = body.rfind("\"id\"")?;
    let value = body[at + 4..].trim_start().strip_prefix(':')?.trim();
    let before = body[..at].trim_end();
    if !before.ends_with(',') && !before.ends_with('{') {
        return None;
    }
    serde_json::from_str::<RequestId>(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> Option<RequestId> {
        Some(RequestId::Number(n))
    }

    #[test]
    fn the_id_is_read_from_the_head_of_a_response() {
        assert_eq!(
            head_id(br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"aaaa"#),
            id(7)
        );
        assert_eq!(
            head_id(br#" { "jsonrpc" : "2.0" , "id" : "req-1" , "result": {"#),
            Some(RequestId::String("req-1".into()))
        );
        // An `id` nested in the result is not the message's id.
        assert_eq!(head_id(br#"{"jsonrpc":"2.0","result":{"id":3,"content":[{"#), None);
        assert!(has_top_level_key(br#"{"jsonrpc":"2.0","id":7,"result":{"#, &["result"]));
        assert!(!has_top_level_key(
            br#"{"jsonrpc":"2.0","method":"x","params":{"result":1"#,
            &["result"]
        ));
    }

    #[test]
    fn the_id_is_read_from_the_tail_of_a_result_first_response() {
        assert_eq!(tail_id(br#"aaaa"}]},"jsonrpc":"2.0","id":12}"#), id(12));
        assert_eq!(
            tail_id(br#"aaaa"}]},"jsonrpc":"2.0","id": "x" }"#),
            Some(RequestId::String("x".into()))
        );
        assert_eq!(tail_id(br#"aaaa"}]}}"#), None);
        assert!(has_top_level_key(
            br#"{"result":{"content":[{"type":"text","text":"aaaa"#,
            &["result"]
        ));
    }

    #[test]
    fn sizes_are_named_in_mib() {
        let o = Oversized {
            size: 17 * 1024 * 1024,
            limit: 16 * 1024 * 1024,
            id: None,
            response: true,
        };
        assert_eq!(
            o.describe(),
            "17 MiB (17825792 bytes) exceeds the 16 MiB limit of `settings.maxMessageBytes`"
        );
    }

    async fn lines(
        input: &'static [u8],
        limit: usize,
    ) -> (Vec<RxJsonRpcMessage<rmcp::RoleClient>>, tokio::io::DuplexStream) {
        let (out, peer) = tokio::io::duplex(1024);
        let mut t = JsonLines::new(input, out, limit, UpstreamLines);
        let mut got = Vec::new();
        while let Some(m) = Transport::<rmcp::RoleClient>::receive(&mut t).await {
            got.push(m);
        }
        (got, peer)
    }

    #[tokio::test]
    async fn an_oversized_answer_becomes_an_error_for_its_request_and_reading_goes_on() {
        let mut input = Vec::new();
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""#);
        input.extend(std::iter::repeat_n(b'a', 200_000));
        input.extend_from_slice(b"\"}]}}\n");
        input.extend_from_slice(b"not json\n\n");
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#);
        input.push(b'\n');
        let input: &'static [u8] = Box::leak(input.into_boxed_slice());
        let (got, _) = lines(input, 64 * 1024).await;
        assert_eq!(got.len(), 2, "{got:?}");
        let rmcp::model::JsonRpcMessage::Error(error) = &got[0] else {
            panic!("expected an error, got {:?}", got[0]);
        };
        assert_eq!(error.id, id(1));
        assert!(
            error.error.message.contains("exceeds the 64 KiB limit"),
            "{}",
            error.error.message
        );
        assert!(matches!(&got[1], rmcp::model::JsonRpcMessage::Response(r) if r.id == RequestId::Number(2)));
    }
}
