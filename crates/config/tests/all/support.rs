//! A temp HOME, project and data dir, and helpers to write files and build `LoadOptions` for them.

use std::path::{Path, PathBuf};

use pimcp_config::{Config, ConfigProblem, EnvMap, LoadOptions, ServerConfig};

pub(crate) struct Sandbox {
    pub root: tempfile::TempDir,
    pub home: PathBuf,
    pub project: PathBuf,
    pub data: PathBuf,
    pub env: EnvMap,
}

impl Sandbox {
    pub(crate) fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let (home, project, data) = (base.join("home"), base.join("project"), base.join("data"));
        for dir in [&home, &project] {
            std::fs::create_dir_all(dir).unwrap();
        }
        Sandbox {
            root,
            home,
            project,
            data,
            env: EnvMap::new(),
        }
    }

    /// A sandbox holding a copy of `tests/fixtures/config/<name>/{home,project}`.
    pub(crate) fn fixture(name: &str) -> Sandbox {
        let sandbox = Sandbox::new();
        let src = fixtures().join(name);
        copy_dir(&src.join("home"), &sandbox.home);
        copy_dir(&src.join("project"), &sandbox.project);
        sandbox
    }

    pub(crate) fn write(&self, path: impl AsRef<Path>, text: &str) -> PathBuf {
        let path = path.as_ref().to_path_buf();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    pub(crate) fn global(&self) -> PathBuf {
        self.home.join(".pi/agent/mcp.json")
    }

    pub(crate) fn opts(&self) -> LoadOptions {
        let mut opts = LoadOptions::new(&self.home, &self.project);
        opts.data_dir = self.data.clone();
        opts.env = self.env.clone();
        opts
    }

    pub(crate) fn load(&self) -> Config {
        pimcp_config::load(&self.opts())
    }
}

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/config")
}

pub(crate) fn copy_dir(src: &Path, dst: &Path) {
    if !src.exists() {
        return;
    }
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let target = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

pub(crate) fn server<'a>(config: &'a Config, name: &str) -> &'a ServerConfig {
    config
        .server(name)
        .unwrap_or_else(|| panic!("no server `{name}`; problems: {:#?}", config.problems))
}

/// Problems mentioning `server`.
pub(crate) fn problems_of<'a>(config: &'a Config, server: &str) -> Vec<&'a ConfigProblem> {
    config
        .problems
        .iter()
        .filter(|p| p.server.as_deref() == Some(server))
        .collect()
}

/// Every problem rendered, for "never contains the value" checks.
pub(crate) fn all_text(config: &Config) -> String {
    let mut text: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
    text.push(format!("{config:?}"));
    text.join("\n")
}
