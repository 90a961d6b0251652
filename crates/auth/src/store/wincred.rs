//! The Windows store: generic credentials in the Credential Manager through `windows-native-keyring-store`
//! (target name `<account>.<service>`). Compiled only for Windows.

use std::sync::Arc;

use keyring_core::CredentialStore;

use crate::store::keyring_reason::keyring_reason;

/// The Credential Manager store, built on the keyring worker thread.
pub(crate) fn credential_manager_store() -> std::result::Result<Arc<CredentialStore>, String> {
    let store = windows_native_keyring_store::Store::new().map_err(|e| keyring_reason(&e))?;
    Ok(store)
}
