//! Host-config imports: finds and reads the MCP server definitions of Cursor, Claude Code, Claude Desktop,
//! OpenCode, VS Code, Windsurf and Codex at their real per-OS paths, and translates every entry into pimcp's own JSON
//! server shape and field names so the loader parses imported entries exactly like entries of pimcp's own files.
//!
//! Invariants:
//! - Read-only: nothing here writes, creates or locks a file.
//! - Nothing is dropped silently: a host field without a pimcp equivalent, an entry that cannot be translated and a
//!   placeholder pimcp cannot expand each produce an [`ImportNote`] naming the server and the field.
//! - Notes and errors never contain a configured value (env values, header values, tokens, URLs): only names.
//! - Strings are translated to pimcp's interpolation syntax so they mean what they meant to the host:
//!   host placeholders become pimcp ones (`${env:X}` → `${X}`, `${workspaceFolder}` → the project directory) and
//!   text the host took literally is escaped (`$` → `$$`, a leading `!` in env/header values → `!!`).
//!
//! Not imported, on purpose:
//! - Claude Code's project `.mcp.json` is pimcp's own config source 5, loaded with project trust;
//!   importing it again would duplicate it and bypass trust.
//! - VS Code profiles other than the default one (`User/profiles/<id>/mcp.json`), VS Code Insiders, and the legacy
//!   `mcp` key of VS Code's `settings.json`: no stable path. The default-profile `User/mcp.json` is read.
//! - OpenCode's `OPENCODE_CONFIG` / `OPENCODE_CONFIG_DIR` overrides, its remote `.well-known/opencode` defaults and
//!   files in directories above the project directory.
//!
//! Files under the project directory (see [`ImportScope::Project`]) can start arbitrary programs: the loader applies
//! project trust to them exactly as to `.mcp.json`.

mod codex;
mod dotenv;
mod editor;
mod opencode;
mod paths;
mod source;
mod text;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// One host whose config files can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum HostKind {
    /// Cursor.
    #[serde(rename = "cursor")]
    Cursor,
    /// Claude Code.
    #[serde(rename = "claude-code")]
    ClaudeCode,
    /// Claude Desktop.
    #[serde(rename = "claude-desktop")]
    ClaudeDesktop,
    /// OpenCode.
    #[serde(rename = "opencode")]
    OpenCode,
    /// Visual Studio Code.
    #[serde(rename = "vscode")]
    VsCode,
    /// Windsurf.
    #[serde(rename = "windsurf")]
    Windsurf,
    /// OpenAI Codex (TOML config).
    #[serde(rename = "codex")]
    Codex,
}

impl HostKind {
    /// Every host, in the order of the documented `imports` example (docs/configuration.md, section 9).
    pub const ALL: [HostKind; 7] = [
        HostKind::Cursor,
        HostKind::ClaudeCode,
        HostKind::ClaudeDesktop,
        HostKind::OpenCode,
        HostKind::VsCode,
        HostKind::Windsurf,
        HostKind::Codex,
    ];

    /// The id used in `"imports": [...]`.
    pub fn id(self) -> &'static str {
        match self {
            HostKind::Cursor => "cursor",
            HostKind::ClaudeCode => "claude-code",
            HostKind::ClaudeDesktop => "claude-desktop",
            HostKind::OpenCode => "opencode",
            HostKind::VsCode => "vscode",
            HostKind::Windsurf => "windsurf",
            HostKind::Codex => "codex",
        }
    }

    /// Parses an id of [`HostKind::id`], ignoring ASCII case and surrounding whitespace.
    pub fn from_id(s: &str) -> Option<HostKind> {
        let s = s.trim();
        HostKind::ALL.into_iter().find(|host| host.id().eq_ignore_ascii_case(s))
    }

    /// The product name, for notes and messages.
    pub fn display_name(self) -> &'static str {
        match self {
            HostKind::Cursor => "Cursor",
            HostKind::ClaudeCode => "Claude Code",
            HostKind::ClaudeDesktop => "Claude Desktop",
            HostKind::OpenCode => "OpenCode",
            HostKind::VsCode => "VS Code",
            HostKind::Windsurf => "Windsurf",
            HostKind::Codex => "Codex",
        }
    }
}

impl std::fmt::Display for HostKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// The operating system whose path conventions apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux (and other Unix-likes).
    Linux,
    /// macOS.
    MacOs,
    /// Windows.
    Windows,
}

impl Os {
    /// The OS this binary was built for (other Unixes use the Linux conventions).
    pub fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::MacOs
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Linux
        }
    }

    fn path_separator(self) -> &'static str {
        match self {
            Os::Windows => "\\",
            Os::Linux | Os::MacOs => "/",
        }
    }
}

/// Everything the importers read from the environment, passed explicitly so tests use temp dirs.
#[derive(Debug, Clone)]
pub struct ImportEnv {
    /// The user's home directory; an empty path disables every user-scope file.
    pub home: PathBuf,
    /// The project (workspace) directory: project-scope files, Claude Code's `projects[<dir>]`, `${workspaceFolder}`.
    pub project_dir: PathBuf,
    /// The OS whose path conventions apply.
    pub os: Os,
    /// `%APPDATA%` (Windows; defaults to `<home>\AppData\Roaming`).
    pub appdata: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (Linux, and OpenCode on every OS; defaults to `<home>/.config`).
    pub xdg_config_home: Option<PathBuf>,
    /// `$CODEX_HOME` (defaults to `<home>/.codex`).
    pub codex_home: Option<PathBuf>,
}

impl ImportEnv {
    /// The real environment: `HOME` (or the platform's home directory), `APPDATA`, `XDG_CONFIG_HOME`, `CODEX_HOME`
    /// and the OS this binary was built for. Empty variables and a relative `XDG_CONFIG_HOME` (invalid per the XDG
    /// spec) are ignored.
    pub fn from_process(project_dir: PathBuf) -> ImportEnv {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        ImportEnv {
            home: dirs::home_dir().unwrap_or_default(),
            project_dir,
            os: Os::current(),
            appdata: var("APPDATA"),
            xdg_config_home: var("XDG_CONFIG_HOME").filter(|p| p.is_absolute()),
            codex_home: var("CODEX_HOME"),
        }
    }
}

/// Whether a host file belongs to the user or to the project directory (which needs project trust).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportScope {
    /// A file of the user's (home directory).
    User,
    /// A file of the project directory (needs project trust).
    Project,
}

/// One host file that was read. `servers` are entries already translated to pimcp's own JSON server shape
/// and field names, so the loader parses them exactly like entries from pimcp's own files. Order: as in the file.
#[derive(Debug, Clone)]
pub struct ImportedFile {
    /// The host the file belongs to.
    pub host: HostKind,
    /// The file.
    pub path: PathBuf,
    /// Its servers, by name, in pimcp's own JSON shape.
    pub servers: Vec<(String, Map<String, Value>)>,
    /// What could not be carried over.
    pub notes: Vec<ImportNote>,
}

impl ImportedFile {
    /// User or project scope of this file for `env` (the loader applies project trust to the latter).
    pub fn scope(&self, env: &ImportEnv) -> ImportScope {
        paths::scope_of(self.host, &self.path, env)
    }
}

/// A host field with no pimcp equivalent (never silently dropped), or a server skipped. Never contains a value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ImportNote {
    /// The server it is about, if one.
    pub server: Option<String>,
    /// The host field it is about, if one.
    pub field: Option<String>,
    /// What was dropped or skipped, and why.
    pub message: String,
}

impl std::fmt::Display for ImportNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.server, &self.field) {
            (Some(server), Some(field)) => write!(f, "server `{server}`, field `{field}`: {}", self.message),
            (Some(server), None) => write!(f, "server `{server}`: {}", self.message),
            (None, Some(field)) => write!(f, "field `{field}`: {}", self.message),
            (None, None) => f.write_str(&self.message),
        }
    }
}

/// Why one host file could not be imported (the other files of the host still are).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not parse (JSON, JSONC or TOML).
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line of the error (1-based).
        line: usize,
        /// The column of the error (1-based).
        column: usize,
        /// What the parser expected.
        message: String,
    },
    /// The file parses but is not shaped like the host's config.
    #[error("{}: {message}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl ImportError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ImportError::Read { path, .. } | ImportError::Syntax { path, .. } | ImportError::Shape { path, .. } => path,
        }
    }
}

/// Reads every existing file of one host (user scope first, then project scope; later entries override earlier ones
/// of the same name when the loader merges). Missing files are not errors (empty Vec). One unreadable/invalid file is
/// an Err for that file only: the results are per file so the others still load.
pub fn read_host(host: HostKind, env: &ImportEnv) -> Vec<Result<ImportedFile, ImportError>> {
    paths::candidates(host, env)
        .into_iter()
        .filter_map(|(_, path)| {
            let text = match source::read(&path) {
                Ok(Some(text)) => text,
                Ok(None) => return None,
                Err(err) => return Some(Err(err)),
            };
            Some(translate_file(host, path, &text, env))
        })
        .collect()
}

/// Candidate paths of a host for this env, whether or not they exist (for `pimcp-run init` and `config import`).
pub fn candidate_paths(host: HostKind, env: &ImportEnv) -> Vec<PathBuf> {
    paths::candidates(host, env).into_iter().map(|(_, path)| path).collect()
}

/// [`candidate_paths`] with the scope of each path.
pub fn candidate_paths_scoped(host: HostKind, env: &ImportEnv) -> Vec<(ImportScope, PathBuf)> {
    paths::candidates(host, env)
}

/// Hosts with at least one existing config file, with those files (for `pimcp-run init`).
pub fn detect_hosts(env: &ImportEnv) -> Vec<(HostKind, Vec<PathBuf>)> {
    HostKind::ALL
        .into_iter()
        .filter_map(|host| {
            let found: Vec<PathBuf> = candidate_paths(host, env).into_iter().filter(|p| p.is_file()).collect();
            (!found.is_empty()).then_some((host, found))
        })
        .collect()
}

/// Parses and translates one host file's text (already read from `path`).
fn translate_file(host: HostKind, path: PathBuf, text: &str, env: &ImportEnv) -> Result<ImportedFile, ImportError> {
    let mut file = ImportedFile {
        host,
        path,
        servers: Vec::new(),
        notes: Vec::new(),
    };
    let root = match host {
        HostKind::Codex => source::parse_toml(&file.path, text)?,
        _ => source::parse_json(&file.path, text)?,
    };
    let Some(root) = root else {
        return Ok(file); // empty or comment-only: nothing configured
    };
    let Value::Object(root) = root else {
        return Err(shape(&file.path, "the top level is not an object"));
    };
    match host {
        HostKind::Codex => codex::translate(&root, &mut file)?,
        HostKind::OpenCode => opencode::translate(&root, env, &mut file)?,
        HostKind::Cursor | HostKind::ClaudeDesktop | HostKind::VsCode | HostKind::Windsurf => {
            editor::translate(&root, env, &mut file)?
        }
        HostKind::ClaudeCode => editor::translate_claude_code(&root, env, &mut file)?,
    }
    Ok(file)
}

fn shape(path: &Path, message: impl Into<String>) -> ImportError {
    ImportError::Shape {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Collects the notes of one server entry.
struct ServerNotes<'a> {
    server: &'a str,
    notes: &'a mut Vec<ImportNote>,
}

impl<'a> ServerNotes<'a> {
    fn new(server: &'a str, notes: &'a mut Vec<ImportNote>) -> ServerNotes<'a> {
        ServerNotes { server, notes }
    }

    fn field(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.notes.push(ImportNote {
            server: Some(self.server.to_string()),
            field: Some(field.into()),
            message: message.into(),
        });
    }

    fn server(&mut self, message: impl Into<String>) {
        self.notes.push(ImportNote {
            server: Some(self.server.to_string()),
            field: None,
            message: message.into(),
        });
    }

    /// The standard note for a host field pimcp has no equivalent for.
    fn unsupported(&mut self, host: HostKind, field: impl Into<String>) {
        self.field(
            field,
            format!("{} field has no pimcp equivalent; not imported", host.display_name()),
        );
    }
}

#[cfg(test)]
mod tests;
