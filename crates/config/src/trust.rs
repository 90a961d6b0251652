//! Project trust. Project files (`.mcp.json`, `.pi/mcp.json`, and the project-scope host files that
//! imports read, such as `.cursor/mcp.json`) can start arbitrary programs, so their servers run only once the user
//! trusts the directory with `pimcp-run trust [DIR]` (or for one run with `PIMCP_TRUST_PROJECT=1`).
//!
//! A trust record stores the SHA-256 of every such file (or that it was absent) under `<data dir>/trust.json`
//! (mode 0600, written atomically under a lock). A file whose content no longer matches its recorded hash is
//! untrusted again; so is a file that appeared after the record was made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::imports::{self, HostKind, ImportEnv, ImportScope, Os};
use crate::paths::canonical_or_self;

/// The trust store's file name inside the data directory.
pub const TRUST_FILE: &str = "trust.json";
/// pimcp's own project files, relative to the project directory.
pub const PROJECT_CONFIG_FILES: [&str; 2] = [".mcp.json", ".pi/mcp.json"];
const STORE_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct TrustStore {
    version: u32,
    #[serde(default)]
    projects: BTreeMap<String, ProjectRecord>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProjectRecord {
    /// Seconds since the Unix epoch.
    trusted_at: u64,
    /// Relative path → SHA-256 hex of the content when trusted (`null`: the file did not exist).
    files: BTreeMap<String, Option<String>>,
}

/// What `trust_project` recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedProject {
    /// The canonical project directory.
    pub dir: PathBuf,
    /// Each covered file and whether it existed.
    pub files: Vec<(PathBuf, bool)>,
}

/// The command that trusts `dir`, as shown in status and errors.
pub fn trust_command(dir: &Path) -> String {
    let text = dir.display().to_string();
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-~+@:,".contains(c))
    {
        format!("pimcp-run trust {text}")
    } else {
        format!("pimcp-run trust '{}'", text.replace('\'', r"'\''"))
    }
}

/// Records `dir` as trusted with the current hashes of its project config files.
pub fn trust_project(dir: &Path, data_dir: &Path) -> Result<TrustedProject> {
    let dir = canonical_or_self(dir);
    let mut files = BTreeMap::new();
    let mut listed = Vec::new();
    for rel in covered_files(&dir) {
        let abs = dir.join(&rel);
        let hash = hash_file(&abs)?;
        listed.push((abs, hash.is_some()));
        files.insert(rel, hash);
    }
    let trusted_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    update_store(data_dir, |store| {
        store
            .projects
            .insert(dir.to_string_lossy().into_owned(), ProjectRecord { trusted_at, files });
    })?;
    Ok(TrustedProject { dir, files: listed })
}

/// Forgets `dir`. Returns whether it was trusted.
pub fn untrust_project(dir: &Path, data_dir: &Path) -> Result<bool> {
    let key = canonical_or_self(dir).to_string_lossy().into_owned();
    let mut removed = false;
    update_store(data_dir, |store| removed = store.projects.remove(&key).is_some())?;
    Ok(removed)
}

/// Whether every project config file of `dir` matches the trust record.
pub fn is_trusted(dir: &Path, data_dir: &Path) -> bool {
    let view = TrustView::load(dir, data_dir);
    let dir = canonical_or_self(dir);
    view.record.is_some() && covered_files(&dir).iter().all(|rel| view.file_trusted(&dir.join(rel)))
}

/// The trust record of one project, read once per load.
#[derive(Debug, Clone)]
pub(crate) struct TrustView {
    dir: PathBuf,
    record: Option<ProjectRecord>,
}

impl TrustView {
    pub(crate) fn load(dir: &Path, data_dir: &Path) -> TrustView {
        let dir = canonical_or_self(dir);
        let record = read_store(data_dir)
            .ok()
            .and_then(|mut store| store.projects.remove(&*dir.to_string_lossy()));
        TrustView { dir, record }
    }

    /// Whether `file` (inside the project) has exactly the content recorded when the project was trusted.
    pub(crate) fn file_trusted(&self, file: &Path) -> bool {
        let Some(record) = &self.record else {
            return false;
        };
        let file = canonical_or_self(file);
        let Ok(rel) = file.strip_prefix(&self.dir) else {
            return false;
        };
        let Some(recorded) = record.files.get(&*rel.to_string_lossy()) else {
            return false;
        };
        match hash_file(&file) {
            Ok(current) => &current == recorded,
            Err(_) => false,
        }
    }
}

/// After pimcp itself edited `file` in a trusted project (or created it), re-records its hash so the edit does not
/// make the project untrusted. Does nothing when the project was not trusted before.
pub(crate) fn refresh_after_edit(dir: &Path, file: &Path, data_dir: &Path, was_trusted: bool) -> Result<()> {
    if !was_trusted {
        return Ok(());
    }
    let dir = canonical_or_self(dir);
    let file = canonical_or_self(file);
    let Ok(rel) = file.strip_prefix(&dir) else {
        return Ok(());
    };
    let rel = rel.to_string_lossy().into_owned();
    let hash = hash_file(&file)?;
    update_store(data_dir, |store| {
        if let Some(recorded) = store
            .projects
            .get_mut(&*dir.to_string_lossy())
            .and_then(|r| r.files.get_mut(&rel))
        {
            *recorded = hash;
        }
    })
}

/// Project files covered by trust, relative to `dir`: pimcp's own and every project-scope host file imports read.
fn covered_files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = PROJECT_CONFIG_FILES.iter().map(|s| s.to_string()).collect();
    let env = ImportEnv {
        home: PathBuf::new(),
        project_dir: dir.to_path_buf(),
        os: Os::current(),
        appdata: None,
        xdg_config_home: None,
        codex_home: None,
    };
    for host in HostKind::ALL {
        for (scope, path) in imports::candidate_paths_scoped(host, &env) {
            if scope != ImportScope::Project {
                continue;
            }
            if let Ok(rel) = path.strip_prefix(dir) {
                let rel = rel.to_string_lossy().into_owned();
                if !out.contains(&rel) {
                    out.push(rel);
                }
            }
        }
    }
    out
}

fn hash_file(path: &Path) -> Result<Option<String>> {
    match crate::read::read_bounded(path, crate::read::CONFIG_FILE_LIMIT) {
        Ok(bytes) => Ok(Some(hex::encode(Sha256::digest(&bytes)))),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn store_path(data_dir: &Path) -> PathBuf {
    data_dir.join(TRUST_FILE)
}

fn read_store(data_dir: &Path) -> Result<TrustStore> {
    let path = store_path(data_dir);
    match crate::read::read_text_bounded(&path, crate::read::CONFIG_FILE_LIMIT) {
        Ok(text) => serde_json::from_str(&text).map_err(|err| Error::Invalid {
            path,
            message: format!("not a trust store ({err})"),
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(TrustStore {
            version: STORE_VERSION,
            projects: BTreeMap::new(),
        }),
        Err(source) => Err(Error::Read { path, source }),
    }
}

/// Read-modify-write of the store under an exclusive lock on `trust.json.lock`.
fn update_store(data_dir: &Path, change: impl FnOnce(&mut TrustStore)) -> Result<()> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Write { path, source }
    };
    crate::sys::private_dir(std::fs::DirBuilder::new().recursive(true))
        .create(data_dir)
        .map_err(write_err(data_dir))?;
    let lock_path = data_dir.join(format!("{TRUST_FILE}.lock"));
    let lock = crate::sys::private_file(std::fs::OpenOptions::new().create(true).truncate(false).write(true))
        .open(&lock_path)
        .map_err(write_err(&lock_path))?;
    fs4::FileExt::lock(&lock).map_err(write_err(&lock_path))?;
    let mut store = read_store(data_dir)?;
    store.version = STORE_VERSION;
    change(&mut store);
    let text = serde_json::to_string_pretty(&store).map_err(|err| Error::Invalid {
        path: store_path(data_dir),
        message: err.to_string(),
    })?;
    let path = store_path(data_dir);
    crate::atomic::write_atomic(&path, format!("{text}\n").as_bytes(), 0o600).map_err(write_err(&path))?;
    let _ = fs4::FileExt::unlock(&lock);
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn trust_then_change_then_retrust() {
        let project = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join(".mcp.json"), "{}").unwrap();
        assert!(!is_trusted(project.path(), data.path()));

        let record = trust_project(project.path(), data.path()).unwrap();
        assert!(
            record
                .files
                .iter()
                .any(|(p, exists)| p.ends_with(".mcp.json") && *exists)
        );
        assert!(is_trusted(project.path(), data.path()));
        let mode = std::fs::metadata(data.path().join(TRUST_FILE))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);

        std::fs::write(project.path().join(".mcp.json"), "{\"mcpServers\": {}}").unwrap();
        assert!(
            !is_trusted(project.path(), data.path()),
            "changed content is untrusted again"
        );
        trust_project(project.path(), data.path()).unwrap();
        assert!(is_trusted(project.path(), data.path()));

        std::fs::create_dir_all(project.path().join(".pi")).unwrap();
        std::fs::write(project.path().join(".pi/mcp.json"), "{}").unwrap();
        assert!(
            !is_trusted(project.path(), data.path()),
            "a file that appeared later is untrusted"
        );

        let view = TrustView::load(project.path(), data.path());
        assert!(view.file_trusted(&project.path().join(".mcp.json")));
        assert!(!view.file_trusted(&project.path().join(".pi/mcp.json")));

        assert!(untrust_project(project.path(), data.path()).unwrap());
        assert!(!is_trusted(project.path(), data.path()));
    }

    #[test]
    fn command_quotes_odd_paths() {
        assert_eq!(trust_command(Path::new("/work/app")), "pimcp-run trust /work/app");
        assert_eq!(
            trust_command(Path::new("/my dir/it's")),
            r"pimcp-run trust '/my dir/it'\''s'"
        );
    }
}
