//! The macOS store: the user's login Keychain through `apple-native-keyring-store` (its `keychain` module, the
//! legacy file-based keychain every unsandboxed program can use). Compiled only for macOS.

use std::sync::Arc;

use keyring_core::CredentialStore;

use crate::store::keyring_reason::keyring_reason;

/// The login Keychain store, built on the keyring worker thread.
pub(crate) fn keychain_store() -> std::result::Result<Arc<CredentialStore>, String> {
    let store = apple_native_keyring_store::keychain::Store::new().map_err(|e| keyring_reason(&e))?;
    Ok(store)
}
