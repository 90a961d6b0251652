//! Socket transport (`socket`): newline-delimited JSON-RPC over a Unix socket (a named pipe on Windows), as
//! rmcp-mux serves it.

use pimcp_config::SocketTransport;
use rmcp::{ClientHandler, ClientServiceExt as _};
use tokio::time::Instant;

use super::handshake::{self, Abort};
use super::{ConnectError, ConnectSpec, Connection, TransportKind};
use crate::process::StderrTail;

pub(super) async fn connect<H: ClientHandler>(
    spec: ConnectSpec,
    socket: SocketTransport,
    handler: H,
) -> Result<Connection<H>, ConnectError> {
    let name = spec.server.name.clone();
    let startup = spec.server.timeouts.startup;
    let deadline = Instant::now() + startup;
    let abort = |a: Abort| match a {
        Abort::Timeout => ConnectError::StartupTimeout {
            server: name.clone(),
            after: startup,
            stderr: String::new(),
        },
        Abort::Cancelled => ConnectError::Cancelled { server: name.clone() },
    };
    let path = socket.path.clone();
    let (read, write) = handshake::bounded(deadline, &spec.cancel, crate::sys::connect_socket(&path))
        .await
        .map_err(abort)?
        .map_err(|e| {
            let (what, transient) = match e.kind() {
                std::io::ErrorKind::NotFound => ("does not exist (is the mux running?)", true),
                std::io::ErrorKind::ConnectionRefused => ("refused the connection (is the mux running?)", true),
                std::io::ErrorKind::PermissionDenied => ("is not accessible (permission denied)", false),
                std::io::ErrorKind::InvalidInput => ("cannot be used", false),
                _ => ("cannot be connected", true),
            };
            ConnectError::Socket {
                server: name.clone(),
                message: format!("socket `{}` {what}: {e}", path.display()),
                transient,
                source: Some(e),
            }
        })?;
    let lines = super::lines::JsonLines::new(read, write, spec.max_message_bytes, super::lines::UpstreamLines);
    let lifecycle = handshake::lifecycle(spec.server.protocol, spec.era_hint);
    let transport = super::ended::Ended::new(super::cancel_on_close::CancelOnClose::new(crate::trace::traced(
        lines,
        spec.trace.as_ref(),
        TransportKind::UnixSocket,
    )));
    let ended = transport.token();
    let client = handshake::bounded(
        deadline,
        &spec.cancel,
        handler.serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .map_err(abort)?
    .map_err(|e| ConnectError::Protocol {
        server: name.clone(),
        message: handshake::describe(&e),
        stderr: String::new(),
    })?;
    let Some(n) = handshake::negotiated(&client) else {
        return Err(ConnectError::Protocol {
            server: name,
            message: "the handshake finished without server information".into(),
            stderr: String::new(),
        });
    };
    Ok(Connection {
        ended,
        client,
        era: n.era,
        protocol_version: n.protocol_version,
        server_info: n.server_info,
        capabilities: n.capabilities,
        instructions: n.instructions,
        transport: TransportKind::UnixSocket,
        pid: None,
        guarded: false,
        stderr: StderrTail::default(),
        session_id: None,
        resumed: false,
        child: None,
        http: None,
    })
}
