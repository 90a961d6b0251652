//! Streamable HTTP: headers and bearer, 401 → needs-auth, shape-probe hints, session expiry and session resume.

use std::time::Duration;

use pimcp_actors::{ConnectError, Era, TransportKind};
use pimcp_config::{AuthConfig, ProtocolMode, Transport};
use rmcp::model::CallToolRequestParams;

use super::support::*;

/// A fixture serving Streamable HTTP on a loopback port; killed on drop.
struct HttpFixture {
    _child: tokio::process::Child,
    url: String,
    _dir: tempfile::TempDir,
    events: std::path::PathBuf,
}

async fn http_fixture(extra: &[&str]) -> HttpFixture {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let events = dir.path().join("events.jsonl");
    let child = tokio::process::Command::new(fixture())
        .args(["--http", "127.0.0.1:0", "--port-file", port_file.to_str().unwrap()])
        .args(["--event-log", events.to_str().unwrap()])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let port = read_pid(&port_file).await;
    HttpFixture {
        _child: child,
        url: format!("http://127.0.0.1:{port}/mcp"),
        _dir: dir,
        events,
    }
}

fn count_events(path: &std::path::Path, event: &str) -> usize {
    let needle = format!(r#""event":"{event}""#);
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .count()
}

#[tokio::test]
async fn connects_with_headers_and_a_bearer_token() {
    let fx = http_fixture(&["--require-bearer", "tok-123456"]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = http_server("web", &fx.url);
    server.auth = AuthConfig::Bearer {
        token: Some(plain("tok-123456")),
        token_env: None,
    };
    if let Transport::Http(h) = &mut server.transport {
        h.headers.insert("X-Tenant".into(), plain("acme"));
    }
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
    assert_eq!(conn.transport, TransportKind::StreamableHttp);
    assert_eq!(conn.era, Era::Stateless);
    let me = whoami(&conn, None).await;
    assert_eq!(me["transport"], "http");
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn legacy_era_over_http_has_a_session() {
    let fx = http_fixture(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = http_server("web-legacy", &fx.url);
    server.protocol = ProtocolMode::Legacy;
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
    assert_eq!(conn.era, Era::Legacy);
    let sid = conn.session_id.clone().expect("a session id");
    assert_eq!(whoami(&conn, None).await["sessionId"], sid.as_str());
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn missing_credentials_mean_needs_auth() {
    let fx = http_fixture(&["--require-bearer", "tok-123456"]).await;
    let dir = tempfile::tempdir().unwrap();
    let err = pimcp_actors::connect(spec(http_server("locked", &fx.url), dir.path()), ())
        .await
        .unwrap_err();
    match &err {
        ConnectError::NeedsAuth { challenge, .. } => assert!(challenge.as_deref().unwrap_or("").starts_with("Bearer")),
        other => panic!("unexpected {other}"),
    }
    assert!(!err.is_transient());

    // A wrong token from bearerTokenEnv is also a 401; the token never appears in the error.
    let mut server = http_server("locked2", &fx.url);
    server.auth = AuthConfig::Bearer {
        token: Some(plain("wrong-token-777")),
        token_env: None,
    };
    let err = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap_err();
    assert!(matches!(err, ConnectError::NeedsAuth { .. }), "{err}");
    assert!(!format!("{err} {err:?}").contains("wrong-token-777"));
}

#[tokio::test]
async fn an_unset_bearer_token_env_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = http_server("envtok", "http://127.0.0.1:9/mcp");
    server.auth = AuthConfig::Bearer {
        token: None,
        token_env: Some("PIMCP_TEST_SURELY_UNSET_VAR".into()),
    };
    let err = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap_err();
    // Not retried: waiting cannot set the variable (a failed `!command` is a retryable `Secret` error).
    assert!(matches!(err, ConnectError::Config { .. }), "{err}");
    assert!(err.to_string().contains("PIMCP_TEST_SURELY_UNSET_VAR"), "{err}");
}

/// A loopback HTTP server that answers every request with `response` (raw bytes), until dropped.
async fn canned_server(response: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0_u8; 16 * 1024];
                let mut seen = Vec::new();
                // Read the head and (small) body; then answer and close.
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen);
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let len = text[..head_end]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().to_owned())
                            })
                            .and_then(|v| v.parse::<usize>().ok())
                            .unwrap_or(0);
                        if seen.len() >= head_end + 4 + len {
                            break;
                        }
                    }
                }
                let _ = sock.write_all(response.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (format!("http://{addr}/mcp"), task)
}

#[tokio::test]
async fn an_html_endpoint_gets_a_hint() {
    let (url, task) = canned_server(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: 27\r\nConnection: close\r\n\r\n<html><body>hi</body></html",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let err = pimcp_actors::connect(spec(http_server("html", &url), dir.path()), ())
        .await
        .unwrap_err();
    task.abort();
    match &err {
        ConnectError::Http { status, hint, .. } => {
            assert_eq!(*status, Some(200));
            assert!(
                hint.contains("endpoint returned HTML (200) — this URL does not speak MCP"),
                "{hint}"
            );
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn a_401_without_a_challenge_gets_a_hint() {
    let (url, task) =
        canned_server("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
    let dir = tempfile::tempdir().unwrap();
    let err = pimcp_actors::connect(spec(http_server("noauth", &url), dir.path()), ())
        .await
        .unwrap_err();
    task.abort();
    assert!(matches!(err, ConnectError::NeedsAuth { challenge: None, .. }), "{err}");
}

#[tokio::test]
async fn connection_refused_gets_a_hint() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let err = pimcp_actors::connect(spec(http_server("down", &url), dir.path()), ())
        .await
        .unwrap_err();
    match &err {
        ConnectError::Http { hint, transient, .. } => {
            assert!(hint.contains("connection refused"), "{hint}");
            assert!(*transient);
        }
        other => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn an_expired_session_is_recovered_transparently() {
    let fx = http_fixture(&["--expire-sessions-after", "3"]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = http_server("expiring", &fx.url);
    server.protocol = ProtocolMode::Legacy;
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
    let first = conn.current_session_id().unwrap();
    for i in 0..6 {
        let args = serde_json::json!({ "text": format!("call {i}") })
            .as_object()
            .unwrap()
            .clone();
        let r = conn
            .client
            .call_tool(CallToolRequestParams::new("echo").with_arguments(args))
            .await
            .unwrap();
        assert!(r.content[0].as_text().unwrap().text.contains(&format!("call {i}")));
    }
    assert_ne!(conn.current_session_id().unwrap(), first);
    assert!(count_events(&fx.events, "session_expired") >= 1);
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_previous_session_is_resumed_without_a_new_initialize() {
    let fx = http_fixture(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = http_server("resumable", &fx.url);
    server.protocol = ProtocolMode::Legacy;
    let conn = pimcp_actors::connect(spec(server.clone(), dir.path()), ())
        .await
        .unwrap();
    let sid = conn.session_id.clone().unwrap();
    // A transport death: the session is left alive on the server.
    let token = conn.abandon().await.expect("a resume token");
    assert_eq!(count_events(&fx.events, "initialize"), 1);

    let mut s = spec(server, dir.path());
    s.resume_session = Some(token);
    let conn = pimcp_actors::connect(s, ()).await.unwrap();
    assert!(conn.resumed);
    assert_eq!(conn.session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(whoami(&conn, None).await["sessionId"], sid.as_str());
    assert_eq!(
        count_events(&fx.events, "initialize"),
        1,
        "resume must not initialize again"
    );
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn resuming_a_forgotten_session_initializes_fresh() {
    let fx = http_fixture(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = http_server("forgotten", &fx.url);
    server.protocol = ProtocolMode::Legacy;
    let conn = pimcp_actors::connect(spec(server.clone(), dir.path()), ())
        .await
        .unwrap();
    let token = conn.resume_token().unwrap();
    // A clean close deletes the session on the server.
    conn.close(Duration::from_secs(2)).await;

    let mut s = spec(server, dir.path());
    s.resume_session = Some(token.clone());
    let conn = pimcp_actors::connect(s, ()).await.unwrap();
    assert!(!conn.resumed);
    let sid = conn.current_session_id().unwrap();
    assert_ne!(sid, token.session_id);
    assert_eq!(whoami(&conn, None).await["sessionId"], sid.as_str());
    assert_eq!(count_events(&fx.events, "initialize"), 2);
    conn.close(Duration::from_secs(2)).await;
}
