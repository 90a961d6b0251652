//! The metadata cache: `<agentDir>/pimcp/cache.json`, versioned, one entry per server holding its tools,
//! resources, prompts, instructions and negotiated era, keyed by the server's identity hash. Written atomically
//! (temp + rename, mode 0600) under an exclusive file lock after re-reading the file, so concurrent processes merge
//! rather than clobber; pruned of servers no longer configured. Blocking I/O: call from `spawn_blocking`.
//! [`MetadataCache::load`] keeps every tool schema as a byte range of the file, which stays open ([`ToolSchema`]),
//! parsed only when something needs it; writing copies unparsed schemas back verbatim.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pimcp_surface::{Source, with_source};
use serde::{Deserialize, Serialize};

use crate::catalog::{ServerMetadata, ToolInfo};
use crate::error::{Error, Result};

/// The on-disk format version; another version is ignored (and replaced on the next write).
pub const CACHE_VERSION: u32 = 1;

/// The largest metadata cache file read; a larger one (or one that is not a regular file) reads as empty.
pub(crate) const CACHE_FILE_LIMIT: u64 = 256 * 1024 * 1024;

fn read_cache_text(file: &std::fs::File) -> std::io::Result<String> {
    String::from_utf8(pimcp_config::read_capped(file, CACHE_FILE_LIMIT)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "is not valid UTF-8"))
}
/// An entry is never served as fresh after this long (or after its `ttlMs`, whichever is shorter).
pub const CACHE_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// The cache file name under `<agentDir>/pimcp/`.
pub const CACHE_FILE_NAME: &str = "cache.json";

/// The smallest buffer a write serializes into. A write's buffer holds the previous file and half as much again,
/// at least this: a few servers' metadata then serializes without the buffer growing (each growth copies it, and
/// where it grows depends on the sizes of the catalog's texts, so a write would run code of its own).
const WRITE_BUFFER_MIN: usize = 64 * 1024;

/// The whole file. [`CacheFile::from_json`] and [`MetadataCache::load`] keep tool schemas unparsed; a plain
/// `Deserialize` parses them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheFile {
    /// The file format's version ([`CACHE_VERSION`]); another version is ignored as a whole.
    pub version: u32,
    /// Each server's entry, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, CacheEntry>,
}

impl Default for CacheFile {
    fn default() -> Self {
        CacheFile {
            version: CACHE_VERSION,
            servers: BTreeMap::new(),
        }
    }
}

impl CacheFile {
    /// Parses a cache file's text. Every tool schema stays a range of `text` (shared, not copied) and is parsed
    /// on first use; everything else is parsed now.
    pub fn from_json(text: Arc<String>) -> serde_json::Result<CacheFile> {
        with_source(Source::Text(text.clone()), &text, || serde_json::from_str(&text))
    }

    /// Parses `text`, which is the content of `file`: tool schemas stay ranges of the file, read back on first use.
    fn from_file(file: std::fs::File, text: &str) -> serde_json::Result<CacheFile> {
        with_source(Source::File(Arc::new(file)), text, || serde_json::from_str(text))
    }
}

/// One server's entry. On disk the metadata fields sit beside `configHash` and `cachedAt` in one object; the serde
/// impls spell them out (below) instead of `#[serde(flatten)]`, which would buffer every entry into an intermediate
/// tree and parse it twice (measured: 34 MiB and 43 ms for a 4.7 MB file).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheEntry {
    /// `pimcp_config::identity_hash` of the server definition this entry was discovered with.
    pub config_hash: String,
    /// Shared with the runtime's catalog and server actors, never deep-copied.
    pub metadata: Arc<ServerMetadata>,
    /// Milliseconds since the Unix epoch.
    pub cached_at: u64,
}

/// The on-disk shape of a [`CacheEntry`], written from borrowed parts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EntryOut<'a> {
    config_hash: &'a str,
    tools: &'a [ToolInfo],
    resources: &'a [rmcp::model::Resource],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    resource_templates: &'a [rmcp::model::ResourceTemplate],
    prompts: &'a [rmcp::model::Prompt],
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    protocol_version: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    era: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: &'a Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_scope: &'a Option<String>,
    cached_at: u64,
}

/// The on-disk shape of a [`CacheEntry`], read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EntryIn {
    config_hash: String,
    #[serde(default)]
    tools: Vec<ToolInfo>,
    #[serde(default)]
    resources: Vec<rmcp::model::Resource>,
    #[serde(default)]
    resource_templates: Vec<rmcp::model::ResourceTemplate>,
    #[serde(default)]
    prompts: Vec<rmcp::model::Prompt>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    protocol_version: Option<String>,
    #[serde(default)]
    era: Option<String>,
    #[serde(default)]
    ttl_ms: Option<u64>,
    #[serde(default)]
    cache_scope: Option<String>,
    cached_at: u64,
}

impl Serialize for CacheEntry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let m = self.metadata.as_ref();
        EntryOut {
            config_hash: &self.config_hash,
            tools: &m.tools,
            resources: &m.resources,
            resource_templates: &m.resource_templates,
            prompts: &m.prompts,
            instructions: &m.instructions,
            protocol_version: &m.protocol_version,
            era: &m.era,
            ttl_ms: &m.ttl_ms,
            cache_scope: &m.cache_scope,
            cached_at: self.cached_at,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for CacheEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let mut e = EntryIn::deserialize(deserializer)?;
        // serde grows the lists by doubling; the entry lives as long as the runtime.
        e.tools.shrink_to_fit();
        Ok(CacheEntry {
            config_hash: e.config_hash,
            metadata: Arc::new(ServerMetadata {
                tools: e.tools,
                resources: e.resources.into(),
                resource_templates: e.resource_templates.into(),
                prompts: e.prompts.into(),
                instructions: e.instructions,
                protocol_version: e.protocol_version,
                era: e.era,
                ttl_ms: e.ttl_ms,
                cache_scope: e.cache_scope,
            }),
            cached_at: e.cached_at,
        })
    }
}

/// How usable an entry is for a given server definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Within its age: used as the server's metadata until it connects.
    Fresh,
    /// Older than 7 days or its positive `ttlMs`: served marked stale when the server cannot be reached.
    Stale,
}

impl CacheEntry {
    /// An entry for the server whose identity hashes to `config_hash`, written at `now`.
    pub fn new(config_hash: String, metadata: impl Into<Arc<ServerMetadata>>, now: SystemTime) -> CacheEntry {
        CacheEntry {
            config_hash,
            metadata: metadata.into(),
            cached_at: epoch_ms(now),
        }
    }

    /// `None` when the entry belongs to another definition of the server (hash mismatch).
    pub fn freshness(&self, config_hash: &str, now: SystemTime) -> Option<Freshness> {
        if self.config_hash != config_hash {
            return None;
        }
        // `ttlMs: 0` (what rmcp servers send by default) means "revalidate before reusing the list". The cache
        // never stands in for a live listing (every connect rediscovers), so 0 adds no bound; a positive `ttlMs`
        // shortens the 7 days.
        let max_age = match self.metadata.ttl_ms {
            Some(ttl) if ttl > 0 => CACHE_MAX_AGE.min(Duration::from_millis(ttl)),
            _ => CACHE_MAX_AGE,
        };
        let age = epoch_ms(now).saturating_sub(self.cached_at);
        if self.cached_at > epoch_ms(now) + 60_000 || u128::from(age) >= max_age.as_millis() {
            Some(Freshness::Stale)
        } else {
            Some(Freshness::Fresh)
        }
    }
}

/// Milliseconds since the Unix epoch (0 for times before it).
pub(crate) fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The cache file of one agent directory.
#[derive(Debug, Clone)]
pub struct MetadataCache {
    path: PathBuf,
}

impl MetadataCache {
    /// `<agent_dir>/pimcp/cache.json`.
    pub fn in_agent_dir(agent_dir: &Path) -> MetadataCache {
        MetadataCache {
            path: agent_dir.join("pimcp").join(CACHE_FILE_NAME),
        }
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock_path(&self) -> PathBuf {
        self.path.with_extension("json.lock")
    }

    /// Reads the file; a missing, unreadable, unparsable or other-version file reads as empty. Tool schemas stay
    /// on disk: the file is kept open (by the schemas that point into it) and each is read and parsed on first use.
    pub fn load(&self) -> CacheFile {
        self.load_with(|path| {
            let file = pimcp_config::open_regular(path)?;
            let text = read_cache_text(&file)?;
            Ok(CacheFile::from_file(file, &text))
        })
    }

    /// [`MetadataCache::load`] with the text kept in memory (for a read-modify-write that copies it all back).
    fn load_in_memory(&self) -> CacheFile {
        self.load_with(|path| {
            let text = read_cache_text(&pimcp_config::open_regular(path)?)?;
            Ok(CacheFile::from_json(Arc::new(text)))
        })
    }

    fn load_with(&self, read: impl FnOnce(&Path) -> std::io::Result<serde_json::Result<CacheFile>>) -> CacheFile {
        match read(&self.path) {
            Ok(parsed) => match parsed {
                Ok(f) if f.version == CACHE_VERSION => f,
                Ok(f) => {
                    tracing::info!(path = %self.path.display(), version = f.version, "ignoring metadata cache of another version");
                    CacheFile::default()
                }
                Err(e) => {
                    tracing::warn!(path = %self.path.display(), error = %e, "ignoring unparsable metadata cache");
                    CacheFile::default()
                }
            },
            Err(_) => CacheFile::default(),
        }
    }

    /// Whether the file exists at all (a first run has none).
    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// Under the lock: re-read the file, apply `upserts`, drop `removals`, prune every server not in `configured`
    /// (when given), and write it back atomically with mode 0600.
    pub fn update(
        &self,
        upserts: Vec<(String, CacheEntry)>,
        removals: &[String],
        configured: Option<&BTreeSet<String>>,
    ) -> Result<()> {
        let err = |what: &str, e: std::io::Error| Error::Cache {
            path: self.path.display().to_string(),
            message: format!("{what}: {e}"),
            source: Some(crate::error::Cause::new(e)),
        };
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        std::fs::create_dir_all(&dir).map_err(|e| err("create directory", e))?;
        let lock = open_private(&self.lock_path(), false).map_err(|e| err("open lock file", e))?;
        fs4::FileExt::lock(&lock).map_err(|e| err("lock", e))?;
        let result = (|| {
            let previous_len = std::fs::metadata(&self.path).map_or(0, |m| m.len());
            let mut file = self.load_in_memory();
            for (name, entry) in upserts {
                file.servers.insert(name, entry);
            }
            for name in removals {
                file.servers.remove(name);
            }
            if let Some(configured) = configured {
                file.servers.retain(|name, _| configured.contains(name));
            }
            let mut bytes = Vec::with_capacity(write_buffer_len(previous_len));
            serde_json::to_writer(&mut bytes, &file).map_err(|e| err("serialize", std::io::Error::other(e)))?;
            let tmp = dir.join(format!(".{CACHE_FILE_NAME}.{}.tmp", std::process::id()));
            {
                let mut f = open_private(&tmp, true).map_err(|e| err("create temp file", e))?;
                f.write_all(&bytes).map_err(|e| err("write temp file", e))?;
                f.sync_all().map_err(|e| err("sync temp file", e))?;
            }
            std::fs::rename(&tmp, &self.path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                err("rename temp file", e)
            })
        })();
        let _ = fs4::FileExt::unlock(&lock);
        result
    }
}

/// The capacity of the buffer a write serializes into, after a file of `previous_len` bytes.
fn write_buffer_len(previous_len: u64) -> usize {
    let previous = usize::try_from(previous_len).unwrap_or(usize::MAX);
    previous.saturating_add(previous / 2).max(WRITE_BUFFER_MIN)
}

/// Opens (creating) a file readable and writable by the owner only.
fn open_private(path: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true).write(true).read(true);
    if truncate {
        opts.truncate(true);
    }
    let f = pimcp_config::private_fs::file(&mut opts).open(path)?;
    pimcp_config::private_fs::restrict(&f)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::catalog::tests::tool;

    fn meta(tools: &[&str]) -> ServerMetadata {
        ServerMetadata {
            tools: tools.iter().map(|t| tool(t)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_write_buffer_holds_the_previous_file_and_half_again() {
        assert_eq!(write_buffer_len(0), WRITE_BUFFER_MIN);
        assert_eq!(write_buffer_len(1000), WRITE_BUFFER_MIN);
        assert_eq!(write_buffer_len(1 << 20), 3 << 19);
        assert_eq!(write_buffer_len(u64::MAX), usize::MAX);
    }

    #[cfg(unix)]
    #[test]
    fn a_cache_that_is_a_device_or_a_fifo_reads_as_empty_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::in_agent_dir(dir.path());
        std::fs::create_dir_all(cache.path().parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/zero", cache.path()).unwrap();
        assert_eq!(cache.load(), CacheFile::default());
        std::fs::remove_file(cache.path()).unwrap();
        let made = std::process::Command::new("mkfifo").arg(cache.path()).status().unwrap();
        assert!(made.success());
        assert_eq!(cache.load(), CacheFile::default());
        assert_eq!(cache.load_in_memory(), CacheFile::default());
    }

    #[test]
    fn roundtrip_is_private_and_atomic() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::in_agent_dir(dir.path());
        assert!(!cache.exists());
        assert_eq!(cache.load(), CacheFile::default());
        let now = SystemTime::now();
        cache
            .update(
                vec![("a".into(), CacheEntry::new("h1".into(), meta(&["echo"]), now))],
                &[],
                None,
            )
            .unwrap();
        let loaded = cache.load();
        assert_eq!(loaded.servers["a"].metadata.tools[0].name, "echo");
        assert_eq!(loaded.servers["a"].freshness("h1", now), Some(Freshness::Fresh));
        assert_eq!(loaded.servers["a"].freshness("other", now), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(cache.path()).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        // No temp files left behind.
        let leftovers: Vec<_> = std::fs::read_dir(cache.path().parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn concurrent_writers_merge() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::in_agent_dir(dir.path());
        let now = SystemTime::now();
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    let name = format!("s{i}");
                    cache
                        .update(
                            vec![(name, CacheEntry::new(format!("h{i}"), meta(&["t"]), now))],
                            &[],
                            None,
                        )
                        .unwrap();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(cache.load().servers.len(), 8);
    }

    #[test]
    fn prune_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::in_agent_dir(dir.path());
        let now = SystemTime::now();
        let e = |h: &str| CacheEntry::new(h.into(), meta(&["t"]), now);
        cache
            .update(
                vec![("a".into(), e("1")), ("b".into(), e("2")), ("c".into(), e("3"))],
                &[],
                None,
            )
            .unwrap();
        let configured: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
        cache.update(vec![], &["b".to_owned()], Some(&configured)).unwrap();
        assert_eq!(cache.load().servers.keys().cloned().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn ttl_and_max_age_make_entries_stale() {
        let now = SystemTime::now();
        let mut m = meta(&["t"]);
        m.ttl_ms = Some(1000);
        let e = CacheEntry::new("h".into(), m, now - Duration::from_secs(2));
        assert_eq!(e.freshness("h", now), Some(Freshness::Stale));
        let e = CacheEntry::new("h".into(), meta(&["t"]), now - Duration::from_secs(8 * 24 * 3600));
        assert_eq!(e.freshness("h", now), Some(Freshness::Stale));
        let e = CacheEntry::new("h".into(), meta(&["t"]), now - Duration::from_secs(6 * 24 * 3600));
        assert_eq!(e.freshness("h", now), Some(Freshness::Fresh));
        // `ttlMs: 0` asks for revalidation before reuse, which every connect does: no bound beyond the 7 days.
        let mut m = meta(&["t"]);
        m.ttl_ms = Some(0);
        assert_eq!(
            CacheEntry::new("h".into(), m.clone(), now).freshness("h", now),
            Some(Freshness::Fresh)
        );
        assert_eq!(
            CacheEntry::new("h".into(), m, now - Duration::from_secs(8 * 24 * 3600)).freshness("h", now),
            Some(Freshness::Stale)
        );
    }

    fn schema_tool(name: &str, schema: serde_json::Value) -> ToolInfo {
        let mut t = tool(name);
        t.input_schema = pimcp_surface::ToolSchema::parsed(Arc::new(serde_json::from_value(schema).unwrap()));
        t
    }

    fn catalog_of(file: &CacheFile) -> crate::catalog::Catalog {
        let configs: Vec<_> = file.servers.keys().map(|n| crate::catalog::tests::server(n)).collect();
        let inputs: Vec<_> = configs
            .iter()
            .map(|c| crate::catalog::ServerInput {
                config: c,
                metadata: Some((&*file.servers[&c.name].metadata, crate::catalog::MetadataSource::Cache)),
            })
            .collect();
        crate::catalog::Catalog::build(pimcp_config::ToolPrefix::Server, &inputs)
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "replaces a file another handle holds open, which Windows allows through std's POSIX rename semantics and Wine does not"
    )]
    fn cached_schemas_load_unparsed_parse_on_first_use_and_write_back_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::in_agent_dir(dir.path());
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "é \"quoted\""}, "n": {"type": "integer"}},
            "required": ["text"],
        });
        let mut m = meta(&[]);
        m.tools = vec![schema_tool("echo", schema.clone()), tool("plain")];
        m.tools[0].output_schema = Some(pimcp_surface::ToolSchema::parsed(Arc::new(
            serde_json::from_value(serde_json::json!({"type": "object"})).unwrap(),
        )));
        let now = SystemTime::now();
        cache
            .update(vec![("a".into(), CacheEntry::new("h".into(), m, now))], &[], None)
            .unwrap();
        let written = std::fs::read(cache.path()).unwrap();

        let loaded = cache.load();
        let tools = &loaded.servers["a"].metadata.tools;
        assert!(
            tools.iter().all(|t| !t.input_schema.is_parsed()),
            "schemas are not parsed at load"
        );
        let catalog = catalog_of(&loaded);
        let echo = catalog.get("a_echo").unwrap();
        assert!(!echo.input_schema.is_parsed());
        assert_eq!(
            serde_json::Value::Object((*echo.input_schema().unwrap()).clone()),
            schema
        );
        assert!(
            tools[0].input_schema.is_parsed(),
            "the catalog shares the parse with the entry"
        );
        assert_eq!(echo.output_schema().unwrap().unwrap()["type"], "object");
        assert!(!tools[1].input_schema.is_parsed(), "other tools stay unparsed");

        // Writing back (another server's upsert) copies the entry unchanged, parsed or not.
        cache
            .update(
                vec![("b".into(), CacheEntry::new("h".into(), meta(&["x"]), now))],
                &["b".to_owned()],
                None,
            )
            .unwrap();
        assert_eq!(std::fs::read(cache.path()).unwrap(), written);
        assert_eq!(cache.load(), loaded);
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "replaces a file another handle holds open, which Windows allows through std's POSIX rename semantics and Wine does not"
    )]
    fn a_corrupt_cached_schema_fails_only_its_tool_and_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::in_agent_dir(dir.path());
        std::fs::create_dir_all(cache.path().parent().unwrap()).unwrap();
        let good = r#"{"name":"good","inputSchema":{"type":"object"}}"#;
        let text = format!(
            r#"{{"version":1,"servers":{{"a":{{"configHash":"h","tools":[{{"name":"bad","inputSchema":[1,2]}},{good}],"resources":[],"prompts":[],"cachedAt":1}},"b":{{"configHash":"h","tools":[{good}],"resources":[],"prompts":[],"cachedAt":1}}}}}}"#
        );
        std::fs::write(cache.path(), &text).unwrap();
        let loaded = cache.load();
        assert_eq!(loaded.servers.len(), 2, "the file is not rejected");
        let catalog = catalog_of(&loaded);
        let err = catalog.get("a_bad").unwrap().input_schema().unwrap_err();
        assert!(matches!(&err, Error::Schema { server, tool, .. } if server == "a" && tool == "bad"));
        let msg = err.to_string();
        assert!(
            msg.starts_with("the cached inputSchema of tool `bad` on server `a` is unusable: invalid type"),
            "{msg}"
        );
        assert_eq!(err.category(), crate::ErrorCategory::Other);
        assert!(catalog.get("a_good").unwrap().input_schema().is_ok());
        assert!(catalog.get("b_good").unwrap().input_schema().is_ok());
        // The unusable text is written back as it was.
        cache.update(vec![], &[], None).unwrap();
        assert_eq!(std::fs::read_to_string(cache.path()).unwrap(), text);
    }

    #[test]
    fn other_versions_and_garbage_read_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::in_agent_dir(dir.path());
        std::fs::create_dir_all(cache.path().parent().unwrap()).unwrap();
        std::fs::write(cache.path(), br#"{"version":99,"servers":{}}"#).unwrap();
        assert_eq!(cache.load(), CacheFile::default());
        std::fs::write(cache.path(), b"not json").unwrap();
        assert_eq!(cache.load(), CacheFile::default());
        cache.update(vec![], &[], None).unwrap();
        assert_eq!(cache.load().version, CACHE_VERSION);
    }
}
