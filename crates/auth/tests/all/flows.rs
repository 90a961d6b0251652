//! Authorization-code, registration, client-credentials and step-up flows against the fake authorization server.

use std::sync::{Arc, Mutex};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use pimcp_auth::{
    AuthorizationRequest, BrowserOpener, CallbackListener, CallbackPort, Challenge, Error, LoginNotice, LoginOptions,
    MAX_AUTHORIZATION_ATTEMPTS, MemoryStore, StoreKey, TokenEndpointAuthMethod, TokenManager, login,
};
use pimcp_config::{OAuthConfig, OAuthGrant, Secret};

use crate::fake_as::{FakeAsConfig, IssParam};
use crate::support::{REDIRECT, browse, client, client_with, query, start};

#[tokio::test]
async fn code_flow_with_dynamic_registration_and_pkce() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let record = crate::support::login(&client).await;

    let registrations = fake.registrations();
    assert_eq!(registrations.len(), 1);
    assert_eq!(registrations[0]["redirect_uris"], serde_json::json!([REDIRECT]));
    assert_eq!(
        registrations[0]["grant_types"],
        serde_json::json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(registrations[0]["token_endpoint_auth_method"], "none");
    assert_eq!(
        registrations[0]["application_type"], "native",
        "a loopback redirect is a native client"
    );

    let authorize = &fake.authorize_requests()[0];
    assert_eq!(authorize["code_challenge_method"], "S256");
    assert_eq!(authorize["code_challenge"].len(), 43);
    assert_eq!(authorize["resource"], fake.mcp_url());
    assert_eq!(
        authorize["scope"], "mcp offline_access",
        "PRM scopes plus offline_access the AS lists"
    );

    let tokens = fake.token_requests("authorization_code");
    assert_eq!(tokens.len(), 1);
    let (params, method, status) = &tokens[0];
    assert_eq!(*status, 200, "the fake AS verified PKCE, client and resource");
    assert_eq!(method, "none");
    assert_eq!(params["resource"], authorize["resource"]);
    assert!(params["code_verifier"].len() >= 43);

    assert_eq!(Some(record.access_token.expose().to_string()), fake.last_access_token());
    assert!(record.refresh_token.is_some());
    assert_eq!(record.server_url, fake.mcp_url());
    assert_eq!(record.issuer.as_deref(), Some(fake.issuer().as_str()));
    assert_eq!(record.client.auth_method, TokenEndpointAuthMethod::None);
    assert!(!record.client.pre_registered);
    assert_eq!(
        record.token_endpoint.as_deref(),
        Some(format!("{}/token", fake.base).as_str())
    );
    assert!(record.expires_at.is_some());
    assert_eq!(record.scope.as_deref(), Some("mcp offline_access"));
}

#[tokio::test]
async fn client_metadata_and_authorization_params_reach_the_authorization_server() {
    let fake = start(FakeAsConfig::default()).await;
    let mut config = OAuthConfig::default();
    config.client_name = Some("Acme agent".into());
    config.client_uri = Some("https://acme.example/agent".into());
    config.logo_uri = Some("https://acme.example/logo.png".into());
    config.authorization_params = [("prompt", "consent"), ("audience", "mcp"), ("state", "planted")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let client = client(&fake, config);
    crate::support::login(&client).await;
    let registration = &fake.registrations()[0];
    assert_eq!(registration["client_name"], "Acme agent");
    assert_eq!(registration["client_uri"], "https://acme.example/agent");
    assert_eq!(registration["logo_uri"], "https://acme.example/logo.png");
    let authorize = &fake.authorize_requests()[0];
    assert_eq!(authorize["prompt"], "consent");
    assert_eq!(authorize["audience"], "mcp");
    // A reserved parameter is never replaced by an extra one (the login above completed with pimcp's own state).
    assert_ne!(authorize["state"], "planted");
}

#[tokio::test]
async fn stored_registration_is_reused_for_the_next_login() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let first = crate::support::login(&client).await;
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            known_client: Some(first.client.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let second = client.complete(&browse(&start.url).await).await.unwrap();
    assert_eq!(fake.registrations().len(), 1);
    assert_eq!(second.client.client_id, first.client.client_id);
}

async fn preregistered(method: &str) {
    let fake = start(FakeAsConfig {
        registration: false,
        auth_methods: vec![method.to_string()],
        clients: vec![("pre-1".into(), Some("pre-secret".into()))],
        ..FakeAsConfig::default()
    })
    .await;
    let client = client_with(&fake, |o| {
        o.config.client_id = Some("pre-1".into());
        o.client_secret = Some(Secret::new("pre-secret"));
    });
    let record = crate::support::login(&client).await;
    let (params, used, status) = fake.token_requests("authorization_code").remove(0);
    assert_eq!(status, 200);
    assert_eq!(used, method);
    if method == "client_secret_post" {
        assert_eq!(params["client_secret"], "pre-secret");
    } else {
        assert!(!params.contains_key("client_secret"));
    }
    assert!(fake.registrations().is_empty());
    assert!(record.client.pre_registered);
    assert_eq!(record.client.auth_method.as_str(), method);
}

#[tokio::test]
async fn preregistered_client_with_client_secret_basic() {
    preregistered("client_secret_basic").await;
}

#[tokio::test]
async fn preregistered_client_with_client_secret_post() {
    preregistered("client_secret_post").await;
}

#[tokio::test]
async fn dynamic_registration_follows_the_servers_auth_method() {
    for method in ["client_secret_basic", "client_secret_post"] {
        let fake = start(FakeAsConfig {
            auth_methods: vec![method.into()],
            ..FakeAsConfig::default()
        })
        .await;
        let record = crate::support::login(&client(&fake, OAuthConfig::default())).await;
        assert_eq!(fake.registrations()[0]["token_endpoint_auth_method"], method);
        let (_, used, status) = fake.token_requests("authorization_code").remove(0);
        assert_eq!((used.as_str(), status), (method, 200));
        assert!(record.client.client_secret.is_some());
    }
}

#[tokio::test]
async fn client_id_metadata_document_replaces_registration() {
    let fake = start(FakeAsConfig {
        cimd: true,
        ..FakeAsConfig::default()
    })
    .await;
    let url = "https://conformance-test.local/client-metadata.json";
    let client = client_with(&fake, |o| o.config.client_metadata_url = Some(url.into()));
    let record = crate::support::login(&client).await;
    assert!(fake.registrations().is_empty());
    assert_eq!(fake.authorize_requests()[0]["client_id"], url);
    assert_eq!(record.client.client_id, url);
}

#[tokio::test]
async fn client_credentials_with_a_secret() {
    let fake = start(FakeAsConfig {
        clients: vec![("m2m".into(), Some("m2m-secret".into()))],
        ..FakeAsConfig::default()
    })
    .await;
    let client = client_with(&fake, |o| {
        o.config.grant_type = OAuthGrant::ClientCredentials;
        o.config.client_id = Some("m2m".into());
        o.client_secret = Some(Secret::new("m2m-secret"));
    });
    let record = client.client_credentials().await.unwrap();
    let (params, used, status) = fake.token_requests("client_credentials").remove(0);
    assert_eq!((used.as_str(), status), ("client_secret_basic", 200));
    assert_eq!(params["resource"], fake.mcp_url());
    assert_eq!(params["scope"], "mcp");
    assert!(record.refresh_token.is_none());
    assert!(fake.is_valid_access_token(record.access_token.expose()));
    // A client_credentials server never starts a browser flow.
    let err = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
}

#[tokio::test]
async fn client_credentials_with_private_key_jwt() {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref())
    );
    let fake = start(FakeAsConfig {
        jwt_clients: vec![("jwt-client".into(), pair.public_key().as_ref().to_vec())],
        auth_methods: vec!["private_key_jwt".into()],
        ..FakeAsConfig::default()
    })
    .await;
    let client = client_with(&fake, |o| {
        o.config.grant_type = OAuthGrant::ClientCredentials;
        o.config.client_id = Some("jwt-client".into());
        o.private_key_pem = Some(Secret::new(pem));
    });
    let record = client.client_credentials().await.unwrap();
    let (params, used, status) = fake.token_requests("client_credentials").remove(0);
    assert_eq!(
        (used.as_str(), status),
        ("private_key_jwt", 200),
        "signature, iss/sub and aud verified"
    );
    assert_eq!(
        params["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    assert_eq!(record.client.auth_method, TokenEndpointAuthMethod::PrivateKeyJwt);
}

#[tokio::test]
async fn wrong_client_secret_is_a_token_error_without_the_secret() {
    let fake = start(FakeAsConfig {
        clients: vec![("m2m".into(), Some("right".into()))],
        ..FakeAsConfig::default()
    })
    .await;
    let client = client_with(&fake, |o| {
        o.config.grant_type = OAuthGrant::ClientCredentials;
        o.config.client_id = Some("m2m".into());
        o.client_secret = Some(Secret::new("planted-wrong-secret"));
    });
    let err = client.client_credentials().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::TokenRefused { .. }), "{text}");
    assert!(text.contains("invalid_client") && !text.contains("planted"), "{text}");
}

#[tokio::test]
async fn scope_comes_from_the_challenge_then_the_metadata_else_is_omitted() {
    let fake = start(FakeAsConfig {
        challenge_scope: Some("mcp:basic".into()),
        ..FakeAsConfig::default()
    })
    .await;
    crate::support::login(&client(&fake, OAuthConfig::default())).await;
    assert_eq!(fake.authorize_requests()[0]["scope"], "mcp:basic offline_access");

    let fake = start(FakeAsConfig {
        prm_scopes: vec!["mcp:basic".into(), "mcp:read".into(), "mcp:write".into()],
        as_scopes: vec![],
        ..FakeAsConfig::default()
    })
    .await;
    crate::support::login(&client(&fake, OAuthConfig::default())).await;
    assert_eq!(fake.authorize_requests()[0]["scope"], "mcp:basic mcp:read mcp:write");

    let fake = start(FakeAsConfig {
        prm_scopes: vec![],
        ..FakeAsConfig::default()
    })
    .await;
    crate::support::login(&client(&fake, OAuthConfig::default())).await;
    assert!(
        !fake.authorize_requests()[0].contains_key("scope"),
        "no scope anywhere: omitted (no lone offline_access)"
    );
    assert!(!fake.token_requests("authorization_code")[0].0.contains_key("scope"));

    let fake = start(FakeAsConfig::default()).await;
    let mut config = OAuthConfig::default();
    config.scope = Some("custom".into());
    crate::support::login(&client(&fake, config)).await;
    assert_eq!(fake.authorize_requests()[0]["scope"], "custom offline_access");
}

#[tokio::test]
async fn step_up_requests_the_union_and_stops_after_the_limit() {
    let fake = start(FakeAsConfig {
        required_scope: Some("mcp mcp:write".into()),
        ..FakeAsConfig::default()
    })
    .await;
    let client = client(&fake, OAuthConfig::default());
    let record = crate::support::login(&client).await;
    let http = reqwest::Client::new();
    let response = http
        .get(fake.mcp_url())
        .bearer_auth(record.access_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let challenge = Challenge::from_headers(response.headers()).unwrap();
    assert!(challenge.is_insufficient_scope());

    let start = client.start_step_up(&challenge, Some(&record), REDIRECT).await.unwrap();
    assert_eq!(query(&start.url)["scope"], "mcp offline_access mcp:write");
    let upgraded = client.complete(&browse(&start.url).await).await.unwrap();
    let response = http
        .get(fake.mcp_url())
        .bearer_auth(upgraded.access_token.expose())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        upgraded.client.client_id, record.client.client_id,
        "the registration is reused"
    );

    // Attempts: the login and the step-up; one more is allowed, then the limit holds.
    let third = client
        .start_step_up(&challenge, Some(&upgraded), REDIRECT)
        .await
        .unwrap();
    browse(&third.url).await;
    let err = client
        .start_step_up(&challenge, Some(&upgraded), REDIRECT)
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::StepUpExhausted { attempts, .. } if attempts == MAX_AUTHORIZATION_ATTEMPTS),
        "{err}"
    );
    assert_eq!(fake.authorize_requests().len() as u32, MAX_AUTHORIZATION_ATTEMPTS);
    client.reset_attempts();
    client
        .start_step_up(&challenge, Some(&upgraded), REDIRECT)
        .await
        .unwrap();
}

#[tokio::test]
async fn state_mismatch_is_refused_and_the_flow_survives() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let redirect = browse(&start.url).await;
    let forged = redirect.replace(&start.state, "forged-state");
    let err = client.complete(&forged).await.unwrap_err();
    assert!(matches!(err, Error::StateMismatch { .. }), "{err}");
    let without_state = format!("{REDIRECT}?code={}", query(&redirect)["code"]);
    assert!(matches!(
        client.complete(&without_state).await.unwrap_err(),
        Error::StateMismatch { .. }
    ));
    assert!(
        fake.token_requests("authorization_code").is_empty(),
        "no code was exchanged"
    );
    client.complete(&redirect).await.unwrap();
    assert!(
        matches!(
            client.complete(&redirect).await.unwrap_err(),
            Error::StateMismatch { .. }
        ),
        "state is single-use"
    );
}

#[tokio::test]
async fn a_bare_code_completes_the_single_pending_flow() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let code = query(&browse(&start.url).await)["code"].clone();
    let record = client.complete(&format!("  {code}\n")).await.unwrap();
    assert!(fake.is_valid_access_token(record.access_token.expose()));
}

#[tokio::test]
async fn authorization_server_errors_are_surfaced() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let denied = format!(
        "{REDIRECT}?error=access_denied&error_description=the+user+said+no&state={}",
        start.state
    );
    let err = client.complete(&denied).await.unwrap_err();
    assert!(matches!(err, Error::AuthorizationDenied { .. }));
    assert_eq!(
        err.to_string(),
        "authorization server refused the authorization: access_denied (the user said no)"
    );
}

#[tokio::test]
async fn callback_issuer_is_checked() {
    let fake = start(FakeAsConfig {
        iss_param: IssParam::Wrong,
        ..FakeAsConfig::default()
    })
    .await;
    let client = client(&fake, OAuthConfig::default());
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let err = client.complete(&browse(&start.url).await).await.unwrap_err();
    assert!(matches!(err, Error::IssuerMismatch { .. }), "{err}");
    assert!(fake.token_requests("authorization_code").is_empty());

    // The server says it sends `iss`; a redirect without it is refused.
    let fake = crate::support::start(FakeAsConfig {
        iss_param: IssParam::Correct,
        ..FakeAsConfig::default()
    })
    .await;
    let client = crate::support::client(&fake, OAuthConfig::default());
    let start = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let redirect = browse(&start.url).await;
    assert!(query(&redirect).contains_key("iss"));
    let stripped: String = {
        let q = query(&redirect);
        format!("{REDIRECT}?code={}&state={}", q["code"], q["state"])
    };
    assert!(matches!(
        client.complete(&stripped).await.unwrap_err(),
        Error::IssuerMissing { .. }
    ));
    client.complete(&redirect).await.unwrap();
}

/// Plays the browser for [`login`]: follows the authorization URL and delivers the redirect to the listener.
struct FollowingBrowser {
    opened: Arc<Mutex<Vec<String>>>,
}

impl BrowserOpener for FollowingBrowser {
    fn open(&self, url: &str) -> Result<(), String> {
        self.opened.lock().unwrap().push(url.to_string());
        let url = url.to_string();
        tokio::spawn(async move {
            let location = browse(&url).await;
            reqwest::get(location).await.unwrap();
        });
        Ok(())
    }
}

#[tokio::test]
async fn interactive_login_through_the_loopback_listener() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let listener = CallbackListener::bind(CallbackPort::Preferred(0)).await.unwrap();
    let redirect_uri = listener.redirect_uri().to_string();
    let opened = Arc::new(Mutex::new(Vec::new()));
    let mut notices = Vec::new();
    let record = login(
        &client,
        Some(listener),
        None,
        &FollowingBrowser { opened: opened.clone() },
        LoginOptions::default(),
        &mut |n| notices.push(n),
    )
    .await
    .unwrap();
    assert_eq!(opened.lock().unwrap().len(), 1);
    assert!(matches!(&notices[0], LoginNotice::BrowserOpened { .. }));
    assert_eq!(fake.authorize_requests()[0]["redirect_uri"], redirect_uri);
    let store = Arc::new(MemoryStore::new());
    let dir = tempfile::tempdir().unwrap();
    let manager = TokenManager::new(store, dir.path());
    let key = StoreKey::new("srv", fake.mcp_url());
    manager.save_login(&key, &record).await.unwrap();
    assert_eq!(manager.current(&key).await.unwrap().unwrap(), record);
}

/// A browser that cannot open anything (headless).
struct NoBrowser;

impl BrowserOpener for NoBrowser {
    fn open(&self, _url: &str) -> Result<(), String> {
        Err("no display".into())
    }
}

#[tokio::test]
async fn headless_login_takes_a_pasted_redirect() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let listener = CallbackListener::bind(CallbackPort::Preferred(0)).await.unwrap();
    let (paste, pasted) = tokio::sync::mpsc::channel(4);
    let (notice_tx, mut notices) = tokio::sync::mpsc::unbounded_channel();
    let login_task = tokio::spawn(async move {
        let mut notify = move |n: LoginNotice| {
            let _ = notice_tx.send(n);
        };
        login(
            &client,
            Some(listener),
            Some(pasted),
            &NoBrowser,
            LoginOptions::default(),
            &mut notify,
        )
        .await
    });
    let Some(LoginNotice::OpenManually { url, reason }) = notices.recv().await else {
        panic!("the login must ask the user to open the URL");
    };
    assert_eq!(reason, "no display");
    // The user authorizes in a browser elsewhere, pastes something wrong, then the redirect URL.
    let redirect = browse(&url).await;
    paste.send("not a redirect at all".to_string()).await.unwrap();
    assert!(matches!(notices.recv().await, Some(LoginNotice::InputRejected { .. })));
    paste.send(redirect).await.unwrap();
    let record = login_task.await.unwrap().unwrap();
    assert!(fake.is_valid_access_token(record.access_token.expose()));
}

#[tokio::test]
async fn paste_only_login_with_a_non_loopback_redirect_uri() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let (paste, pasted) = tokio::sync::mpsc::channel(1);
    let (notice_tx, mut notices) = tokio::sync::mpsc::unbounded_channel();
    let options = LoginOptions {
        open_browser: false,
        redirect_uri: Some("https://app.example/oauth/callback".into()),
        ..LoginOptions::default()
    };
    let login_task = tokio::spawn(async move {
        let mut notify = move |n: LoginNotice| {
            let _ = notice_tx.send(n);
        };
        login(&client, None, Some(pasted), &NoBrowser, options, &mut notify).await
    });
    let Some(LoginNotice::OpenManually { url, .. }) = notices.recv().await else {
        panic!("the login must print the URL");
    };
    let redirect = browse(&url).await;
    assert!(redirect.starts_with("https://app.example/oauth/callback?"));
    paste.send(redirect).await.unwrap();
    let record = login_task.await.unwrap().unwrap();
    assert_eq!(record.client.redirect_uris, ["https://app.example/oauth/callback"]);
}

fn identity_assertion_config(fake: &crate::fake_as::FakeAs, id_token: &str) -> pimcp_config::IdentityAssertionConfig {
    let mut config = pimcp_config::IdentityAssertionConfig::default();
    config.idp_issuer = Some(fake.idp_issuer());
    config.idp_client_id = Some("pimcp-at-idp".into());
    config.idp_client_secret = Some(pimcp_config::SecretValue::Plain(Secret::new("idp-secret")));
    config.id_token = Some(pimcp_config::SecretValue::Plain(Secret::new(id_token)));
    config
}

/// A fake AS + IdP whose IdP accepts `idp_id_token`, and an identity-assertion client presenting `id_token`; `tweak`
/// adjusts the client's identity-assertion settings (built by [`identity_assertion_config`]).
async fn identity_assertion_setup(
    idp_id_token: &str,
    id_token: &str,
    tweak: impl FnOnce(&crate::fake_as::FakeAs, &mut pimcp_config::IdentityAssertionConfig),
) -> (std::sync::Arc<crate::fake_as::FakeAs>, pimcp_auth::OAuthClient) {
    let fake = start(FakeAsConfig {
        clients: vec![("xaa-client".into(), Some("xaa-secret".into()))],
        idp_id_tokens: vec![idp_id_token.into()],
        idp_client: Some(("pimcp-at-idp".into(), Some("idp-secret".into()))),
        ..FakeAsConfig::default()
    })
    .await;
    let client = client_with(&fake, |o| {
        o.config.grant_type = OAuthGrant::IdentityAssertion;
        o.config.client_id = Some("xaa-client".into());
        let mut ia = identity_assertion_config(&fake, id_token);
        tweak(&fake, &mut ia);
        o.config.identity_assertion = Some(ia);
        o.client_secret = Some(Secret::new("xaa-secret"));
    });
    (fake, client)
}

#[tokio::test]
async fn identity_assertion_exchanges_the_id_token_then_presents_the_id_jag() {
    let (fake, client) = identity_assertion_setup("planted-id-token", "planted-id-token", |_, _| {}).await;
    assert!(client.is_machine_grant());
    let record = client.obtain().await.unwrap();

    // RFC 8693 at the IdP: found through its OpenID metadata, client_secret_post, the AS issuer as audience.
    assert!(
        fake.well_known_requests()
            .iter()
            .any(|p| p == "/idp/.well-known/openid-configuration")
    );
    let (exchange, used, status) = fake.token_requests(pimcp_auth::TOKEN_EXCHANGE_GRANT).remove(0);
    assert_eq!((used.as_str(), status), ("client_secret_post", 200));
    assert_eq!(exchange["subject_token"], "planted-id-token");
    assert_eq!(
        exchange["subject_token_type"],
        "urn:ietf:params:oauth:token-type:id_token"
    );
    assert_eq!(exchange["requested_token_type"], pimcp_auth::TOKEN_TYPE_ID_JAG);
    assert_eq!(exchange["audience"], fake.issuer());
    assert_eq!(exchange["resource"], fake.mcp_url());
    assert_eq!(exchange["scope"], "mcp");
    // RFC 7523 at the AS: the ID-JAG as assertion, the MCP client's own authentication.
    let (bearer, used, status) = fake.token_requests(pimcp_auth::JWT_BEARER_GRANT).remove(0);
    assert_eq!((used.as_str(), status), ("client_secret_basic", 200));
    assert!(bearer["assertion"].starts_with("idjag-"), "{bearer:?}");
    assert_eq!(bearer["resource"], fake.mcp_url());
    assert!(fake.is_valid_access_token(record.access_token.expose()));
    assert!(record.refresh_token.is_none());
    assert_eq!(record.issuer.as_deref(), Some(fake.issuer().as_str()));

    // "Refresh" runs the whole exchange again (an ID-JAG is single-use and there is no refresh token).
    let again = client.refresh(&record).await.unwrap();
    assert_ne!(again.access_token.expose(), record.access_token.expose());
    assert_eq!(fake.token_requests(pimcp_auth::JWT_BEARER_GRANT).len(), 2);
    // A machine grant never starts a browser flow.
    let err = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
}

#[tokio::test]
async fn identity_assertion_refused_by_the_idp_is_an_error_without_the_id_token() {
    let (fake, client) = identity_assertion_setup("the-real-id-token", "planted-stale-id-token", |fake, ia| {
        // The token endpoint given directly (no IdP discovery).
        ia.idp_issuer = None;
        ia.idp_token_endpoint = Some(format!("{}/token", fake.idp_issuer()));
    })
    .await;
    let err = client.obtain().await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, Error::TokenRefused { .. }), "{text}");
    assert!(text.contains("invalid_grant"), "{text}");
    assert!(!text.contains("planted") && !text.contains("idp-secret"), "{text}");
    assert!(fake.well_known_requests().iter().all(|p| !p.starts_with("/idp")));
    assert!(
        fake.token_requests(pimcp_auth::JWT_BEARER_GRANT).is_empty(),
        "nothing reaches the authorization server without an ID-JAG"
    );
}

#[tokio::test]
async fn identity_assertion_refuses_an_idp_whose_metadata_names_another_issuer() {
    let (fake, client) = identity_assertion_setup("id-token", "id-token", |fake, ia| {
        // The fake serves the IdP's metadata only at /idp; asking for /idp/ still finds it, but its issuer
        // (`{base}/idp`) is not the configured `{base}/idp/` exactly.
        ia.idp_issuer = Some(format!("{}/", fake.idp_issuer()));
    })
    .await;
    let err = client.obtain().await.unwrap_err();
    assert!(matches!(err, Error::IssuerMismatch { .. }), "{err}");
    assert!(fake.token_requests(pimcp_auth::TOKEN_EXCHANGE_GRANT).is_empty());
}
