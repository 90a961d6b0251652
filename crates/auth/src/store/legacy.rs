//! Import of legacy plaintext token files (`MCP_OAUTH_DIR/sha256-<server-hash>/tokens.json`, pi-mcp-adapter's
//! format): copied once into the configured store when it has no record for the server, then deleted.

use std::path::Path;

use crate::error::{Error, Result};
use crate::record::{StoreKey, TokenRecord};
use crate::store::TokenStore;
use crate::store::file::{TOKENS_FILE, read_record_file};

/// Import `key`'s legacy token file from `legacy_dir` into `store`.
///
/// Returns the imported record, or `None` when there is no legacy file, it is bound to another URL, or the store
/// already holds a record for this server (the store wins; nothing is overwritten or deleted then).
/// After a successful import the legacy plaintext file is removed.
pub async fn import_legacy(legacy_dir: &Path, key: &StoreKey, store: &dyn TokenStore) -> Result<Option<TokenRecord>> {
    let path = legacy_dir.join(key.account()).join(TOKENS_FILE);
    let read_path = path.clone();
    let legacy = tokio::task::spawn_blocking(move || read_record_file(&read_path))
        .await
        .map_err(|e| Error::Task {
            reason: format!("legacy import task: {e}"),
        })??;
    let Some(record) = legacy else { return Ok(None) };
    if record.server_url != key.url {
        tracing::info!(server = %key.server, "legacy oauth tokens are for another server URL; not importing them");
        return Ok(None);
    }
    if store.load_any(key).await?.is_some() {
        return Ok(None);
    }
    store.save(key, &record).await?;
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::warn!(path = %path.display(), error = %e, "imported legacy oauth tokens but could not delete the old file");
    }
    tracing::info!(server = %key.server, store = store.name(), "imported legacy oauth tokens");
    Ok(Some(record))
}
