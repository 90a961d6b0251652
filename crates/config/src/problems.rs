//! [`ConfigProblem`]: what loading found wrong, how problems are collected while loading, and how they read. A problem names the file, position, server and
//! field; its message never contains a configured value.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// A problem found while loading: the file (and position or server/field) it is about, never a secret value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConfigProblem {
    /// The file, when the problem is in one.
    pub path: Option<PathBuf>,
    /// `line:column` for syntax errors.
    pub position: Option<(usize, usize)>,
    /// The server entry, when the problem is in one.
    pub server: Option<String>,
    /// The field, when the problem is about one.
    pub field: Option<String>,
    /// What is wrong and what to do.
    pub message: String,
    /// Whether the entry or file was skipped or only adjusted.
    pub severity: Severity,
}

impl ConfigProblem {
    /// A problem with only its severity and message; set `path`, `position`, `server` and `field` after.
    pub fn new(severity: Severity, message: impl Into<String>) -> ConfigProblem {
        ConfigProblem {
            path: None,
            position: None,
            server: None,
            field: None,
            message: message.into(),
            severity,
        }
    }
}

/// How bad a [`ConfigProblem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The file or server entry was skipped.
    Error,
    /// Loaded, but something was ignored or adjusted.
    Warning,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(path) = &self.path {
            write!(f, "{}", path.display())?;
            if let Some((line, column)) = self.position {
                write!(f, ":{line}:{column}")?;
            }
            f.write_str(": ")?;
        }
        if let Some(server) = &self.server {
            write!(f, "server `{server}`: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "`{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl ConfigProblem {
    /// Whether the problem made loading skip a file or entry.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Appends problems about one file (or none).
pub(crate) struct Sink<'a> {
    out: &'a mut Vec<ConfigProblem>,
    path: Option<PathBuf>,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(out: &'a mut Vec<ConfigProblem>, path: Option<&Path>) -> Sink<'a> {
        Sink {
            out,
            path: path.map(Path::to_path_buf),
        }
    }

    pub(crate) fn push(&mut self, severity: Severity, server: Option<&str>, field: Option<&str>, message: String) {
        self.out.push(ConfigProblem {
            path: self.path.clone(),
            position: None,
            server: server.map(str::to_string),
            field: field.map(str::to_string),
            message,
            severity,
        });
    }

    pub(crate) fn error(&mut self, server: Option<&str>, field: Option<&str>, message: impl Into<String>) {
        self.push(Severity::Error, server, field, message.into());
    }

    pub(crate) fn warning(&mut self, server: Option<&str>, field: Option<&str>, message: impl Into<String>) {
        self.push(Severity::Warning, server, field, message.into());
    }
}
