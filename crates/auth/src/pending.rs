//! Pending authorization-code logins persisted for another process ([`PendingLogins`]): `pimcp-run auth login`
//! starts a login and waits; `pimcp-run auth complete SERVER CODE_OR_URL`, a separate process, loads the login's
//! PKCE verifier, `state`, redirect URI, discovery result and client from here and finishes it.
//!
//! One file per server and URL, `<dataDir>/mcp-oauth/pending/sha256-<hex sha256(name NUL url)>.json`, created 0600
//! (the directory 0700), written atomically, removed when the login completes, is replaced, or is logged out. A
//! record is bound to the server URL and expires after [`PENDING_FLOW_TTL`]; an expired or mismatched one is
//! deleted on read. Its contents (verifier, `state`, a registered client's secret) are never printed or logged:
//! `Debug` redacts them.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use pimcp_config::Secret;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::client::PENDING_FLOW_TTL;
use crate::discovery::Discovered;
use crate::error::{Error, Result};
use crate::record::{ClientRegistration, StoreKey, TokenEndpointAuthMethod, now_ms};
use crate::store::write_private_atomic;

/// One started login, as [`crate::OAuthClient::export_pending`] gives it and
/// [`crate::OAuthClient::import_pending`] takes it back (in another process).
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingLogin {
    /// The server's configured name.
    pub server: String,
    /// The MCP server's URL.
    pub server_url: String,
    pub(crate) state: String,
    pub(crate) verifier: String,
    pub(crate) redirect_uri: String,
    pub(crate) discovered: Discovered,
    pub(crate) client: PendingClient,
    pub(crate) requested_scope: Option<String>,
    /// Unix milliseconds when the authorization was started.
    pub created_at_ms: u64,
}

impl fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingLogin")
            .field("server", &self.server)
            .field("server_url", &crate::error::display_url(&self.server_url))
            .field("state", &"<redacted>")
            .field("verifier", &"<redacted>")
            .field("created_at_ms", &self.created_at_ms)
            .finish_non_exhaustive()
    }
}

impl PendingLogin {
    /// Milliseconds since it was started (0 if the clock went back).
    pub fn age_ms(&self) -> u64 {
        now_ms().saturating_sub(self.created_at_ms)
    }

    /// Older than [`PENDING_FLOW_TTL`].
    pub fn is_expired(&self) -> bool {
        u128::from(self.age_ms()) >= PENDING_FLOW_TTL.as_millis()
    }
}

/// The client of a pending login (a serializable [`ClientRegistration`]).
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PendingClient {
    client_id: String,
    client_secret: Option<String>,
    client_id_issued_at: Option<u64>,
    client_secret_expires_at: Option<u64>,
    redirect_uris: Vec<String>,
    issuer: Option<String>,
    pre_registered: bool,
    auth_method: String,
}

impl From<&ClientRegistration> for PendingClient {
    fn from(c: &ClientRegistration) -> Self {
        PendingClient {
            client_id: c.client_id.clone(),
            client_secret: c.client_secret.as_ref().map(|s| s.expose().to_string()),
            client_id_issued_at: c.client_id_issued_at,
            client_secret_expires_at: c.client_secret_expires_at,
            redirect_uris: c.redirect_uris.clone(),
            issuer: c.issuer.clone(),
            pre_registered: c.pre_registered,
            auth_method: c.auth_method.as_str().to_string(),
        }
    }
}

impl From<PendingClient> for ClientRegistration {
    fn from(c: PendingClient) -> Self {
        ClientRegistration {
            client_id: c.client_id,
            client_secret: c.client_secret.map(Secret::new),
            client_id_issued_at: c.client_id_issued_at,
            client_secret_expires_at: c.client_secret_expires_at,
            redirect_uris: c.redirect_uris,
            issuer: c.issuer,
            pre_registered: c.pre_registered,
            auth_method: TokenEndpointAuthMethod::parse(&c.auth_method).unwrap_or_default(),
        }
    }
}

/// The directory of persisted pending logins.
#[derive(Debug, Clone)]
pub struct PendingLogins {
    dir: PathBuf,
}

impl PendingLogins {
    /// Pending logins under `<data_dir>/mcp-oauth/pending`.
    pub fn new(data_dir: &Path) -> PendingLogins {
        PendingLogins {
            dir: data_dir.join("mcp-oauth").join("pending"),
        }
    }

    /// Where `key`'s pending login lives.
    pub fn path(&self, key: &StoreKey) -> PathBuf {
        let mut hash = Sha256::new();
        hash.update(key.server.as_bytes());
        hash.update([0u8]);
        hash.update(key.url.as_bytes());
        self.dir.join(format!("sha256-{}.json", hex::encode(hash.finalize())))
    }

    /// Persist `login` (replacing the server's previous one): 0600, atomic.
    pub fn save(&self, login: &PendingLogin) -> Result<()> {
        let key = StoreKey::new(login.server.clone(), login.server_url.clone());
        let json = serde_json::to_vec(login).map_err(|e| Error::Task {
            reason: format!("cannot encode a pending login: {e}"),
        })?;
        write_private_atomic(&self.path(&key), &json)
    }

    /// The pending login of `key`, when there is one for exactly this server URL that has not expired. An
    /// expired, unreadable or mismatched file is deleted.
    pub fn load(&self, key: &StoreKey) -> Result<Option<PendingLogin>> {
        let path = self.path(key);
        let bytes = match pimcp_config::read_bounded(&path, crate::store::file::TOKEN_FILE_LIMIT) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::Io {
                    what: "cannot read pending login file",
                    path: path.display().to_string(),
                    source: e,
                });
            }
        };
        let login = match serde_json::from_slice::<PendingLogin>(&bytes) {
            Ok(login) if login.server == key.server && login.server_url == key.url && !login.is_expired() => login,
            _ => {
                tracing::debug!(server = %key.server, "dropping an expired or unusable pending login");
                let _ = fs::remove_file(&path);
                return Ok(None);
            }
        };
        Ok(Some(login))
    }

    /// Forget `key`'s pending login (absent is fine).
    pub fn remove(&self, key: &StoreKey) -> Result<()> {
        let path = self.path(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::Io {
                what: "cannot remove pending login file",
                path: path.display().to_string(),
                source: e,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::discovery::{AuthServerMetadata, MetadataSource};

    fn login(server: &str, url: &str, created_at_ms: u64) -> PendingLogin {
        PendingLogin {
            server: server.into(),
            server_url: url.into(),
            state: "planted-state".into(),
            verifier: "planted-verifier".into(),
            redirect_uri: "http://127.0.0.1:1/callback".into(),
            discovered: Discovered {
                resource_metadata_url: None,
                resource_metadata: None,
                metadata: AuthServerMetadata::default(),
                source: MetadataSource::DefaultEndpoints,
                issuer: None,
                resource: url.into(),
            },
            client: PendingClient::from(&ClientRegistration {
                client_id: "c".into(),
                client_secret: Some(Secret::new("planted-client-secret")),
                auth_method: TokenEndpointAuthMethod::ClientSecretPost,
                ..ClientRegistration::default()
            }),
            requested_scope: Some("mcp".into()),
            created_at_ms,
        }
    }

    #[test]
    fn round_trip_is_private_bound_to_the_url_and_expires() {
        let dir = tempfile::tempdir().unwrap();
        let logins = PendingLogins::new(dir.path());
        let key = StoreKey::new("web", "https://m.example/mcp");
        assert!(logins.load(&key).unwrap().is_none());
        logins.save(&login("web", "https://m.example/mcp", now_ms())).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = fs::metadata(logins.path(&key)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let loaded = logins.load(&key).unwrap().unwrap();
        assert_eq!(loaded.verifier, "planted-verifier");
        let client = ClientRegistration::from(loaded.client.clone());
        assert_eq!(client.auth_method, TokenEndpointAuthMethod::ClientSecretPost);
        assert_eq!(client.client_secret.unwrap().expose(), "planted-client-secret");
        let shown = format!("{loaded:?}");
        assert!(!shown.contains("planted"), "{shown}");

        // Another URL for the same name has no pending login.
        assert!(
            logins
                .load(&StoreKey::new("web", "https://moved.example/mcp"))
                .unwrap()
                .is_none()
        );

        logins.remove(&key).unwrap();
        assert!(logins.load(&key).unwrap().is_none());
        logins.remove(&key).unwrap();

        // An expired one is dropped (and deleted).
        let old = now_ms() - u64::try_from(PENDING_FLOW_TTL.as_millis()).unwrap() - 1;
        logins.save(&login("web", "https://m.example/mcp", old)).unwrap();
        assert!(logins.load(&key).unwrap().is_none());
        assert!(!logins.path(&key).exists());
    }
}
