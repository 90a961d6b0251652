//! Unix sockets: newline-delimited JSON-RPC, as rmcp-mux serves it (here: a listener bridged to a stdio fixture).

use std::time::Duration;

use pimcp_actors::{ConnectError, TransportKind};
use pimcp_config::{SocketTransport, Transport};

use super::support::*;

#[tokio::test]
async fn round_trip_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mux.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let bridge = tokio::spawn(mcp_fixture::bridge_one_socket_connection(listener, Vec::<&str>::new()));
    let server = server("mux", Transport::Socket(SocketTransport::new(path.clone())));
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
    assert_eq!(conn.transport, TransportKind::UnixSocket);
    assert_eq!(whoami(&conn, None).await["transport"], "stdio");
    conn.close(Duration::from_secs(2)).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), bridge).await;
}

#[tokio::test]
async fn a_missing_socket_is_a_transient_socket_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(
        "nomux",
        Transport::Socket(SocketTransport::new(dir.path().join("absent.sock"))),
    );
    let err = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap_err();
    assert!(matches!(err, ConnectError::Socket { transient: true, .. }), "{err}");
    assert!(err.to_string().contains("absent.sock"), "{err}");
    let io = std::error::Error::source(&err).and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        io.map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound),
        "the connect's I/O error is the source"
    );
}
