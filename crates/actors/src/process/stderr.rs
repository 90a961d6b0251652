//! The bounded tail of a server's stderr: a ring of the last 8 KiB, redacted on read, optionally echoed live.

use std::collections::VecDeque;
use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::sync::watch;

/// How much of a server's stderr is kept.
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// What replaces a secret value in a snapshot.
const REDACTED: &str = "<redacted>";

/// The last [`STDERR_TAIL_BYTES`] of a child's stderr, shared between the reader task and whoever reports errors.
/// Cloning is cheap (an `Arc`). [`StderrTail::snapshot`] never contains the server's secret values.
#[derive(Clone)]
pub struct StderrTail {
    inner: Arc<Inner>,
}

struct Inner {
    ring: Mutex<Ring>,
    /// Values replaced by `<redacted>` in snapshots (resolved env/header secrets).
    secrets: Vec<String>,
    /// Flips to true once the reader hit EOF (the child and every holder of its stderr are gone).
    closed: watch::Sender<bool>,
}

#[derive(Default)]
struct Ring {
    bytes: VecDeque<u8>,
    /// True once older bytes were dropped (the snapshot then starts at the next line boundary).
    truncated: bool,
    total: u64,
}

impl std::fmt::Debug for StderrTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StderrTail")
            .field("bytes_seen", &self.bytes_seen())
            .finish_non_exhaustive()
    }
}

impl Default for StderrTail {
    fn default() -> Self {
        StderrTail::new(Vec::new())
    }
}

impl StderrTail {
    /// An empty tail that redacts `secrets` (empty strings and very short values are ignored).
    pub fn new(secrets: Vec<String>) -> StderrTail {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| s.len() >= 3).collect();
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        let (closed, _) = watch::channel(false);
        StderrTail {
            inner: Arc::new(Inner {
                ring: Mutex::new(Ring::default()),
                secrets,
                closed,
            }),
        }
    }

    /// Appends bytes, dropping the oldest beyond [`STDERR_TAIL_BYTES`].
    pub fn push(&self, chunk: &[u8]) {
        let Ok(mut ring) = self.inner.ring.lock() else { return };
        ring.total += chunk.len() as u64;
        let chunk = if chunk.len() > STDERR_TAIL_BYTES {
            ring.truncated = true;
            ring.bytes.clear();
            &chunk[chunk.len() - STDERR_TAIL_BYTES..]
        } else {
            chunk
        };
        let overflow = (ring.bytes.len() + chunk.len()).saturating_sub(STDERR_TAIL_BYTES);
        if overflow > 0 {
            ring.truncated = true;
            ring.bytes.drain(..overflow);
        }
        ring.bytes.extend(chunk);
    }

    /// The kept tail as text: lossy UTF-8, starting at a line boundary when older output was dropped, with every
    /// secret value replaced by `<redacted>`.
    pub fn snapshot(&self) -> String {
        let (bytes, truncated) = match self.inner.ring.lock() {
            Ok(ring) => (ring.bytes.iter().copied().collect::<Vec<u8>>(), ring.truncated),
            Err(_) => return String::new(),
        };
        let start = if truncated {
            bytes.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1)
        } else {
            0
        };
        let mut text = String::from_utf8_lossy(&bytes[start..]).into_owned();
        for secret in &self.inner.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        text
    }

    /// Bytes kept right now (at most [`STDERR_TAIL_BYTES`]).
    pub fn len(&self) -> usize {
        self.inner.ring.lock().map(|r| r.bytes.len()).unwrap_or(0)
    }

    /// Whether nothing was kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes seen since the start (kept or dropped).
    pub fn bytes_seen(&self) -> u64 {
        self.inner.ring.lock().map(|r| r.total).unwrap_or(0)
    }

    /// The last `n` non-empty lines of the snapshot, joined by newlines (for one-line error summaries).
    pub fn last_lines(&self, n: usize) -> String {
        let snap = self.snapshot();
        let lines: Vec<&str> = snap.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Waits up to `timeout` until the stream hit EOF; true if it did.
    pub async fn wait_closed(&self, timeout: Duration) -> bool {
        let mut rx = self.inner.closed.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|closed| *closed))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    fn mark_closed(&self) {
        self.inner.closed.send_replace(true);
    }

    /// Spawns the task that drains `stream` into this tail; with `echo_as = Some(name)` every line is also written
    /// to our stderr as `[name] line`.
    pub(crate) fn spawn_reader<R>(&self, mut stream: R, echo_as: Option<String>)
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut buf = vec![0_u8; 8 * 1024];
            let mut partial: Vec<u8> = Vec::new();
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        tail.push(&buf[..n]);
                        if let Some(name) = &echo_as {
                            partial.extend_from_slice(&buf[..n]);
                            echo_lines(name, &mut partial, &tail.inner.secrets);
                        }
                    }
                }
            }
            tail.mark_closed();
        });
    }
}

/// Writes the complete lines of `partial` to our stderr (redacted), keeping an unterminated rest (capped).
fn echo_lines(name: &str, partial: &mut Vec<u8>, secrets: &[String]) {
    let Some(last_nl) = partial.iter().rposition(|&b| b == b'\n') else {
        if partial.len() > STDERR_TAIL_BYTES {
            partial.clear();
        }
        return;
    };
    let complete: Vec<u8> = partial.drain(..=last_nl).collect();
    let mut text = String::from_utf8_lossy(&complete).into_owned();
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), REDACTED);
        }
    }
    let mut out = std::io::stderr().lock();
    for line in text.lines() {
        let _ = writeln!(out, "[{name}] {line}");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn keeps_only_the_last_8_kib_and_starts_at_a_line() {
        let tail = StderrTail::new(vec![]);
        for i in 0..2000 {
            tail.push(format!("line {i:05}\n").as_bytes());
        }
        assert!(tail.len() <= STDERR_TAIL_BYTES);
        let snap = tail.snapshot();
        assert!(snap.starts_with("line "), "{snap:.40}");
        assert!(snap.ends_with("line 01999\n"));
        assert_eq!(tail.bytes_seen(), 2000 * 11);
    }

    #[test]
    fn a_huge_chunk_is_cut_to_the_tail() {
        let tail = StderrTail::new(vec![]);
        tail.push(&vec![b'x'; 100_000]);
        assert_eq!(tail.len(), STDERR_TAIL_BYTES);
    }

    #[test]
    fn secrets_are_redacted() {
        let tail = StderrTail::new(vec!["hunter22".into(), "ab".into()]);
        tail.push(b"token=hunter22 ab\n");
        assert_eq!(tail.snapshot(), "token=<redacted> ab\n");
        assert_eq!(tail.last_lines(1), "token=<redacted> ab");
    }
}
