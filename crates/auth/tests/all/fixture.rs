//! The real `mcp-fixture --http --oauth` process: discovery, registration, login and an authorized MCP request.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use pimcp_auth::{MemoryStore, StoreKey, TokenManager};
use pimcp_config::OAuthConfig;

struct Fixture(Child);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn login_against_the_fixture_oauth_mode_then_call_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let _fixture = Fixture(
        Command::new(mcp_fixture::bin_path())
            .args(["--http", "127.0.0.1:0", "--oauth", "--port-file"])
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let port = loop {
        if let Ok(text) = std::fs::read_to_string(&port_file)
            && let Ok(port) = text.trim().parse::<u16>()
        {
            break port;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the fixture never wrote its port"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let url = format!("http://127.0.0.1:{port}/mcp");
    let client = pimcp_auth::OAuthClient::new(pimcp_auth::OAuthClientOptions::new(
        "fixture",
        &url,
        OAuthConfig::default(),
    ))
    .unwrap();
    let record = crate::support::login(&client).await;
    assert_eq!(
        record.issuer.as_deref(),
        Some(format!("http://127.0.0.1:{port}").as_str())
    );

    let tokens = TokenManager::new(std::sync::Arc::new(MemoryStore::new()), dir.path());
    let key = StoreKey::new("fixture", &url);
    tokens.save_login(&key, &record).await.unwrap();
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    });
    let http = reqwest::Client::new();
    let unauthorized = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let response = tokens
        .send_authorized(&key, &client, |token| {
            http.post(&url)
                .header("accept", "application/json, text/event-stream")
                .json(&initialize)
                .bearer_auth(token)
        })
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(body.contains("serverInfo"), "{body}");
}
