//! Discovery against the fake server's layouts: where metadata lives, which URLs are asked for, and what is refused.

use pimcp_auth::{AuthorizationRequest, Error, MetadataSource};
use pimcp_config::OAuthConfig;

use crate::fake_as::{FakeAsConfig, MetadataStyle};
use crate::support::{REDIRECT, client, start};

#[tokio::test]
async fn advertised_path_based_metadata_never_asks_for_the_root() {
    let fake = start(FakeAsConfig::default()).await;
    crate::support::login(&client(&fake, OAuthConfig::default())).await;
    let asked = fake.well_known_requests();
    assert_eq!(
        asked,
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server"
        ],
        "probe 401 → advertised PRM → AS metadata"
    );
}

#[tokio::test]
async fn unadvertised_metadata_is_probed_and_oidc_discovery_is_used() {
    let fake = start(FakeAsConfig {
        advertise_prm: false,
        metadata: MetadataStyle::Oidc,
        ..FakeAsConfig::default()
    })
    .await;
    crate::support::login(&client(&fake, OAuthConfig::default())).await;
    assert_eq!(
        fake.well_known_requests(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ]
    );
}

#[tokio::test]
async fn root_metadata_and_issuer_path_insertion() {
    let fake = start(FakeAsConfig {
        advertise_prm: false,
        prm_path_based: false,
        prm_root: true,
        issuer_path: "/tenant1".into(),
        ..FakeAsConfig::default()
    })
    .await;
    let record = crate::support::login(&client(&fake, OAuthConfig::default())).await;
    assert_eq!(
        fake.well_known_requests(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-authorization-server/tenant1",
        ]
    );
    assert_eq!(
        record.issuer.as_deref(),
        Some(format!("{}/tenant1", fake.base).as_str())
    );
}

#[tokio::test]
async fn oidc_discovery_with_an_issuer_path_appends_the_well_known_suffix() {
    let fake = start(FakeAsConfig {
        issuer_path: "/tenant1".into(),
        metadata: MetadataStyle::Oidc,
        ..FakeAsConfig::default()
    })
    .await;
    crate::support::login(&client(&fake, OAuthConfig::default())).await;
    assert_eq!(
        fake.well_known_requests(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
            "/tenant1/.well-known/openid-configuration",
        ]
    );
}

#[tokio::test]
async fn without_any_metadata_the_2025_03_26_default_endpoints_are_used() {
    let fake = start(FakeAsConfig {
        prm_path_based: false,
        advertise_prm: false,
        metadata: MetadataStyle::None,
        ..FakeAsConfig::default()
    })
    .await;
    let client = client(&fake, OAuthConfig::default());
    let discovered = client.discover(None).await.unwrap();
    assert_eq!(discovered.source, MetadataSource::DefaultEndpoints);
    let record = crate::support::login(&client).await;
    assert_eq!(
        record.token_endpoint.as_deref(),
        Some(format!("{}/token", fake.base).as_str())
    );
    assert_eq!(fake.registrations().len(), 1);
}

#[tokio::test]
async fn issuer_mismatch_is_refused() {
    let fake = start(FakeAsConfig {
        issuer_override: Some("https://evil.example.com".into()),
        ..FakeAsConfig::default()
    })
    .await;
    let err = client(&fake, OAuthConfig::default())
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::IssuerMismatch { .. }), "{err}");
    assert!(fake.registrations().is_empty());
    assert!(fake.authorize_requests().is_empty());

    // Opt-out for a known-misconfigured server.
    let mut config = OAuthConfig::default();
    config.skip_issuer_metadata_validation = true;
    crate::support::login(&client(&fake, config)).await;
}

#[tokio::test]
async fn resource_mismatch_is_refused_before_any_authorization() {
    let fake = start(FakeAsConfig {
        prm_resource: Some("https://evil.example.com/mcp".into()),
        ..FakeAsConfig::default()
    })
    .await;
    let err = client(&fake, OAuthConfig::default())
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::ResourceMismatch { .. }), "{err}");
    assert!(err.to_string().contains("evil.example.com"), "{err}");
    assert!(fake.authorize_requests().is_empty());
    assert!(fake.registrations().is_empty());
}

#[tokio::test]
async fn an_origin_resource_covers_the_server_and_is_sent_as_published() {
    let fake = start(FakeAsConfig {
        prm_resource: Some("{base}".into()),
        ..FakeAsConfig::default()
    })
    .await;
    let record = crate::support::login(&client(&fake, OAuthConfig::default())).await;
    assert_eq!(record.resource.as_deref(), Some(fake.base.as_str()));
    assert_eq!(fake.authorize_requests()[0]["resource"], fake.base);
    assert_eq!(fake.token_requests("authorization_code")[0].0["resource"], fake.base);
}

#[tokio::test]
async fn configured_metadata_url_is_authoritative() {
    let fake = start(FakeAsConfig {
        prm_path_based: false,
        advertise_prm: false,
        ..FakeAsConfig::default()
    })
    .await;
    let mut config = OAuthConfig::default();
    config.auth_server_metadata_url = Some(format!("{}/.well-known/oauth-authorization-server", fake.base));
    let discovered = client(&fake, config).discover(None).await.unwrap();
    assert_eq!(discovered.source, MetadataSource::Configured);
    assert_eq!(discovered.issuer.as_deref(), Some(fake.base.as_str()));
}

/// A server nobody listens on: the error says what failed in words (no URL query, no secret) and keeps the HTTP
/// client's error as its `source()`, itself without the URL.
#[tokio::test]
async fn an_unreachable_server_keeps_the_http_error_as_the_source() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let url = format!("http://127.0.0.1:{port}/mcp?key=hunter2-secret");
    let client =
        pimcp_auth::OAuthClient::new(pimcp_auth::OAuthClientOptions::new("srv", url, OAuthConfig::default())).unwrap();
    let err = client.discover(None).await.unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    let source = std::error::Error::source(&err).expect("the HTTP error is kept");
    let http = source.downcast_ref::<reqwest::Error>().expect("a reqwest error");
    assert!(http.is_connect(), "{http:?}");
    assert!(http.url().is_none(), "the source carries no URL: {http:?}");
    assert!(!format!("{http:?}").contains("hunter2"));
}
