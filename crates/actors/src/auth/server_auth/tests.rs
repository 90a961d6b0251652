//! Unit tests of the per-server OAuth state: auth modes from the configuration, loopback redirect URIs, and the
//! runtime errors library errors map to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pimcp_config::ServerConfig;

use crate::auth::status::AuthMode;

use super::login::is_loopback_http;
use super::{auth_error, auth_mode, oauth_capable};

fn server(entry: serde_json::Value) -> ServerConfig {
    let dir = std::env::temp_dir();
    let config = pimcp_config::load_in_memory(
        &serde_json::json!({ "mcpServers": { "s": entry } }),
        &pimcp_config::LoadOptions::new(&dir, &dir),
    );
    config.servers.into_iter().next().unwrap()
}

#[test]
fn modes_follow_the_configuration() {
    let url = "https://mcp.example.com/mcp";
    assert_eq!(auth_mode(&server(serde_json::json!({"url": url}))), AuthMode::Auto);
    assert_eq!(
        auth_mode(&server(serde_json::json!({"url": url, "auth": "oauth"}))),
        AuthMode::Oauth
    );
    assert_eq!(
        auth_mode(&server(serde_json::json!({"url": url, "oauth": {"clientId": "x"}}))),
        AuthMode::Oauth
    );
    assert_eq!(
        auth_mode(&server(serde_json::json!({"url": url, "oauth": false}))),
        AuthMode::None
    );
    assert_eq!(
        auth_mode(&server(serde_json::json!({"url": url, "headers": {"X-Key": "k"}}))),
        AuthMode::Headers
    );
    assert_eq!(
        auth_mode(&server(
            serde_json::json!({"url": url, "auth": "bearer", "bearerToken": "t"})
        )),
        AuthMode::Bearer
    );
    assert_eq!(auth_mode(&server(serde_json::json!({"command": "x"}))), AuthMode::None);
    assert!(oauth_capable(AuthMode::Auto) && oauth_capable(AuthMode::Oauth));
    assert!(!oauth_capable(AuthMode::Headers) && !oauth_capable(AuthMode::Bearer));
}

#[test]
fn loopback_redirects() {
    assert!(is_loopback_http("http://127.0.0.1:8765/cb"));
    assert!(is_loopback_http("http://localhost:{port}/oauth/done"));
    assert!(!is_loopback_http("https://app.example.com/cb"));
    assert!(!is_loopback_http("http://example.com/cb"));
}

#[test]
fn library_errors_map_to_categories_without_secrets() {
    let e = auth_error(
        "s",
        pimcp_auth::Error::NeedsAuth {
            server: "s".into(),
            reason: "refused".into(),
        },
    );
    assert_eq!(e.category(), crate::ErrorCategory::NeedsAuth);
    let e = auth_error(
        "s",
        pimcp_auth::Error::NoTokenStore {
            reason: "no keyring".into(),
        },
    );
    assert_eq!(e.category(), crate::ErrorCategory::Config);
    assert!(e.to_string().contains("settings.tokenStore"), "{e}");
    let e = auth_error(
        "s",
        pimcp_auth::Error::Discovery {
            url: "https://x/".into(),
            reason: "404".into(),
        },
    );
    assert_eq!(e.category(), crate::ErrorCategory::NeedsAuth);
    assert!(e.to_string().starts_with("server `s`"), "{e}");
}
