//! The protocol pipes of a stdio server, bound to the life of the process behind them: the stream read from its
//! stdout ends once the server process has exited, or once a write to its
//! stdin failed with a broken pipe, even while another process (a grandchild) still holds stdout open.
//!
//! Without this, a grandchild that inherited the server's stdout keeps the pipe open after the process we spawned is
//! gone (killed by hand, say): no end of stream ever comes, rmcp's client stays "connected", and every call fails
//! writing to a stdin nobody reads. With it, the connection closes as after a crash: the server actor notices, tears
//! the connection down (which sweeps the process group, the grandchild with it, and reaps the server) and reconnects
//! on the next call.
//!
//! What the pipe holds when the death is noticed is still read (a last answer written before the exit is not lost);
//! the stream ends at the first read that would wait (on Windows, whose pipes cannot be read without blocking, the
//! stream ends at once). The exit is noticed on `SIGCHLD` (checked with `waitid` without reaping, so the pid stays
//! ours; a short poll on Windows), with a slow poll as a backstop; the watch ends with the reader.

use std::future::Future as _;
use std::io::Read as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::{CancellationToken, DropGuard, WaitForCancellationFutureOwned};

use crate::sys::{ChildExits, Drainable};

/// How often the exit watch checks the child even without a `SIGCHLD`.
const EXIT_BACKSTOP_POLL: Duration = Duration::from_secs(1);

/// Binds a stdio server's pipes to the life of the child `pid` (see the module docs): returns its stdout, which
/// ends once the child has exited or a write broke, and its stdin, whose broken-pipe errors count as that death.
pub(crate) fn bind<R, W>(server: &str, pid: u32, stdout: R, stdin: W) -> (UntilDead<R>, DeadOnBrokenPipe<W>)
where
    R: AsyncRead + Drainable + Unpin,
    W: AsyncWrite + Unpin,
{
    let server: Arc<str> = server.into();
    let dead = CancellationToken::new();
    let stop = CancellationToken::new();
    tokio::spawn(watch_exit(server.clone(), pid, dead.clone(), stop.clone()));
    (
        UntilDead {
            inner: stdout,
            dead: Box::pin(dead.clone().cancelled_owned()),
            drain: Drain::Live,
            _stop_watch: stop.drop_guard(),
        },
        DeadOnBrokenPipe {
            inner: stdin,
            dead,
            server,
        },
    )
}

/// Cancels `dead` once child `pid` has exited (or `stop` is cancelled first).
async fn watch_exit(server: Arc<str>, pid: u32, dead: CancellationToken, stop: CancellationToken) {
    // Registered before the first check: a `SIGCHLD` between the check and the wait is not missed.
    let mut exits = ChildExits::new();
    loop {
        if crate::sys::child_has_exited(pid).unwrap_or(false) {
            if !dead.is_cancelled() {
                tracing::debug!(server = %server, pid, "the server's process exited; ending its stdout stream");
            }
            dead.cancel();
            return;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = dead.cancelled() => return,
            () = exits.next() => {}
            () = tokio::time::sleep(EXIT_BACKSTOP_POLL) => {}
        }
    }
}

/// Where an [`UntilDead`] stands.
enum Drain {
    /// The child lives: reads go to the pipe as usual.
    Live,
    /// The child is dead: what the pipe holds is read through this duplicate of its descriptor (non-blocking, as
    /// the pipe is), up to the first read that would wait.
    Draining(std::fs::File),
    /// The stream has ended.
    Ended,
}

/// A server's stdout that ends once its process is dead (see the module docs).
pub(crate) struct UntilDead<R> {
    inner: R,
    dead: Pin<Box<WaitForCancellationFutureOwned>>,
    drain: Drain,
    /// Ends the exit watch when the stream is dropped.
    _stop_watch: DropGuard,
}

impl<R: AsyncRead + Drainable + Unpin> AsyncRead for UntilDead<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if let Drain::Live = this.drain {
            if let Poll::Ready(read) = Pin::new(&mut this.inner).poll_read(cx, buf) {
                return Poll::Ready(read);
            }
            if this.dead.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.drain = match this.inner.drain_handle() {
                Some(file) => Drain::Draining(file),
                None => Drain::Ended,
            };
        }
        let Drain::Draining(file) = &mut this.drain else {
            return Poll::Ready(Ok(()));
        };
        match file.read(buf.initialize_unfilled()) {
            Ok(0) => this.drain = Drain::Ended,
            Ok(n) => buf.advance(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // Nothing more is buffered (`WouldBlock`), or the pipe cannot be read: the stream ends here.
            Err(_) => this.drain = Drain::Ended,
        }
        Poll::Ready(Ok(()))
    }
}

/// A server's stdin whose broken-pipe errors end its stdout stream too: nobody reads what we write, so the server is
/// gone whatever still holds its stdout.
pub(crate) struct DeadOnBrokenPipe<W> {
    inner: W,
    dead: CancellationToken,
    server: Arc<str>,
}

impl<W> DeadOnBrokenPipe<W> {
    fn check<T>(&self, polled: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        if let Poll::Ready(Err(e)) = &polled
            && e.kind() == std::io::ErrorKind::BrokenPipe
            && !self.dead.is_cancelled()
        {
            tracing::info!(server = %self.server, "the server's stdin has no reader left; closing the connection");
            self.dead.cancel();
        }
        polled
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for DeadOnBrokenPipe<W> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.check(polled)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.check(polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

    /// A child whose stdout stays open after it exits (a grandchild holds it): the stream still ends, after what the
    /// child wrote before exiting; a write to its stdin then breaks, which on a live pipe would also end the stream.
    #[tokio::test]
    async fn the_stream_ends_when_the_child_exits_though_a_grandchild_holds_stdout() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "read line; echo \"got $line\"; sleep 30 & exit 0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let (stdout, mut stdin) = bind("sh", pid, child.stdout.take().unwrap(), child.stdin.take().unwrap());
        stdin.write_all(b"hello\n").await.unwrap();
        stdin.flush().await.unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let read_all = async {
            let mut got = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                got.push(line);
            }
            got
        };
        let got = tokio::time::timeout(Duration::from_secs(20), read_all)
            .await
            .expect("the stream did not end after the child exited");
        assert_eq!(got, ["got hello"]);
        let pgid = i32::try_from(pid).unwrap();
        let _ = crate::sys::signal_group(pgid, libc::SIGKILL);
        let _ = child.wait().await;
    }

    /// A broken pipe on stdin ends the stdout stream even while the child (and so the pipe's writer) lives on.
    #[tokio::test]
    async fn a_broken_pipe_on_stdin_ends_the_stream() {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "exec 0<&-; sleep 30"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id().unwrap();
        let (stdout, mut stdin) = bind("sh", pid, child.stdout.take().unwrap(), child.stdin.take().unwrap());
        // The shell closes its stdin soon after starting: write until the pipe breaks.
        let broke = async {
            loop {
                match stdin.write_all(b"x\n").await.and(stdin.flush().await) {
                    Ok(()) => tokio::time::sleep(Duration::from_millis(10)).await,
                    Err(e) => return e,
                }
            }
        };
        let e = tokio::time::timeout(Duration::from_secs(20), broke).await.unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
        let mut lines = BufReader::new(stdout).lines();
        let end = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("the stream did not end after the broken pipe");
        assert!(end.unwrap().is_none());
        let pgid = i32::try_from(pid).unwrap();
        let _ = crate::sys::signal_group(pgid, libc::SIGKILL);
        let _ = child.wait().await;
    }
}
