//! [`TokenManager`]: a token store plus single-flight refresh across processes.
//!
//! A refresh takes an exclusive file lock per server (`<dataDir>/mcp-oauth/locks/sha256-<hash>.lock`), re-reads
//! the store, adopts a token a sibling process stored meanwhile, and otherwise refreshes in a task it owns: a
//! caller that is cancelled mid-refresh cannot lose a rotated refresh token, because the task still persists the
//! result before it releases the lock. A failed refresh leaves the stored record as it was.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use pimcp_config::Secret;

use crate::client::OAuthClient;
use crate::error::{Error, Result};
use crate::record::{StoreKey, TokenRecord};
use crate::store::TokenStore;

/// Refresh proactively when the access token expires within this window (or within half its lifetime, if shorter).
pub const REFRESH_SKEW: Duration = Duration::from_secs(60);
/// Longest wait for another process's refresh of the same server.
pub const REFRESH_LOCK_WAIT: Duration = Duration::from_secs(60);
/// Poll interval while another process holds the refresh lock.
const LOCK_POLL: Duration = Duration::from_millis(20);

/// Token store + cross-process refresh coordination for every OAuth server of one data directory.
#[derive(Debug, Clone)]
pub struct TokenManager {
    store: Arc<dyn TokenStore>,
    lock_dir: PathBuf,
    skew: Duration,
}

impl TokenManager {
    /// Locks live under `<data_dir>/mcp-oauth/locks`, whatever the store.
    pub fn new(store: Arc<dyn TokenStore>, data_dir: &Path) -> TokenManager {
        TokenManager {
            store,
            lock_dir: data_dir.join("mcp-oauth").join("locks"),
            skew: REFRESH_SKEW,
        }
    }

    /// Change the proactive-refresh window (default [`REFRESH_SKEW`]).
    pub fn with_skew(mut self, skew: Duration) -> TokenManager {
        self.skew = skew;
        self
    }

    /// The store the manager reads and writes.
    pub fn store(&self) -> &Arc<dyn TokenStore> {
        &self.store
    }

    /// The stored record bound to `key.url`, without refreshing.
    pub async fn current(&self, key: &StoreKey) -> Result<Option<TokenRecord>> {
        self.store.load(key).await
    }

    /// Store the record of a completed login (under the server's refresh lock, so no refresh overwrites it).
    pub async fn save_login(&self, key: &StoreKey, record: &TokenRecord) -> Result<()> {
        let _lock = acquire_lock(&self.lock_path(key)).await?;
        self.store.save(key, record).await
    }

    /// Remove the server's record (logout).
    pub async fn forget(&self, key: &StoreKey) -> Result<()> {
        let _lock = acquire_lock(&self.lock_path(key)).await?;
        self.store.delete(key).await
    }

    /// A usable record: the stored one if it is not about to expire; otherwise refreshed (once, across processes)
    /// and persisted before it is returned. `client_credentials` servers get a new token when none is stored.
    pub async fn refresh_if_needed(&self, key: &StoreKey, client: &OAuthClient) -> Result<TokenRecord> {
        let seen = self.store.load(key).await?;
        if let Some(record) = &seen
            && !record.needs_refresh(self.skew, SystemTime::now())
        {
            return Ok(record.clone());
        }
        self.spawn_refresh(
            key,
            client,
            Trigger::Expiry {
                seen: seen.map(|r| r.access_token),
            },
        )
        .await
    }

    /// After the server answered 401 to `rejected`: adopt a different stored token if a sibling already refreshed,
    /// else refresh once. The caller retries its request once with the result.
    pub async fn refresh_after_unauthorized(
        &self,
        key: &StoreKey,
        client: &OAuthClient,
        rejected: &Secret,
    ) -> Result<TokenRecord> {
        self.spawn_refresh(key, client, Trigger::Rejected(rejected.clone()))
            .await
    }

    /// Send a request with a bearer token: refreshed first if it is about to expire, and on a 401 refreshed once
    /// (or replaced by a sibling's newer token) and the request sent once more. `build` makes the request from the
    /// access token; it is called at most twice.
    pub async fn send_authorized<F>(&self, key: &StoreKey, client: &OAuthClient, build: F) -> Result<reqwest::Response>
    where
        F: Fn(&str) -> reqwest::RequestBuilder,
    {
        let record = self.refresh_if_needed(key, client).await?;
        let response = send(build(record.access_token.expose())).await?;
        if response.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        drop(response);
        let record = self
            .refresh_after_unauthorized(key, client, &record.access_token)
            .await?;
        send(build(record.access_token.expose())).await
    }

    /// Tokens for cooperating host code (never the client secret, a PKCE verifier or a `state`): the record bound
    /// to `key.url`, refreshed first when it is about to expire.
    pub async fn host_tokens(&self, key: &StoreKey, client: &OAuthClient) -> Result<HostTokens> {
        let record = self.refresh_if_needed(key, client).await?;
        Ok(HostTokens {
            access_token: record.access_token,
            refresh_token: record.refresh_token,
            expires_at: record.expires_at,
            scope: record.scope,
            token_type: record.token_type,
        })
    }

    /// Replace the tokens of the record bound to `key.url` with ones cooperating host code obtained (the client
    /// registration, issuer and endpoints stay). Fails with [`Error::NeedsAuth`] when no such record exists.
    pub async fn update_host_tokens(&self, key: &StoreKey, tokens: HostTokens) -> Result<TokenRecord> {
        let _lock = acquire_lock(&self.lock_path(key)).await?;
        let Some(current) = self.store.load(key).await? else {
            return Err(Error::NeedsAuth {
                server: key.server.clone(),
                reason: "no stored record for this server URL to update; log in first".into(),
            });
        };
        let updated = TokenRecord {
            access_token: tokens.access_token,
            refresh_token: tokens.refresh_token.or(current.refresh_token.clone()),
            expires_at: tokens.expires_at,
            scope: tokens.scope.or(current.scope.clone()),
            token_type: tokens.token_type,
            obtained_at_ms: crate::record::now_ms(),
            ..current
        };
        self.store.save(key, &updated).await?;
        Ok(updated)
    }

    fn lock_path(&self, key: &StoreKey) -> PathBuf {
        self.lock_dir.join(format!("{}.lock", key.account()))
    }

    /// Runs the locked refresh in its own task so that dropping the caller's future cannot abandon it halfway.
    async fn spawn_refresh(&self, key: &StoreKey, client: &OAuthClient, trigger: Trigger) -> Result<TokenRecord> {
        let store = self.store.clone();
        let lock_path = self.lock_path(key);
        let key = key.clone();
        let client = client.clone();
        let skew = self.skew;
        tokio::spawn(async move { locked_refresh(store, lock_path, key, client, skew, trigger).await })
            .await
            .map_err(|e| Error::Task {
                reason: format!("token refresh task: {e}"),
            })?
    }
}

/// The token part of a record, as shared with cooperating host code. `Debug` redacts the tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct HostTokens {
    /// The access token.
    pub access_token: Secret,
    /// The refresh token, when there is one.
    pub refresh_token: Option<Secret>,
    /// Unix seconds.
    pub expires_at: Option<u64>,
    /// The granted scopes, space-separated.
    pub scope: Option<String>,
    /// The token type (`Bearer`).
    pub token_type: String,
}

impl std::fmt::Debug for HostTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTokens")
            .field("access_token", &"<redacted>")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "<redacted>"))
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("token_type", &self.token_type)
            .finish()
    }
}

async fn send(request: reqwest::RequestBuilder) -> Result<reqwest::Response> {
    request.send().await.map_err(|e| Error::Http {
        what: "authorized request",
        url: e
            .url()
            .map(|u| crate::error::display_url(u.as_str()))
            .unwrap_or_default(),
        reason: crate::error::http_reason(&e),
        source: Some(e.without_url()),
    })
}

/// Why a refresh was asked for.
enum Trigger {
    /// The token expires within the skew (or there is none); `seen` is the access token looked at.
    Expiry { seen: Option<Secret> },
    /// The server rejected this access token.
    Rejected(Secret),
}

async fn locked_refresh(
    store: Arc<dyn TokenStore>,
    lock_path: PathBuf,
    key: StoreKey,
    client: OAuthClient,
    skew: Duration,
    trigger: Trigger,
) -> Result<TokenRecord> {
    let _lock = acquire_lock(&lock_path).await?;
    let current = store.load(&key).await?;
    if let Some(record) = &current {
        let adopt = match &trigger {
            // Another process replaced the token we looked at (however short-lived the new one is), or it is fine.
            Trigger::Expiry { seen } => {
                seen.as_ref() != Some(&record.access_token) || !record.needs_refresh(skew, SystemTime::now())
            }
            Trigger::Rejected(rejected) => record.access_token != *rejected,
        };
        if adopt {
            tracing::debug!(server = %key.server, "adopting a token another process stored");
            return Ok(record.clone());
        }
    }
    let refreshed = match &current {
        Some(record) => client.refresh(record).await?,
        None if client.is_machine_grant() => client.obtain().await?,
        None => {
            return Err(Error::NeedsAuth {
                server: key.server.clone(),
                reason: "no stored token for this server URL; log in first".into(),
            });
        }
    };
    // Everyone who writes takes the lock; this guards against writers that do not (never overwrite a newer record).
    if let Some(latest) = store.load(&key).await?
        && current
            .as_ref()
            .is_some_and(|c| latest.obtained_at_ms > c.obtained_at_ms)
    {
        tracing::warn!(server = %key.server, "a newer token appeared while refreshing; keeping it");
        return Ok(latest);
    }
    store.save(&key, &refreshed).await?;
    tracing::info!(server = %key.server, "oauth token refreshed");
    Ok(refreshed)
}

/// An exclusive advisory lock on `path` (created 0600), polled toward [`REFRESH_LOCK_WAIT`]. Released on drop.
pub(crate) async fn acquire_lock(path: &Path) -> Result<std::fs::File> {
    let deadline = Instant::now() + REFRESH_LOCK_WAIT;
    loop {
        let attempt_path = path.to_path_buf();
        let attempt = tokio::task::spawn_blocking(move || try_lock(&attempt_path))
            .await
            .map_err(|e| Error::Task {
                reason: format!("lock task: {e}"),
            })??;
        if let Some(file) = attempt {
            return Ok(file);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("the token refresh lock `{}`", path.display()),
                seconds: REFRESH_LOCK_WAIT.as_secs(),
            });
        }
        tokio::time::sleep(LOCK_POLL).await;
    }
}

fn try_lock(path: &Path) -> Result<Option<std::fs::File>> {
    let io = |what: &'static str| {
        let path = path.display().to_string();
        move |source| Error::Io { what, path, source }
    };
    if let Some(dir) = path.parent() {
        crate::store::create_private_dir(dir)?;
    }
    let file = pimcp_config::private_fs::file(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )
    .open(path)
    .map_err(io("cannot open lock file"))?;
    match fs4::FileExt::try_lock(&file) {
        Ok(()) => Ok(Some(file)),
        Err(fs4::TryLockError::WouldBlock) => Ok(None),
        Err(fs4::TryLockError::Error(e)) => Err(io("cannot lock")(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("locks").join("a.lock");
        let first = acquire_lock(&path).await.unwrap();
        assert!(try_lock(&path).unwrap().is_none(), "a second lock must wait");
        drop(first);
        // Released at once, unless a process another test forks at that moment still holds a copy of the
        // descriptor until its exec closes it: poll toward a deadline.
        let deadline = Instant::now() + Duration::from_secs(10);
        while try_lock(&path).unwrap().is_none() {
            assert!(Instant::now() < deadline, "the lock was never released");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
