//! Tests of `discovery.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

#[test]
fn parses_bearer_challenges() {
    let c = Challenge::parse(
        r#"Bearer resource_metadata="https://m.example/.well-known/oauth-protected-resource/mcp", scope="a b""#,
    )
    .unwrap();
    assert_eq!(
        c.resource_metadata.as_deref(),
        Some("https://m.example/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(c.scope.as_deref(), Some("a b"));

    let c = Challenge::parse(
        r#"DPoP algs="ES256", Bearer error="insufficient_scope", scope="mcp:basic mcp:write", error_description="need \"write\"""#,
    )
    .unwrap();
    assert!(c.is_insufficient_scope());
    assert_eq!(c.scope.as_deref(), Some("mcp:basic mcp:write"));
    assert_eq!(c.error_description.as_deref(), Some("need \"write\""));

    assert_eq!(Challenge::parse("Basic realm=\"x\""), None);
    assert_eq!(Challenge::parse("bearer").unwrap(), Challenge::default());
    let c = Challenge::parse("Bearer realm=x,scope=read").unwrap();
    assert_eq!(c.scope.as_deref(), Some("read"));
}

#[test]
fn resource_match_rules() {
    let server = url("https://m.example/mcp");
    assert!(resource_matches(&server, &url("https://m.example/mcp")));
    assert!(resource_matches(&server, &url("https://m.example/")));
    assert!(resource_matches(&server, &url("https://M.example:443/mcp/")));
    assert!(!resource_matches(&server, &url("https://m.example/mc")));
    assert!(!resource_matches(&server, &url("https://evil.example.com/mcp")));
    assert!(!resource_matches(&server, &url("http://m.example/mcp")));
    assert!(!resource_matches(&server, &url("https://m.example/mcp#frag")));
    assert!(!resource_matches(
        &url("https://m.example/"),
        &url("https://m.example/mcp")
    ));
}

#[test]
fn metadata_urls_insert_the_path() {
    let urls: Vec<String> = as_metadata_urls(&url("https://as.example/tenant1"))
        .iter()
        .map(Url::to_string)
        .collect();
    assert_eq!(
        urls,
        [
            "https://as.example/.well-known/oauth-authorization-server/tenant1",
            "https://as.example/.well-known/openid-configuration/tenant1",
            "https://as.example/tenant1/.well-known/openid-configuration",
        ]
    );
    let urls: Vec<String> = as_metadata_urls(&url("https://as.example"))
        .iter()
        .map(Url::to_string)
        .collect();
    assert_eq!(
        urls,
        [
            "https://as.example/.well-known/oauth-authorization-server",
            "https://as.example/.well-known/openid-configuration"
        ]
    );
}

#[test]
fn issuer_validation() {
    let meta = AuthServerMetadata {
        issuer: Some("https://as.example/".into()),
        ..Default::default()
    };
    assert_eq!(
        validate_issuer(&meta, Some("https://as.example"), &[], false)
            .unwrap()
            .as_deref(),
        Some("https://as.example/")
    );
    assert!(matches!(
        validate_issuer(&meta, Some("https://other.example"), &[], false),
        Err(Error::IssuerMismatch { .. })
    ));
    assert!(validate_issuer(&meta, Some("https://other.example"), &[], true).is_ok());
    let bare = AuthServerMetadata::default();
    assert!(matches!(
        validate_issuer(&bare, Some("https://as.example"), &[], false),
        Err(Error::IssuerMissing { .. })
    ));
}

#[test]
fn origin_fallback_accepts_a_same_origin_issuer_only() {
    let origin = url("https://m.example/");
    let with = |issuer: Option<&str>| AuthServerMetadata {
        issuer: issuer.map(str::to_string),
        token_endpoint: Some("https://m.example/oauth/token".into()),
        ..Default::default()
    };
    // Accepted: the origin itself, and any path under it (the 2025-03-26 `<origin>/oauth` layout).
    for issuer in [
        "https://m.example",
        "https://m.example/",
        "https://m.example/oauth",
        "https://M.example:443/a/b",
    ] {
        assert_eq!(
            validate_origin_issuer(&with(Some(issuer)), &origin, false)
                .unwrap()
                .as_deref(),
            Some(issuer),
            "{issuer}"
        );
    }
    // Refused: another origin (scheme, host, port), a query, a fragment, userinfo, no issuer, not a URL.
    for issuer in [
        "https://evil.example/oauth",
        "http://m.example/oauth",
        "https://m.example:8443/oauth",
        "https://m.example.evil.example/",
        "https://m.example/oauth?x=1",
        "https://m.example/oauth#f",
        "https://user@m.example/oauth",
        "m.example/oauth",
    ] {
        assert!(
            matches!(
                validate_origin_issuer(&with(Some(issuer)), &origin, false),
                Err(Error::IssuerMismatch { .. })
            ),
            "{issuer}"
        );
    }
    assert!(matches!(
        validate_origin_issuer(&with(None), &origin, false),
        Err(Error::IssuerMissing { .. })
    ));
    // `oauth.skipIssuerMetadataValidation` still accepts a foreign issuer (with a warning).
    assert!(validate_origin_issuer(&with(Some("https://evil.example/")), &origin, true).is_ok());
    // The exact-match rule of the other paths is unchanged: a path issuer is not the origin's issuer there.
    assert!(
        validate_issuer(
            &with(Some("https://m.example/oauth")),
            Some("https://m.example"),
            &[],
            false
        )
        .is_err()
    );
}

#[test]
fn configured_metadata_url_implies_an_issuer() {
    assert_eq!(
        expected_issuer_for(&url("https://as.example/.well-known/oauth-authorization-server/t1")).as_deref(),
        Some("https://as.example/t1")
    );
    assert_eq!(
        expected_issuer_for(&url("https://as.example/t1/.well-known/openid-configuration")).as_deref(),
        Some("https://as.example/t1")
    );
    assert_eq!(
        expected_issuer_for(&url("https://as.example/.well-known/openid-configuration")).as_deref(),
        Some("https://as.example")
    );
    assert_eq!(expected_issuer_for(&url("https://as.example/meta.json")), None);
}

#[test]
fn discovered_urls_must_be_https_unless_loopback() {
    let server = url("https://m.example/mcp");
    assert!(check_discovered_url(&server, &url("https://as.example"), "x").is_ok());
    assert!(check_discovered_url(&server, &url("http://as.example"), "x").is_err());
    assert!(check_discovered_url(&server, &url("http://127.0.0.1:9/"), "x").is_ok());
    assert!(check_discovered_url(&server, &url("javascript:alert(1)"), "x").is_err());
    let local = url("http://devbox:8080/mcp");
    assert!(check_discovered_url(&local, &url("http://devbox:9000/"), "x").is_ok());
}

#[test]
fn null_lists_in_metadata_are_empty() {
    let meta: AuthServerMetadata =
        serde_json::from_str(r#"{"issuer":"https://a","token_endpoint":"https://a/t","scopes_supported":null}"#)
            .unwrap();
    assert!(meta.scopes_supported.is_empty());
    assert!(meta.supports_auth_method("client_secret_basic"));
    assert!(!meta.supports_auth_method("none"));
}
