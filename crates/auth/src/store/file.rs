//! [`FileStore`]: the opt-in (`settings.tokenStore: "file"`) store of 0600 files
//! `<dataDir>/mcp-oauth/sha256-<server-hash>/tokens.json` in pi-mcp-adapter's format, written atomically
//! (temp file in the same directory, fsync, rename, fsync of the directory).

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::record::{StoreKey, TokenRecord};
use crate::store::TokenStore;

/// File name of a record inside its per-server directory.
pub(crate) const TOKENS_FILE: &str = "tokens.json";
/// Directory under the data directory.
pub(crate) const OAUTH_DIR: &str = "mcp-oauth";

/// A [`TokenStore`] of one JSON file per server.
#[derive(Debug, Clone)]
pub struct FileStore {
    root: PathBuf,
}

impl FileStore {
    /// Files go under `<data_dir>/mcp-oauth`.
    pub fn new(data_dir: &Path) -> FileStore {
        FileStore {
            root: data_dir.join(OAUTH_DIR),
        }
    }

    /// A store rooted exactly at `root` (the directory holding the `sha256-…` directories).
    pub fn at_root(root: PathBuf) -> FileStore {
        FileStore { root }
    }

    /// The file that holds `key`'s record.
    pub fn path_for(&self, key: &StoreKey) -> PathBuf {
        self.root.join(key.account()).join(TOKENS_FILE)
    }
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error + use<> {
    let path = path.display().to_string();
    move |source| Error::Io { what, path, source }
}

/// The largest token or pending-login file read; tokens are a few KiB.
pub(crate) const TOKEN_FILE_LIMIT: u64 = 1024 * 1024;

pub(crate) fn read_record_file(path: &Path) -> Result<Option<TokenRecord>> {
    let text = match pimcp_config::read_text_bounded(path, TOKEN_FILE_LIMIT) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("cannot read token file", path)(e)),
    };
    tighten_permissions(path);
    TokenRecord::from_json(&text).map(Some).map_err(|e| Error::Store {
        store: "file",
        reason: format!("{}: {e}", path.display()),
    })
}

/// A token file readable by group or others is made owner-only again (and the fact logged).
fn tighten_permissions(path: &Path) {
    if let Ok(file) = fs::File::open(path)
        && let Ok(meta) = file.metadata()
        && pimcp_config::private_fs::permission_bits(&meta) & 0o077 != 0
    {
        tracing::warn!(path = %path.display(), "token file was readable by others; restricting it to 0600");
        let _ = pimcp_config::private_fs::restrict(&file);
    }
}

pub(crate) fn write_record_file(path: &Path, record: &TokenRecord) -> Result<()> {
    let json = record.to_json()?;
    write_private_atomic(path, json.as_bytes())
}

/// Writes `bytes` to `path` atomically with owner-only permissions: a 0600 temp file beside it (created new, synced),
/// renamed over `path`, then the directory synced. The directory is created 0700 when missing. A failed write leaves
/// `path` as it was and removes the temp file.
pub(crate) fn write_private_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().ok_or_else(|| Error::Store {
        store: "file",
        reason: "file path has no parent".into(),
    })?;
    create_private_dir(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{:016x}.tmp",
        std::process::id(),
        rand::random::<u64>()
    ));
    let result = (|| {
        let mut file = pimcp_config::private_fs::file(fs::OpenOptions::new().write(true).create_new(true))
            .open(&tmp)
            .map_err(io_err("cannot create private file", &tmp))?;
        file.write_all(bytes)
            .map_err(io_err("cannot write private file", &tmp))?;
        file.sync_all().map_err(io_err("cannot sync private file", &tmp))?;
        fs::rename(&tmp, path).map_err(io_err("cannot replace private file", path))?;
        if let Ok(dir_handle) = fs::File::open(dir) {
            let _ = dir_handle.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Create `dir` (and parents) with owner-only permissions on the directories we create.
pub(crate) fn create_private_dir(dir: &Path) -> Result<()> {
    pimcp_config::private_fs::dir(fs::DirBuilder::new().recursive(true))
        .create(dir)
        .map_err(io_err("cannot create directory", dir))
}

async fn blocking<T: Send + 'static>(job: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(job).await.map_err(|e| Error::Task {
        reason: format!("file store task: {e}"),
    })?
}

#[async_trait]
impl TokenStore for FileStore {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn load_any(&self, key: &StoreKey) -> Result<Option<TokenRecord>> {
        let path = self.path_for(key);
        blocking(move || read_record_file(&path)).await
    }

    async fn save(&self, key: &StoreKey, record: &TokenRecord) -> Result<()> {
        let path = self.path_for(key);
        let record = record.clone();
        blocking(move || write_record_file(&path, &record)).await
    }

    async fn delete(&self, key: &StoreKey) -> Result<()> {
        let path = self.path_for(key);
        blocking(move || match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err("cannot delete token file", &path)(e)),
        })
        .await
    }
}
