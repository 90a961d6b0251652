//! [`KeyringStore`]: records as JSON in the OS credential store through `keyring-core`, with the store chosen
//! explicitly per platform (Linux: kernel keyutils, which works headless).
//!
//! All keyring calls run on one dedicated thread. Keyring calls block (syscalls or D-Bus round trips), and on
//! Linux the keyutils *session keyring* is part of a thread's credentials: the worker thread joins a fresh session
//! keyring once (`KEYCTL_JOIN_SESSION_KEYRING`) and every entry is built and used on that thread, so the store works
//! in containers, CI and SSH sessions without touching the credentials of the host's other threads.

use std::sync::{Arc, Mutex, mpsc};

use async_trait::async_trait;
use keyring_core::{CredentialStore, Entry};
use tokio::sync::oneshot;

use crate::error::{Error, Result};
use crate::record::{StoreKey, TokenRecord};
use crate::store::TokenStore;

/// Keyring service name of OAuth records (the account is [`StoreKey::account`]).
pub const KEYRING_SERVICE: &str = "pimcp.oauth";
/// Account used by the probe that checks the store works before it is used.
const PROBE_ACCOUNT: &str = "pimcp-store-probe";

type Job = Box<dyn FnOnce(&Arc<CredentialStore>) + Send>;

/// A [`TokenStore`] in the OS credential store.
pub struct KeyringStore {
    jobs: Mutex<mpsc::Sender<Job>>,
    service: String,
    vendor: String,
}

impl std::fmt::Debug for KeyringStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyringStore")
            .field("service", &self.service)
            .field("vendor", &self.vendor)
            .finish()
    }
}

impl KeyringStore {
    /// The platform's credential store under [`KEYRING_SERVICE`], probed with a write/read/delete round trip.
    /// Fails with [`Error::NoTokenStore`] (naming `settings.tokenStore: "file"`) when it cannot be used.
    pub async fn open_default() -> Result<KeyringStore> {
        KeyringStore::open_with(platform_store, KEYRING_SERVICE).await
    }

    /// The platform's credential store under another service name (tests use a unique one).
    pub async fn open_with_service(service: &str) -> Result<KeyringStore> {
        KeyringStore::open_with(platform_store, service).await
    }

    /// A store built by `factory` on the worker thread (after the Linux session-keyring join), under `service`.
    /// Tests pass `keyring_core::mock::Store::new`; hosts may pass another `keyring-core` store.
    pub async fn open_with<F>(factory: F, service: &str) -> Result<KeyringStore>
    where
        F: FnOnce() -> std::result::Result<Arc<CredentialStore>, String> + Send + 'static,
    {
        let (jobs, receiver) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = oneshot::channel::<std::result::Result<String, String>>();
        std::thread::Builder::new()
            .name("pimcp-keyring".into())
            .spawn(move || worker(factory, receiver, ready_tx))
            .map_err(|e| Error::NoTokenStore {
                reason: format!("cannot start the keyring thread: {e}"),
            })?;
        let vendor = ready_rx
            .await
            .map_err(|_| Error::NoTokenStore {
                reason: "the keyring thread exited during start-up".into(),
            })?
            .map_err(|reason| Error::NoTokenStore { reason })?;
        let store = KeyringStore {
            jobs: Mutex::new(jobs),
            service: service.to_string(),
            vendor,
        };
        store
            .probe()
            .await
            .map_err(|e| Error::NoTokenStore { reason: e.to_string() })?;
        Ok(store)
    }

    /// Which backend this is (e.g. "Linux keyutils, …").
    pub fn vendor(&self) -> &str {
        &self.vendor
    }

    async fn probe(&self) -> Result<()> {
        let service = self.service.clone();
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, PROBE_ACCOUNT).map_err(store_error)?;
            entry.set_password("probe").map_err(store_error)?;
            let back = entry.get_password().map_err(store_error)?;
            let _ = entry.delete_credential();
            if back == "probe" {
                Ok(())
            } else {
                Err(Error::Store {
                    store: "keyring",
                    reason: "probe read back a different value".into(),
                })
            }
        })
        .await
    }

    async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Arc<CredentialStore>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (reply, answer) = oneshot::channel();
        let boxed: Job = Box::new(move |store| {
            let _ = reply.send(job(store));
        });
        self.jobs
            .lock()
            .map_err(|_| Error::Store {
                store: "keyring",
                reason: "job queue lock poisoned".into(),
            })?
            .send(boxed)
            .map_err(|_| Error::Store {
                store: "keyring",
                reason: "the keyring thread is gone".into(),
            })?;
        answer.await.map_err(|_| Error::Store {
            store: "keyring",
            reason: "the keyring thread dropped a request".into(),
        })?
    }
}

fn worker<F>(factory: F, jobs: mpsc::Receiver<Job>, ready: oneshot::Sender<std::result::Result<String, String>>)
where
    F: FnOnce() -> std::result::Result<Arc<CredentialStore>, String>,
{
    let store = match factory() {
        Ok(store) => store,
        Err(reason) => {
            let _ = ready.send(Err(reason));
            return;
        }
    };
    let _ = ready.send(Ok(store.vendor()));
    while let Ok(job) = jobs.recv() {
        job(&store);
    }
}

/// The store for this platform, built on the worker thread.
fn platform_store() -> std::result::Result<Arc<CredentialStore>, String> {
    #[cfg(target_os = "linux")]
    {
        join_new_session_keyring().map_err(|e| format!("cannot join a session keyring (keyctl): {e}"))?;
        let store = linux_keyutils_keyring_store::Store::new().map_err(|e| keyring_reason(&e))?;
        Ok(store)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err("pimcp has no OS credential store for this platform yet".to_string())
    }
}

/// Give the calling thread its own anonymous session keyring, like `keyctl new_session`.
///
/// Without one (containers, CI, services, `su`), keys land in the user-session keyring without possessor rights and
/// linking them into the persistent keyring fails with `EACCES`. Session keyrings belong to the thread's
/// credentials, so this affects only the keyring worker thread.
#[cfg(target_os = "linux")]
fn join_new_session_keyring() -> std::io::Result<i64> {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: keyctl(KEYCTL_JOIN_SESSION_KEYRING, name) reads `name` only; NULL asks for a new anonymous keyring,
    // so no pointer we own is passed and no memory is written.
    #[allow(unsafe_code)]
    let id = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if id < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(id)
    }
}

/// A keyring error as text, without the payload bytes some variants carry.
pub(crate) fn keyring_reason(err: &keyring_core::Error) -> String {
    use keyring_core::Error as K;
    match err {
        K::PlatformFailure(inner) => format!("platform failure: {inner}"),
        K::NoStorageAccess(inner) => format!("no access to the credential store: {inner}"),
        K::NoEntry => "no entry".into(),
        K::BadEncoding(_) => "stored value is not UTF-8".into(),
        K::BadDataFormat(..) => "stored value has an unexpected format".into(),
        K::BadStoreFormat(reason) => format!("store data is malformed: {reason}"),
        K::TooLong(name, limit) => format!("`{name}` is longer than the platform limit of {limit}"),
        K::Invalid(name, reason) => format!("`{name}` is invalid: {reason}"),
        K::Ambiguous(items) => format!("entry matches {} credentials", items.len()),
        K::NoDefaultStore => "no credential store is set".into(),
        K::NotSupportedByStore(issue) => format!("unsupported by the store: {issue}"),
        _ => "unknown keyring error".into(),
    }
}

fn store_error(err: keyring_core::Error) -> Error {
    Error::Store {
        store: "keyring",
        reason: keyring_reason(&err),
    }
}

#[async_trait]
impl TokenStore for KeyringStore {
    fn name(&self) -> &'static str {
        "keyring"
    }

    async fn load_any(&self, key: &StoreKey) -> Result<Option<TokenRecord>> {
        let service = self.service.clone();
        let account = key.account();
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, &account).map_err(store_error)?;
            match entry.get_password() {
                Ok(json) => TokenRecord::from_json(&json).map(Some),
                Err(keyring_core::Error::NoEntry) => Ok(None),
                Err(e) => Err(store_error(e)),
            }
        })
        .await
    }

    async fn save(&self, key: &StoreKey, record: &TokenRecord) -> Result<()> {
        let service = self.service.clone();
        let account = key.account();
        let json = record.to_json_compact()?;
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, &account).map_err(store_error)?;
            entry.set_password(&json).map_err(store_error)
        })
        .await
    }

    async fn delete(&self, key: &StoreKey) -> Result<()> {
        let service = self.service.clone();
        let account = key.account();
        self.run(move |store| {
            let entry = Entry::new_in_store(store, &service, &account).map_err(store_error)?;
            match entry.delete_credential() {
                Ok(()) | Err(keyring_core::Error::NoEntry) => Ok(()),
                Err(e) => Err(store_error(e)),
            }
        })
        .await
    }
}
