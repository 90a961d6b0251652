//! Planted secrets (tokens, client secret, code, PKCE verifier, state) never appear in `Debug` output or error text.

use std::sync::Arc;

use pimcp_auth::{AuthorizationRequest, FileStore, StoreKey, TokenManager, TokenStore};
use pimcp_config::Secret;

use crate::fake_as::FakeAsConfig;
use crate::support::{REDIRECT, browse, client_with, query, start};

#[tokio::test]
async fn planted_secrets_never_appear_in_debug_output_or_errors() {
    let client_secret = "planted-client-secret-4f1c";
    let fake = start(FakeAsConfig {
        registration: false,
        auth_methods: vec!["client_secret_post".into()],
        clients: vec![("pre-1".into(), Some(client_secret.into()))],
        ..FakeAsConfig::default()
    })
    .await;
    let client = client_with(&fake, |o| {
        o.config.client_id = Some("pre-1".into());
        o.client_secret = Some(Secret::new(client_secret));
    });
    let mut output: Vec<String> = Vec::new();

    let start_flow = client
        .start_authorization(AuthorizationRequest {
            redirect_uri: REDIRECT.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    output.push(format!("{start_flow:?}"));
    let redirect = browse(&start_flow.url).await;
    let code = query(&redirect)["code"].clone();
    // A forged state, then the real redirect, then a replay of the used code.
    output.push(
        client
            .complete(&redirect.replace(&start_flow.state, "forged"))
            .await
            .unwrap_err()
            .to_string(),
    );
    let record = client.complete(&redirect).await.unwrap();
    output.push(client.complete(&redirect).await.unwrap_err().to_string());
    let verifier = fake.token_requests("authorization_code")[0].0["code_verifier"].clone();

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn TokenStore> = Arc::new(FileStore::new(dir.path()));
    let tokens = TokenManager::new(store.clone(), dir.path());
    let key = StoreKey::new("srv", fake.mcp_url());
    tokens
        .save_login(&key, &crate::support::nearly_expired(&record))
        .await
        .unwrap();
    output.push(format!("{record:?} {client:?} {tokens:?} {store:?} {key:?}"));

    // A refresh that the server refuses, and a corrupt stored record.
    fake.revoke_refresh_tokens();
    output.push(tokens.refresh_if_needed(&key, &client).await.unwrap_err().to_string());
    output.push(format!(
        "{:?}",
        tokens.refresh_if_needed(&key, &client).await.unwrap_err()
    ));
    let path = FileStore::new(dir.path()).path_for(&key);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() / 2]).unwrap();
    output.push(store.load(&key).await.unwrap_err().to_string());

    let planted = [
        record.access_token.expose().to_string(),
        record.refresh_token.as_ref().unwrap().expose().to_string(),
        client_secret.to_string(),
        code,
        verifier,
        start_flow.state.clone(),
    ];
    let all = output.join("\n");
    for secret in &planted {
        assert!(!secret.is_empty());
        assert!(!all.contains(secret.as_str()), "a secret leaked into:\n{all}");
    }
    assert!(all.contains("needs authorization"), "{all}");
}
