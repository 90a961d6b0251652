//! Token stores: the [`TokenStore`] trait, store selection from `settings.tokenStore` (fail closed when the OS
//! credential store is unusable), and the legacy `MCP_OAUTH_DIR` import.

pub(crate) mod file;
#[cfg(target_os = "macos")]
mod keychain;
mod keyring;
mod keyring_reason;
#[cfg(target_os = "linux")]
mod keyutils;
mod legacy;
mod memory;
#[cfg(target_os = "linux")]
mod secret_service;
#[cfg(target_os = "windows")]
mod wincred;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use pimcp_config::TokenStoreKind;

use crate::error::Result;
use crate::record::{StoreKey, TokenRecord};

pub use file::FileStore;
pub(crate) use file::{create_private_dir, write_private_atomic};
pub use keyring::{KEYRING_SERVICE, KeyringStore};
pub use legacy::import_legacy;
pub use memory::MemoryStore;

/// Where OAuth records live. Implementations are keyed by [`StoreKey::account`]; [`TokenStore::load`] applies the
/// URL binding, so a record saved for another URL is never returned.
#[async_trait]
pub trait TokenStore: Send + Sync + std::fmt::Debug {
    /// A short name for messages (`keyring`, `file`, `memory`).
    fn name(&self) -> &'static str;

    /// The stored record for this server name, whatever URL it is bound to.
    async fn load_any(&self, key: &StoreKey) -> Result<Option<TokenRecord>>;

    /// Replace the record for this server name.
    async fn save(&self, key: &StoreKey, record: &TokenRecord) -> Result<()>;

    /// Remove the record for this server name (no error when there is none).
    async fn delete(&self, key: &StoreKey) -> Result<()>;

    /// The record for this server, only if it is bound to `key.url`.
    async fn load(&self, key: &StoreKey) -> Result<Option<TokenRecord>> {
        Ok(self.load_any(key).await?.filter(|record| {
            let bound = record.server_url == key.url;
            if !bound {
                tracing::info!(server = %key.server, "stored oauth tokens are for another server URL; ignoring them");
            }
            bound
        }))
    }
}

/// Open the store `settings.tokenStore` asks for. `Keyring` probes the OS store once and fails closed (with an error
/// naming `settings.tokenStore: "file"`) when it is unusable; `File` keeps 0600 files under `<data_dir>/mcp-oauth`.
pub async fn open_store(kind: TokenStoreKind, data_dir: &Path) -> Result<Arc<dyn TokenStore>> {
    match kind {
        TokenStoreKind::Keyring => Ok(Arc::new(KeyringStore::open_default().await?)),
        TokenStoreKind::File => Ok(Arc::new(FileStore::new(data_dir))),
    }
}
