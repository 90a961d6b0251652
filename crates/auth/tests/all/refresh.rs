//! Refresh: proactive, reactive (401), cancelled callers, revoked grants, and two processes racing a rotating
//! refresh token through one file store.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use pimcp_auth::{Error, FileStore, MemoryStore, StoreKey, TokenManager, TokenStore};
use pimcp_config::OAuthConfig;

use crate::fake_as::FakeAsConfig;
use crate::support::{client, nearly_expired, sha, start, token_tool};

fn manager(store: Arc<dyn TokenStore>, dir: &std::path::Path) -> TokenManager {
    TokenManager::new(store, dir)
}

#[tokio::test]
async fn refresh_happens_before_expiry_and_rotates() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let tokens = manager(Arc::new(MemoryStore::new()), dir.path());
    let key = StoreKey::new("srv", fake.mcp_url());
    let fresh = crate::support::login(&client).await;
    tokens.save_login(&key, &fresh).await.unwrap();
    assert_eq!(
        tokens.refresh_if_needed(&key, &client).await.unwrap(),
        fresh,
        "a fresh token is used as is"
    );
    assert!(fake.token_requests("refresh_token").is_empty());

    // Ten seconds before expiry it is refreshed.
    let first = nearly_expired(&fresh);
    tokens.save_login(&key, &first).await.unwrap();
    let refreshed = tokens.refresh_if_needed(&key, &client).await.unwrap();
    assert_ne!(refreshed.access_token, first.access_token);
    assert_ne!(
        refreshed.refresh_token, first.refresh_token,
        "the fake AS rotates refresh tokens"
    );
    assert_eq!(
        tokens.current(&key).await.unwrap().unwrap(),
        refreshed,
        "persisted before it is returned"
    );
    let (params, method, status) = fake.token_requests("refresh_token").remove(0);
    assert_eq!((method.as_str(), status), ("none", 200));
    assert_eq!(params["resource"], fake.mcp_url());
    assert_eq!(refreshed.client, first.client);

    // With no skew, a token 10 s from expiry is still used.
    let calm = TokenManager::new(Arc::new(MemoryStore::new()), dir.path()).with_skew(Duration::ZERO);
    let nearly = nearly_expired(&refreshed);
    calm.save_login(&key, &nearly).await.unwrap();
    assert_eq!(calm.refresh_if_needed(&key, &client).await.unwrap(), nearly);
    assert_eq!(fake.token_requests("refresh_token").len(), 1);
}

#[tokio::test]
async fn a_401_refreshes_once_and_retries() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let tokens = manager(Arc::new(MemoryStore::new()), dir.path());
    let key = StoreKey::new("srv", fake.mcp_url());
    tokens
        .save_login(&key, &crate::support::login(&client).await)
        .await
        .unwrap();

    fake.revoke_access_tokens();
    let http = reqwest::Client::new();
    let response = tokens
        .send_authorized(&key, &client, |token| http.get(fake.mcp_url()).bearer_auth(token))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(fake.token_requests("refresh_token").len(), 1);
    let stored = tokens.current(&key).await.unwrap().unwrap();
    assert_eq!(Some(stored.access_token.expose().to_string()), fake.last_access_token());

    // A token another process already refreshed is adopted instead of refreshing again.
    let stale = pimcp_config::Secret::new("some-older-token");
    let adopted = tokens.refresh_after_unauthorized(&key, &client, &stale).await.unwrap();
    assert_eq!(adopted, stored);
    assert_eq!(fake.token_requests("refresh_token").len(), 1);
}

#[tokio::test]
async fn a_revoked_refresh_token_needs_auth_and_keeps_the_record() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn TokenStore> = Arc::new(FileStore::new(dir.path()));
    let tokens = manager(store.clone(), dir.path());
    let key = StoreKey::new("srv", fake.mcp_url());
    let record = nearly_expired(&crate::support::login(&client).await);
    tokens.save_login(&key, &record).await.unwrap();

    fake.revoke_refresh_tokens();
    let err = tokens.refresh_if_needed(&key, &client).await.unwrap_err();
    assert!(err.is_needs_auth(), "{err}");
    let text = err.to_string();
    assert!(text.starts_with("server `srv` needs authorization:"), "{text}");
    assert!(text.contains("invalid_grant"), "{text}");
    assert!(!text.contains(record.refresh_token.as_ref().unwrap().expose()));
    assert_eq!(
        store.load(&key).await.unwrap().unwrap(),
        record,
        "the old record is kept"
    );
}

#[tokio::test]
async fn no_stored_token_needs_auth() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let tokens = manager(Arc::new(MemoryStore::new()), dir.path());
    let err = tokens
        .refresh_if_needed(&StoreKey::new("srv", fake.mcp_url()), &client)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NeedsAuth { .. }), "{err}");
}

#[tokio::test]
async fn a_cancelled_caller_does_not_lose_the_rotated_token() {
    let fake = start(FakeAsConfig {
        refresh_delay: Duration::from_millis(300),
        ..FakeAsConfig::default()
    })
    .await;
    let client = client(&fake, OAuthConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn TokenStore> = Arc::new(FileStore::new(dir.path()));
    let tokens = manager(store.clone(), dir.path());
    let key = StoreKey::new("srv", fake.mcp_url());
    let first = nearly_expired(&crate::support::login(&client).await);
    tokens.save_login(&key, &first).await.unwrap();

    // Drop the caller while the AS holds the refresh response.
    let caller = tokens.refresh_if_needed(&key, &client);
    let cancelled = tokio::time::timeout(Duration::from_millis(50), caller).await;
    assert!(cancelled.is_err(), "the caller was cancelled mid-refresh");

    // The owned task still finishes and persists the rotated token; poll toward a deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let stored = loop {
        let stored = store.load(&key).await.unwrap().unwrap();
        if stored.access_token != first.access_token {
            break stored;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the refreshed token was never stored"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(Some(stored.access_token.expose().to_string()), fake.last_access_token());
    assert_eq!(fake.token_requests("refresh_token").len(), 1);
    // The stored refresh token is the live one: the next refresh succeeds.
    tokens.save_login(&key, &nearly_expired(&stored)).await.unwrap();
    let next = tokens.refresh_if_needed(&key, &client).await.unwrap();
    assert_ne!(next.access_token, stored.access_token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_racing_a_rotating_refresh_token_both_end_authorized() {
    let fake = start(FakeAsConfig {
        refresh_delay: Duration::from_millis(400),
        ..FakeAsConfig::default()
    })
    .await;
    let client = client(&fake, OAuthConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn TokenStore> = Arc::new(FileStore::new(dir.path()));
    let key = StoreKey::new("srv", fake.mcp_url());
    let first = nearly_expired(&crate::support::login(&client).await);
    manager(store.clone(), dir.path())
        .save_login(&key, &first)
        .await
        .unwrap();

    let tool = token_tool();
    let mut children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&tool)
                .args(["refresh", dir.path().to_str().unwrap(), "srv", &fake.mcp_url()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Release both at once.
    for child in &mut children {
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    let outputs: Vec<String> = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "child failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                String::from_utf8(out.stdout).unwrap().trim().to_string()
            })
            .collect()
    })
    .await
    .unwrap();

    let newest = fake.last_access_token().unwrap();
    let stored = store.load(&key).await.unwrap().unwrap();
    assert_eq!(stored.access_token.expose(), newest, "the store holds the newest token");
    for output in &outputs {
        assert_eq!(
            output,
            &format!("status=200 token={}", sha(&newest)),
            "both processes end authorized"
        );
    }
    let refreshes = fake.token_requests("refresh_token");
    assert_eq!(refreshes.len(), 1, "one refresh; the other process adopted its result");
    assert!(refreshes.iter().all(|(_, _, status)| *status == 200));
}

#[tokio::test]
async fn host_code_reads_and_updates_url_bound_tokens() {
    let fake = start(FakeAsConfig::default()).await;
    let client = client(&fake, OAuthConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let tokens = manager(Arc::new(MemoryStore::new()), dir.path());
    let key = StoreKey::new("srv", fake.mcp_url());
    let err = tokens.host_tokens(&key, &client).await.unwrap_err();
    assert!(err.is_needs_auth(), "{err}");

    let record = crate::support::login(&client).await;
    tokens.save_login(&key, &nearly_expired(&record)).await.unwrap();
    let shared = tokens.host_tokens(&key, &client).await.unwrap();
    assert_ne!(
        shared.access_token, record.access_token,
        "refreshed before it is handed out"
    );
    assert!(!format!("{shared:?}").contains(shared.access_token.expose()));

    let updated = tokens
        .update_host_tokens(
            &key,
            pimcp_auth::HostTokens {
                access_token: pimcp_config::Secret::new("from-host"),
                refresh_token: None,
                ..shared
            },
        )
        .await
        .unwrap();
    assert_eq!(updated.access_token.expose(), "from-host");
    assert!(
        updated.refresh_token.is_some(),
        "a missing refresh token keeps the stored one"
    );
    assert_eq!(updated.client, record.client);
    let moved = StoreKey::new("srv", "https://moved.example/mcp");
    assert!(
        tokens
            .update_host_tokens(&moved, tokens.host_tokens(&key, &client).await.unwrap())
            .await
            .is_err()
    );
}
