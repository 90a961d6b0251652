//! Where things live: the environment snapshot ([`EnvMap`]), the agent directory, pimcp's data directory, the six
//! config sources (docs/configuration.md, section 1), and `~` expansion. Nothing here reads the process environment
//! except [`EnvMap::from_process`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::model::SourceKind;

/// A snapshot of environment variables, used for interpolation and for the `PIMCP_*` / `PI_*` / `MCP_*` switches.
/// `Debug` lists the names only: values can be secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EnvMap(BTreeMap<String, String>);

impl EnvMap {
    /// An empty map.
    pub fn new() -> EnvMap {
        EnvMap::default()
    }

    /// Every variable of this process whose name and value are valid UTF-8.
    pub fn from_process() -> EnvMap {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The value when set and not empty.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }

    /// Sets `name` to `value`.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut EnvMap {
        self.0.insert(name.into(), value.into());
        self
    }

    /// Unsets `name`, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.0.remove(name)
    }

    /// The names that are set.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for EnvMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> EnvMap {
        EnvMap(iter.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }
}

impl fmt::Debug for EnvMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// `$PI_CODING_AGENT_DIR` (with `~` expanded) or `~/.pi/agent`.
pub fn agent_dir(home: &Path, env: &EnvMap) -> PathBuf {
    match env.non_empty("PI_CODING_AGENT_DIR") {
        Some(dir) => expand_tilde(dir, home),
        None => home.join(".pi").join("agent"),
    }
}

/// pimcp's data directory (trust records, plugin data, token files): `$PIMCP_DATA_DIR`, else per OS: on Linux
/// `$XDG_DATA_HOME/pimcp` (when absolute) or `~/.local/share/pimcp`; on macOS `~/Library/Application Support/pimcp`;
/// on Windows `%LOCALAPPDATA%\pimcp` (or `~\AppData\Local\pimcp`).
pub fn data_dir(home: &Path, env: &EnvMap) -> PathBuf {
    data_dir_on(crate::imports::Os::current(), home, env)
}

fn data_dir_on(os: crate::imports::Os, home: &Path, env: &EnvMap) -> PathBuf {
    use crate::imports::Os;
    if let Some(dir) = env.non_empty("PIMCP_DATA_DIR") {
        return expand_tilde(dir, home);
    }
    match os {
        Os::Linux => match env.non_empty("XDG_DATA_HOME").map(PathBuf::from) {
            Some(xdg) if xdg.is_absolute() => xdg.join("pimcp"),
            _ => home.join(".local").join("share").join("pimcp"),
        },
        Os::MacOs => home.join("Library").join("Application Support").join("pimcp"),
        Os::Windows => match env.non_empty("LOCALAPPDATA").map(PathBuf::from) {
            Some(local) if local.is_absolute() => local.join("pimcp"),
            _ => home.join("AppData").join("Local").join("pimcp"),
        },
    }
}

/// The path of one of the six sources. `agent_dir` decides source 4 unless `config_path` replaces it.
pub fn source_path(
    kind: SourceKind,
    home: &Path,
    project_dir: &Path,
    agent_dir: &Path,
    config_path: Option<&Path>,
) -> PathBuf {
    match kind {
        SourceKind::SharedGlobal => home.join(".config").join("mcp").join("mcp.json"),
        SourceKind::AgentsGlobal => home.join(".agents").join("mcp.json"),
        SourceKind::AgentsNestedGlobal => home.join(".agents").join("mcp").join("mcp.json"),
        SourceKind::PiGlobal => match config_path {
            Some(path) => path.to_path_buf(),
            None => agent_dir.join("mcp.json"),
        },
        SourceKind::SharedProject => project_dir.join(".mcp.json"),
        SourceKind::PiProject => project_dir.join(".pi").join("mcp.json"),
    }
}

/// `~` → home, `~/x` → home/x; anything else unchanged.
pub fn expand_tilde(value: &str, home: &Path) -> PathBuf {
    if value == "~" {
        return home.to_path_buf();
    }
    match value.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => PathBuf::from(value),
    }
}

/// String form of [`expand_tilde`] for fields kept as strings.
pub(crate) fn expand_tilde_str(value: &str, home: &Path) -> String {
    if value == "~" || value.starts_with("~/") {
        expand_tilde(value, home).to_string_lossy().into_owned()
    } else {
        value.to_string()
    }
}

/// Makes `path` absolute against `base` (no filesystem access).
pub(crate) fn absolute(path: &Path, base: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// Canonical form when the path exists, else the path itself (for comparing and keying).
pub(crate) fn canonical_or_self(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_dir_prefers_env_with_tilde() {
        let home = Path::new("/h");
        let mut env = EnvMap::new();
        assert_eq!(agent_dir(home, &env), PathBuf::from("/h/.pi/agent"));
        env.insert("PI_CODING_AGENT_DIR", "~/custom");
        assert_eq!(agent_dir(home, &env), PathBuf::from("/h/custom"));
    }

    #[cfg(unix)] // Unix paths and XDG variables
    #[test]
    fn data_dir_order() {
        use crate::imports::Os;
        let home = Path::new("/h");
        let mut env = EnvMap::new();
        assert_eq!(
            data_dir_on(Os::Linux, home, &env),
            PathBuf::from("/h/.local/share/pimcp")
        );
        assert_eq!(
            data_dir_on(Os::MacOs, home, &env),
            PathBuf::from("/h/Library/Application Support/pimcp")
        );
        env.insert("XDG_DATA_HOME", "relative/ignored");
        assert_eq!(
            data_dir_on(Os::Linux, home, &env),
            PathBuf::from("/h/.local/share/pimcp")
        );
        env.insert("XDG_DATA_HOME", "/xdg");
        assert_eq!(data_dir_on(Os::Linux, home, &env), PathBuf::from("/xdg/pimcp"));
        assert_eq!(
            data_dir_on(Os::MacOs, home, &env),
            PathBuf::from("/h/Library/Application Support/pimcp")
        );
        env.insert("PIMCP_DATA_DIR", "/override");
        assert_eq!(data_dir_on(Os::MacOs, home, &env), PathBuf::from("/override"));
        assert_eq!(data_dir_on(Os::Linux, home, &env), PathBuf::from("/override"));
    }

    #[cfg(windows)] // Windows paths
    #[test]
    fn data_dir_on_windows() {
        use crate::imports::Os;
        let home = Path::new(r"C:\Users\u");
        let mut env = EnvMap::new();
        assert_eq!(data_dir(home, &env), PathBuf::from(r"C:\Users\u\AppData\Local\pimcp"));
        env.insert("LOCALAPPDATA", r"D:\Local");
        assert_eq!(data_dir_on(Os::Windows, home, &env), PathBuf::from(r"D:\Local\pimcp"));
        env.insert("PIMCP_DATA_DIR", r"E:\pimcp");
        assert_eq!(data_dir(home, &env), PathBuf::from(r"E:\pimcp"));
    }

    #[test]
    fn env_debug_shows_names_only() {
        let env: EnvMap = [("TOKEN", "s3cr3t-value")].into_iter().collect();
        let debug = format!("{env:?}");
        assert!(debug.contains("TOKEN") && !debug.contains("s3cr3t"), "{debug}");
    }

    #[test]
    fn tilde() {
        let home = Path::new("/h");
        assert_eq!(expand_tilde("~", home), PathBuf::from("/h"));
        assert_eq!(expand_tilde("~/a/b", home), PathBuf::from("/h/a/b"));
        assert_eq!(expand_tilde("~user/a", home), PathBuf::from("~user/a"));
        assert_eq!(expand_tilde("/abs", home), PathBuf::from("/abs"));
    }
}
