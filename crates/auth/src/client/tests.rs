//! Unit tests of the OAuth client: redirect parsing, `offline_access`, client ID metadata document URLs, redacted
//! options, and configuration refused at construction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pimcp_config::{OAuthConfig, Secret};

use crate::error::Error;

use super::flow::{parse_redirect, with_offline_access};
use super::{OAuthClient, OAuthClientOptions, is_client_metadata_url};

#[test]
fn redirect_forms() {
    let p = parse_redirect("http://127.0.0.1:19847/callback?code=abc&state=s1&iss=https%3A%2F%2Fas").unwrap();
    assert_eq!(p.code.as_deref(), Some("abc"));
    assert_eq!(p.state.as_deref(), Some("s1"));
    assert_eq!(p.iss.as_deref(), Some("https://as"));
    assert!(!p.bare);
    let p = parse_redirect("?code=abc&state=s1").unwrap();
    assert_eq!(p.state.as_deref(), Some("s1"));
    let p = parse_redirect("  abc-123  ").unwrap();
    assert!(p.bare);
    assert_eq!(p.code.as_deref(), Some("abc-123"));
    let p = parse_redirect("https://x/cb?error=access_denied&error_description=no&state=s").unwrap();
    assert_eq!(p.error.as_deref(), Some("access_denied"));
    assert!(parse_redirect("").is_err());
    assert!(parse_redirect("two words").is_err());
    assert!(parse_redirect("https://x/cb?foo=1").is_err());
}

#[test]
fn offline_access_only_when_listed_and_scoped() {
    let mut meta = crate::discovery::AuthServerMetadata::default();
    assert_eq!(with_offline_access(Some("mcp".into()), &meta).as_deref(), Some("mcp"));
    meta.scopes_supported = vec!["mcp".into(), "offline_access".into()];
    assert_eq!(
        with_offline_access(Some("mcp".into()), &meta).as_deref(),
        Some("mcp offline_access")
    );
    assert_eq!(with_offline_access(None, &meta), None);
    assert_eq!(
        with_offline_access(Some("offline_access".into()), &meta).as_deref(),
        Some("offline_access")
    );
}

#[test]
fn client_metadata_urls() {
    assert!(is_client_metadata_url("https://example.com/client.json"));
    assert!(!is_client_metadata_url("https://example.com/"));
    assert!(!is_client_metadata_url("http://example.com/client.json"));
}

#[test]
fn options_debug_redacts() {
    let mut options = OAuthClientOptions::new("s", "https://m/mcp", OAuthConfig::default());
    options.client_secret = Some(Secret::new("planted-secret"));
    assert!(!format!("{options:?}").contains("planted"));
}

#[test]
fn dpop_is_refused_rather_than_ignored() {
    let mut options = OAuthClientOptions::new("s", "https://m/mcp", OAuthConfig::default());
    options.config.dpop = true;
    let err = OAuthClient::new(options).unwrap_err();
    assert!(
        matches!(err, Error::Config { .. }) && err.to_string().contains("oauth.dpop"),
        "{err}"
    );
}

#[test]
fn secret_without_client_id_is_a_config_error() {
    let mut options = OAuthClientOptions::new("s", "https://m/mcp", OAuthConfig::default());
    options.client_secret = Some(Secret::new("x"));
    assert!(matches!(OAuthClient::new(options), Err(Error::Config { .. })));
}
