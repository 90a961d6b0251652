//! The legacy HTTP+SSE fallback (`type: "sse"`, or a `url` server whose POST gets 404/405/406/415): a small
//! loopback SSE server (GET /sse streams events, POST /messages takes client messages, POST /sse answers 405)
//! bridged to a stdio fixture.

use std::sync::Arc;
use std::time::Duration;

use pimcp_actors::{ConnectError, Era, TransportKind};
use pimcp_config::{HttpTransport, ProtocolMode, Transport};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::{Mutex, mpsc};

use super::support::*;

/// Reads one HTTP/1.1 request: (method, path, body).
async fn read_request(sock: &mut BufReader<tokio::net::TcpStream>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    sock.read_line(&mut line).await.ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut len = 0;
    loop {
        let mut h = String::new();
        sock.read_line(&mut h).await.ok()?;
        if h.trim().is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0_u8; len];
    sock.read_exact(&mut body).await.ok()?;
    Some((method, path, body))
}

/// Starts the legacy SSE server; returns its `/sse` URL. It answers one request per connection and says so
/// (`Connection: close`): a client that pooled the connection would otherwise send its next POST into a socket the
/// server is closing (`type_sse_falls_back_to_the_legacy_transport` failed ~1 in 40 with "send initialized
/// notification" that way).
async fn legacy_sse_server(endpoint: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut child = tokio::process::Command::new(fixture())
        .arg("--legacy-only")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = Arc::new(Mutex::new(child.stdin.take().unwrap()));
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let (events_tx, events_rx) = mpsc::unbounded_channel::<String>();
    let events_rx = Arc::new(Mutex::new(Some(events_rx)));
    tokio::spawn(async move {
        let _child = child;
        while let Ok(Some(line)) = stdout.next_line().await {
            if events_tx.send(format!("event: message\ndata: {line}\n\n")).is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (stdin, events_rx) = (stdin.clone(), events_rx.clone());
            tokio::spawn(async move {
                let mut sock = BufReader::new(sock);
                let Some((method, path, body)) = read_request(&mut sock).await else {
                    return;
                };
                let mut sock = sock.into_inner();
                match (method.as_str(), path.as_str()) {
                    ("GET", "/sse") => {
                        let Some(mut rx) = events_rx.lock().await.take() else {
                            return;
                        };
                        let head =
                            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock
                            .write_all(format!("event: endpoint\ndata: {endpoint}\n\n").as_bytes())
                            .await;
                        while let Some(ev) = rx.recv().await {
                            if sock.write_all(ev.as_bytes()).await.is_err() {
                                break;
                            }
                        }
                    }
                    ("POST", p) if p.starts_with("/messages") => {
                        let mut line = body;
                        line.push(b'\n');
                        let _ = stdin.lock().await.write_all(&line).await;
                        let _ = sock
                            .write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                            .await;
                    }
                    _ => {
                        let _ = sock
                            .write_all(
                                b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                            )
                            .await;
                    }
                }
            });
        }
    });
    format!("http://{addr}/sse")
}

fn sse_server(name: &str, url: &str, allow_legacy_sse: bool) -> pimcp_config::ServerConfig {
    let mut http = HttpTransport::new(url);
    http.allow_legacy_sse = allow_legacy_sse;
    let mut s = server(name, Transport::Http(http));
    s.protocol = ProtocolMode::Legacy;
    s.timeouts.startup = Duration::from_secs(10);
    s
}

#[tokio::test]
async fn type_sse_falls_back_to_the_legacy_transport() {
    let url = legacy_sse_server("/messages?session=1").await;
    let dir = tempfile::tempdir().unwrap();
    let conn = pimcp_actors::connect(spec(sse_server("old", &url, true), dir.path()), ())
        .await
        .unwrap();
    assert_eq!(conn.transport, TransportKind::LegacySse);
    assert_eq!(conn.era, Era::Legacy);
    assert_eq!(whoami(&conn, None).await["server"], "mcp-fixture");
    conn.close(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn without_type_sse_a_405_to_the_post_falls_back_to_the_legacy_transport() {
    let url = legacy_sse_server("/messages?session=1").await;
    let dir = tempfile::tempdir().unwrap();
    let conn = pimcp_actors::connect(spec(sse_server("old2", &url, false), dir.path()), ())
        .await
        .unwrap();
    assert_eq!(conn.transport, TransportKind::LegacySse);
    assert_eq!(whoami(&conn, None).await["server"], "mcp-fixture");
    conn.close(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn a_404_from_something_that_is_no_mcp_server_names_both_attempts() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut sock = BufReader::new(sock);
                if read_request(&mut sock).await.is_some() {
                    let _ = sock
                        .get_mut()
                        .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .await;
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{addr}/wrong-path");
    let err = pimcp_actors::connect(spec(sse_server("typo", &url, false), dir.path()), ())
        .await
        .unwrap_err();
    match &err {
        ConnectError::Http {
            status: Some(404),
            hint,
            ..
        } => {
            assert!(hint.contains("404 Not Found"), "{hint}");
            assert!(
                hint.contains("legacy HTTP+SSE transport did not connect either"),
                "{hint}"
            );
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn a_401_never_falls_back_to_the_legacy_transport() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                let mut sock = BufReader::new(sock);
                if let Some((method, _, _)) = read_request(&mut sock).await {
                    let _ = seen_tx.send(method);
                    let _ = sock
                        .get_mut()
                        .write_all(
                            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"x\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://{addr}/mcp");
    let err = pimcp_actors::connect(spec(sse_server("locked", &url, false), dir.path()), ())
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::NeedsAuth { .. }), "{err}");
    let mut methods = Vec::new();
    while let Ok(m) = seen.try_recv() {
        methods.push(m);
    }
    assert!(
        !methods.is_empty() && methods.iter().all(|m| m == "POST"),
        "no legacy GET: {methods:?}"
    );
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    let url = legacy_sse_server("http://example.invalid/messages").await;
    let dir = tempfile::tempdir().unwrap();
    let err = pimcp_actors::connect(spec(sse_server("evil", &url, true), dir.path()), ())
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::Protocol { .. }), "{err}");
    assert!(err.to_string().contains("origin"), "{err}");
}
