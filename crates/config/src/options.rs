//! [`LoadOptions`]: where loading looks (home, project, the global file, agent and data directories), the environment
//! it reads, and the six sources of docs/configuration.md as paths.

use std::path::PathBuf;

use crate::imports::{ImportEnv, Os};
use crate::model::SourceKind;
use crate::paths::{self, EnvMap, canonical_or_self};

/// Everything loading reads from the outside world, passed explicitly (tests use temp dirs, never the real HOME).
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The user's home directory (sources 1–4 and host imports).
    pub home: PathBuf,
    /// The project directory (sources 5 and 6, trust, relative paths).
    pub project_dir: PathBuf,
    /// `--config PATH` / library `config_path`: replaces source 4.
    pub config_path: Option<PathBuf>,
    /// Overrides the agent directory (default: `$PI_CODING_AGENT_DIR` from `env`, else `~/.pi/agent`).
    pub agent_dir: Option<PathBuf>,
    /// pimcp's data directory: trust records, plugin data.
    pub data_dir: PathBuf,
    /// Environment snapshot for interpolation and the `PIMCP_*` / `MCP_*` / `PI_*` switches.
    pub env: EnvMap,
    /// Trust the project for this run (`PIMCP_TRUST_PROJECT=1`).
    pub trust_project: bool,
    /// Path conventions for host imports.
    pub os: Os,
}

impl LoadOptions {
    /// Options with an empty environment: only `home` and `project_dir` decide paths.
    pub fn new(home: impl Into<PathBuf>, project_dir: impl Into<PathBuf>) -> LoadOptions {
        let home = home.into();
        let env = EnvMap::new();
        LoadOptions {
            data_dir: paths::data_dir(&home, &env),
            home,
            project_dir: project_dir.into(),
            config_path: None,
            agent_dir: None,
            env,
            trust_project: false,
            os: Os::current(),
        }
    }

    /// The real process: `HOME`, the current environment, `PIMCP_DATA_DIR` / `XDG_DATA_HOME`,
    /// `PIMCP_TRUST_PROJECT=1`. Relative paths are made absolute against the current directory.
    pub fn from_process(project_dir: impl Into<PathBuf>, config_path: Option<PathBuf>) -> LoadOptions {
        let env = EnvMap::from_process();
        let cwd = std::env::current_dir().unwrap_or_default();
        let home = env
            .non_empty("HOME")
            .map(PathBuf::from)
            .or_else(dirs::home_dir)
            .unwrap_or_default();
        LoadOptions {
            data_dir: paths::data_dir(&home, &env),
            home,
            project_dir: paths::absolute(&project_dir.into(), &cwd),
            config_path: config_path.map(|p| paths::absolute(&p, &cwd)),
            agent_dir: None,
            trust_project: env.get("PIMCP_TRUST_PROJECT").map(str::trim) == Some("1"),
            env,
            os: Os::current(),
        }
    }

    /// `agent_dir`, else `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
    pub fn agent_dir(&self) -> PathBuf {
        self.agent_dir
            .clone()
            .unwrap_or_else(|| paths::agent_dir(&self.home, &self.env))
    }

    /// `PIMCP_CONFIG_MODE=exclusive` (case-insensitive): only source 4 is read.
    pub fn exclusive(&self) -> bool {
        self.env
            .get("PIMCP_CONFIG_MODE")
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("exclusive"))
    }

    /// The path of one source (source 4 is `config_path` when set).
    pub fn source_path(&self, kind: SourceKind) -> PathBuf {
        paths::source_path(
            kind,
            &self.home,
            &self.project_dir,
            &self.agent_dir(),
            self.config_path.as_deref(),
        )
    }

    /// pimcp's own global file (source 4): where `init` and `add --global` write.
    pub fn global_file(&self) -> PathBuf {
        self.source_path(SourceKind::PiGlobal)
    }

    /// The sources that are read, lowest precedence first, without duplicates (when two sources are the same
    /// file, only the higher one counts).
    pub fn sources(&self) -> Vec<(SourceKind, PathBuf)> {
        let kinds: Vec<SourceKind> = if self.exclusive() {
            vec![SourceKind::PiGlobal]
        } else {
            vec![
                SourceKind::SharedGlobal,
                SourceKind::AgentsGlobal,
                SourceKind::AgentsNestedGlobal,
                SourceKind::PiGlobal,
                SourceKind::SharedProject,
                SourceKind::PiProject,
            ]
        };
        let all: Vec<(SourceKind, PathBuf)> = kinds.into_iter().map(|k| (k, self.source_path(k))).collect();
        let canon: Vec<PathBuf> = all.iter().map(|(_, p)| canonical_or_self(p)).collect();
        all.iter()
            .enumerate()
            .filter(|(i, _)| !canon[i + 1..].contains(&canon[*i]))
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// What host imports read, from the same snapshot.
    pub fn import_env(&self) -> ImportEnv {
        let path = |name: &str| self.env.non_empty(name).map(PathBuf::from);
        ImportEnv {
            home: self.home.clone(),
            project_dir: self.project_dir.clone(),
            os: self.os,
            appdata: path("APPDATA"),
            xdg_config_home: path("XDG_CONFIG_HOME").filter(|p| p.is_absolute()),
            codex_home: path("CODEX_HOME"),
        }
    }
}
