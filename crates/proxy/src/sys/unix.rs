//! Unix (Linux, macOS): the host's stdin and stdout read and written on the reactor when they are pipes or sockets,
//! the stop signals (SIGINT, SIGTERM) and the reload signal (SIGHUP).

use std::io;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::StopSignal;

/// The host's stdin on the reactor.
#[derive(Debug)]
pub enum DirectStdin {
    /// A pipe.
    Pipe(tokio::net::unix::pipe::Receiver),
    /// A socket (e.g. node's `child_process` stdio).
    Socket(tokio::net::UnixStream),
}

/// The host's stdout on the reactor.
#[derive(Debug)]
pub enum DirectStdout {
    /// A pipe.
    Pipe(tokio::net::unix::pipe::Sender),
    /// A socket.
    Socket(tokio::net::UnixStream),
}

enum Kind {
    Fifo,
    Socket,
    Other,
}

fn kind_of(fd: &OwnedFd) -> io::Result<(Kind, u64, u64)> {
    let file = std::fs::File::from(fd.try_clone()?);
    let meta = file.metadata()?;
    let ft = meta.file_type();
    let kind = if ft.is_fifo() {
        Kind::Fifo
    } else if ft.is_socket() {
        Kind::Socket
    } else {
        Kind::Other
    };
    Ok((kind, meta.dev(), meta.ino()))
}

/// Stdin when it is a pipe or a socket, set non-blocking for the reactor; `None` for anything else.
pub(crate) fn direct_stdin() -> io::Result<Option<DirectStdin>> {
    let fd = io::stdin().as_fd().try_clone_to_owned()?;
    Ok(match kind_of(&fd)?.0 {
        Kind::Fifo => Some(DirectStdin::Pipe(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?)),
        Kind::Socket => Some(DirectStdin::Socket(socket(fd)?)),
        Kind::Other => None,
    })
}

/// Stdout when it is a pipe or a socket and not the same file as stderr; `None` otherwise.
pub(crate) fn direct_stdout() -> io::Result<Option<DirectStdout>> {
    let fd = io::stdout().as_fd().try_clone_to_owned()?;
    let (kind, dev, ino) = kind_of(&fd)?;
    if let Ok(err) = io::stderr().as_fd().try_clone_to_owned()
        && let Ok((_, err_dev, err_ino)) = kind_of(&err)
        && (err_dev, err_ino) == (dev, ino)
    {
        return Ok(None);
    }
    Ok(match kind {
        Kind::Fifo => Some(DirectStdout::Pipe(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)),
        Kind::Socket => Some(DirectStdout::Socket(socket(fd)?)),
        Kind::Other => None,
    })
}

fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}

impl AsyncRead for DirectStdin {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            DirectStdin::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            DirectStdin::Socket(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for DirectStdout {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            DirectStdout::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            DirectStdout::Socket(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            DirectStdout::Pipe(p) => Pin::new(p).poll_write_vectored(cx, bufs),
            DirectStdout::Socket(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            DirectStdout::Pipe(p) => p.is_write_vectored(),
            DirectStdout::Socket(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            DirectStdout::Pipe(p) => Pin::new(p).poll_flush(cx),
            DirectStdout::Socket(s) => Pin::new(s).poll_flush(cx),
        }
    }

    /// Shutting a socket down would also end the host's direction on a shared socket; closing is the process's job
    /// at exit, as for a pipe.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// SIGINT and SIGTERM, as they come.
pub struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl StopSignals {
    pub(crate) fn new() -> io::Result<StopSignals> {
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The next stop signal.
    pub async fn recv(&mut self) -> StopSignal {
        tokio::select! {
            _ = self.interrupt.recv() => StopSignal { name: "SIGINT", exit_code: 128 + 2 },
            _ = self.terminate.recv() => StopSignal { name: "SIGTERM", exit_code: 128 + 15 },
        }
    }
}

/// SIGHUP, the request to reload the configuration.
pub struct ReloadSignal(Signal);

impl ReloadSignal {
    pub(crate) fn new() -> io::Result<ReloadSignal> {
        signal(SignalKind::hangup()).map(ReloadSignal)
    }

    /// The next SIGHUP; `None` once no more can come.
    pub async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn kinds_are_told_apart() {
        let (r, _w) = std::io::pipe().unwrap();
        assert!(matches!(kind_of(&OwnedFd::from(r)).unwrap().0, Kind::Fifo));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(kind_of(&OwnedFd::from(a)).unwrap().0, Kind::Socket));
        let file = tempfile::tempfile().unwrap();
        assert!(matches!(kind_of(&OwnedFd::from(file)).unwrap().0, Kind::Other));
    }
}
