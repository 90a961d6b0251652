//! [`MemoryStore`]: records in a process-local map, for tests and for hosts that manage persistence themselves.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::record::{StoreKey, TokenRecord};
use crate::store::TokenStore;

/// An in-memory [`TokenStore`].
#[derive(Default)]
pub struct MemoryStore {
    records: Mutex<HashMap<String, TokenRecord>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n_records = self.records.lock().map(|r| r.len()).unwrap_or(0);
        f.debug_struct("MemoryStore").field("n_records", &n_records).finish()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn map(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, TokenRecord>>> {
        self.records.lock().map_err(|_| Error::Store {
            store: "memory",
            reason: "lock poisoned".into(),
        })
    }
}

#[async_trait]
impl TokenStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn load_any(&self, key: &StoreKey) -> Result<Option<TokenRecord>> {
        Ok(self.map()?.get(&key.account()).cloned())
    }

    async fn save(&self, key: &StoreKey, record: &TokenRecord) -> Result<()> {
        self.map()?.insert(key.account(), record.clone());
        Ok(())
    }

    async fn delete(&self, key: &StoreKey) -> Result<()> {
        self.map()?.remove(&key.account());
        Ok(())
    }
}
