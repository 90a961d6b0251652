//! Windows: the host's stdin is relayed by a thread and stdout written through tokio's blocking pool (anonymous
//! pipes cannot be registered with the reactor), Ctrl-C, Ctrl-Break and the console's close are the stop signals,
//! and no reload signal exists.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::signal::windows::{CtrlBreak, CtrlC, CtrlClose, ctrl_break, ctrl_c, ctrl_close};

use super::StopSignal;

/// Never made: stdin is always relayed on Windows.
#[derive(Debug)]
pub enum DirectStdin {}

/// Never made: stdout always goes through the blocking pool on Windows.
#[derive(Debug)]
pub enum DirectStdout {}

pub(crate) fn direct_stdin() -> io::Result<Option<DirectStdin>> {
    Ok(None)
}

pub(crate) fn direct_stdout() -> io::Result<Option<DirectStdout>> {
    Ok(None)
}

impl AsyncRead for DirectStdin {
    fn poll_read(self: Pin<&mut Self>, _cx: &mut Context<'_>, _buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match *self.get_mut() {}
    }
}

impl AsyncWrite for DirectStdout {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, _buf: &[u8]) -> Poll<io::Result<usize>> {
        match *self.get_mut() {}
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match *self.get_mut() {}
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match *self.get_mut() {}
    }
}

/// Ctrl-C, Ctrl-Break and the console's close, as they come.
pub struct StopSignals {
    interrupt: CtrlC,
    brk: CtrlBreak,
    close: CtrlClose,
}

impl StopSignals {
    pub(crate) fn new() -> io::Result<StopSignals> {
        Ok(StopSignals {
            interrupt: ctrl_c()?,
            brk: ctrl_break()?,
            close: ctrl_close()?,
        })
    }

    /// The next stop signal.
    pub async fn recv(&mut self) -> StopSignal {
        // STATUS_CONTROL_C_EXIT, as a console program ended by Ctrl-C reports.
        const CONTROL_C_EXIT: i32 = 0xC000_013A_u32 as i32;
        tokio::select! {
            _ = self.interrupt.recv() => StopSignal { name: "Ctrl-C", exit_code: CONTROL_C_EXIT },
            _ = self.brk.recv() => StopSignal { name: "Ctrl-Break", exit_code: CONTROL_C_EXIT },
            _ = self.close.recv() => StopSignal { name: "console close", exit_code: CONTROL_C_EXIT },
        }
    }
}

/// Windows has no reload signal.
pub struct ReloadSignal(());

impl ReloadSignal {
    pub(crate) fn new() -> io::Result<ReloadSignal> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "Windows has no SIGHUP; edits to the configuration files are picked up by watching them",
        ))
    }

    /// Never resolves.
    pub async fn recv(&mut self) -> Option<()> {
        std::future::pending().await
    }
}
