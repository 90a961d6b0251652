//! Editing config files for the CLI: `add`, `remove`, `enable`/`disable` and `init`'s `imports` line.
//!
//! Every edit is minimal and safe:
//! - only the member it owns is inserted, replaced or removed; every other byte of the file (comments, order,
//!   formatting) stays as it was (see `spans.rs`);
//! - the result is parsed again and checked before anything is written; a file that is not valid JSON is refused and
//!   left untouched;
//! - the file is replaced atomically (temp file + rename), keeping its permission bits (new files: 0600 for global
//!   files, 0644 for project files); a symlinked file is edited at its target;
//! - when the file contains comments (or trailing commas), `<file>.bak` is written first, holding the previous
//!   content (`init` always writes it when the file exists);
//! - `enable`/`disable` write only `disabled` into the project override `.pi/mcp.json` (`disabled: false` only when
//!   a lower layer disables the server), never into the file that defines the server, and never copy other fields;
//! - an edit pimcp makes to a project file of a trusted project re-records that file's hash, so pimcp's own edit does
//!   not make the project untrusted (an untrusted file stays untrusted).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::imports::HostKind;
use crate::load::{load_detailed, load_detailed_with};
use crate::model::{Availability, Origin, SourceKind};
use crate::options::LoadOptions;
use crate::spans::{self, Node};
use crate::trust::TrustView;

/// Which file `add` writes and `remove` edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditScope {
    /// pimcp's global file: `<agentDir>/mcp.json`, or `--config PATH`.
    Global,
    /// The project's `.mcp.json`.
    Project,
}

/// The transport of a server to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerSpec {
    /// A child process.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The URL.
        url: String,
    },
}

/// `pimcp-run add`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddServer {
    /// The server's name.
    pub name: String,
    /// Its transport.
    pub spec: ServerSpec,
    /// `KEY=VALUE` pairs for a stdio server's `env`, written as given (use `${VAR}` to avoid literal secrets).
    pub env: Vec<(String, String)>,
    /// `Name: value` pairs for an HTTP server's `headers`, written as given.
    pub headers: Vec<(String, String)>,
    /// Which file gets it.
    pub scope: EditScope,
}

/// What an edit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EditOutcome {
    /// The file that was (or would have been) edited.
    pub path: PathBuf,
    /// `false` when the file already said what was asked.
    pub changed: bool,
    /// The file did not exist before.
    pub created: bool,
    /// The backup written first.
    pub backup: Option<PathBuf>,
}

/// The file `scope` refers to.
pub fn scope_file(opts: &LoadOptions, scope: EditScope) -> PathBuf {
    match scope {
        EditScope::Global => opts.global_file(),
        EditScope::Project => opts.source_path(SourceKind::SharedProject),
    }
}

/// Adds a server to the file of `req.scope`. Fails if that file already defines the name.
pub fn add_server(opts: &LoadOptions, req: &AddServer) -> Result<EditOutcome> {
    check_name(&req.name)?;
    let path = scope_file(opts, req.scope);
    let mut entry = Map::new();
    match &req.spec {
        ServerSpec::Stdio { command, args } => {
            entry.insert("command".into(), json!(command));
            if !args.is_empty() {
                entry.insert("args".into(), json!(args));
            }
            if !req.env.is_empty() {
                entry.insert(
                    "env".into(),
                    Value::Object(req.env.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
                );
            }
        }
        ServerSpec::Http { url } => {
            entry.insert("url".into(), json!(url));
            if !req.headers.is_empty() {
                entry.insert(
                    "headers".into(),
                    Value::Object(req.headers.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
                );
            }
        }
    }
    let entry = Value::Object(entry);
    let mut problems = Vec::new();
    if crate::entries::parse_server(
        &req.name,
        &entry,
        &mut crate::problems::Sink::new(&mut problems, Some(&path)),
    )
    .is_err()
    {
        let message = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        return Err(Error::Invalid { path, message });
    }
    let doc = Document::read(&path)?;
    if doc.server_member(&req.name).is_some() {
        return Err(Error::ServerExists {
            name: req.name.clone(),
            path,
        });
    }
    let text = doc.set(&["mcpServers", &req.name], &entry)?;
    write(opts, &doc, text, scope_new_mode(req.scope), false)
}

/// Removes a server from every pimcp file of `scope` (all of them when `None`) that defines it.
pub fn remove_server(opts: &LoadOptions, name: &str, scope: Option<EditScope>) -> Result<Vec<EditOutcome>> {
    let mut outcomes = Vec::new();
    for (kind, path) in opts.sources() {
        let in_scope = match scope {
            None => true,
            Some(EditScope::Project) => kind.is_project(),
            Some(EditScope::Global) => !kind.is_project(),
        };
        if !in_scope || !path.is_file() {
            continue;
        }
        let doc = Document::read(&path)?;
        let mut text = doc.text.clone();
        let mut removed = false;
        for key in ["mcpServers", "mcp-servers"] {
            let current = Document {
                path: path.clone(),
                text: text.clone(),
                exists: true,
            };
            if current.member_of(key, name).is_some() {
                text = current.remove(&[key, name])?;
                removed = true;
            }
        }
        if removed {
            outcomes.push(write(opts, &doc, text, 0o600, false)?);
        }
    }
    if outcomes.is_empty() {
        return Err(not_found(opts, name));
    }
    Ok(outcomes)
}

/// `enable` (`disabled == false`) / `disable` (`true`): writes only `disabled` into `<project>/.pi/mcp.json`.
pub fn set_disabled(opts: &LoadOptions, name: &str, disabled: bool) -> Result<EditOutcome> {
    let path = opts.source_path(SourceKind::PiProject);
    let doc = Document::read(&path)?;
    // The override without any availability field of ours: what do the lower layers say?
    let mut base = doc.text.clone();
    for key in ["mcpServers", "mcp-servers"] {
        for field in ["disabled", "enabled"] {
            let current = Document {
                path: path.clone(),
                text: base.clone(),
                exists: doc.exists,
            };
            if current
                .member_of(key, name)
                .and_then(|entry| entry.value.member(field).cloned())
                .is_some()
            {
                base = current.remove(&[key, name, field])?;
            }
        }
        let current = Document {
            path: path.clone(),
            text: base.clone(),
            exists: doc.exists,
        };
        if current
            .member_of(key, name)
            .is_some_and(|entry| matches!(&entry.value, Node::Object { members, .. } if members.is_empty()))
        {
            base = current.remove(&[key, name])?;
        }
    }
    let mut preview_opts = opts.clone();
    preview_opts.trust_project = true;
    let preview = load_detailed_with(&preview_opts, doc.exists.then_some((path.as_path(), base.as_str())));
    let Some(server) = preview.config.server(name) else {
        return Err(not_found(opts, name));
    };
    let lower_disabled = server.availability == Availability::Disabled;
    let based = Document {
        path: path.clone(),
        text: base,
        exists: doc.exists,
    };
    let text = if disabled {
        based.set(&["mcpServers", name, "disabled"], &Value::Bool(true))?
    } else if lower_disabled {
        based.set(&["mcpServers", name, "disabled"], &Value::Bool(false))?
    } else {
        based.text.clone()
    };
    write(opts, &doc, text, 0o644, false)
}

/// Adds `hosts` to the `imports` of pimcp's global file (keeping the hosts already listed), with a backup.
pub fn add_imports(opts: &LoadOptions, hosts: &[HostKind]) -> Result<EditOutcome> {
    let path = opts.global_file();
    let doc = Document::read(&path)?;
    let mut list: Vec<Value> = doc
        .value()
        .and_then(|v| v.get("imports").cloned())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default();
    for host in hosts {
        let id = Value::String(host.id().to_string());
        if !list.contains(&id) {
            list.push(id);
        }
    }
    let text = doc.set(&["imports"], &Value::Array(list))?;
    write(opts, &doc, text, 0o600, true)
}

fn scope_new_mode(scope: EditScope) -> u32 {
    match scope {
        EditScope::Global => 0o600,
        EditScope::Project => 0o644,
    }
}

fn check_name(name: &str) -> Result<()> {
    let reason = if name.trim().is_empty() {
        Some("it is empty")
    } else if name.chars().any(char::is_control) {
        Some("it contains control characters")
    } else if name != name.trim() {
        Some("it starts or ends with whitespace")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidName {
            name: name.escape_debug().to_string(),
            reason: reason.into(),
        }),
        None => Ok(()),
    }
}

/// The error for a name no editable file defines: read-only sources are named, else similar names suggested.
fn not_found(opts: &LoadOptions, name: &str) -> Error {
    let loaded = load_detailed(opts);
    if let Some(server) = loaded.config.server(name) {
        let reason = match &server.origin {
            Origin::Import { host, .. } => {
                format!("it comes from the `{host}` import (imports are read-only); disable it instead")
            }
            Origin::Plugin { plugin, .. } => format!("it comes from the agent plugin `{plugin}`; disable it instead"),
            other => format!("it is defined in {other}"),
        };
        return Error::NotEditable {
            name: name.to_string(),
            reason,
        };
    }
    let mut close: Vec<&str> = loaded
        .config
        .servers
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| {
            n.to_lowercase().contains(&name.to_lowercase())
                || name.to_lowercase().contains(&n.to_lowercase())
                || edit_distance(n, name) <= 2
        })
        .collect();
    close.truncate(3);
    let hint = if close.is_empty() {
        String::new()
    } else {
        format!(" (did you mean `{}`?)", close.join("`, `"))
    };
    Error::UnknownServer {
        name: name.to_string(),
        hint,
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(row[j + 1] + 1);
            prev = current;
        }
    }
    row[b.len()]
}

/// A config file's text (empty when absent), validated before any edit.
#[derive(Debug, Clone)]
struct Document {
    path: PathBuf,
    text: String,
    exists: bool,
}

impl Document {
    fn read(path: &Path) -> Result<Document> {
        let text = match crate::read::read_text_bounded(path, crate::read::CONFIG_FILE_LIMIT) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Document {
                    path: path.to_path_buf(),
                    text: String::new(),
                    exists: false,
                });
            }
            Err(source) => {
                return Err(Error::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let doc = Document {
            path: path.to_path_buf(),
            text,
            exists: true,
        };
        match crate::parse_jsonc(&doc.text) {
            Err(err) => Err(Error::Syntax {
                path: doc.path,
                line: err.line,
                column: err.column,
                message: err.message,
            }),
            Ok(Some(Value::Object(root))) => {
                for key in ["mcpServers", "mcp-servers"] {
                    if root.get(key).is_some_and(|v| !v.is_object()) {
                        return Err(Error::Invalid {
                            path: doc.path,
                            message: format!("`{key}` is not an object"),
                        });
                    }
                }
                Ok(doc)
            }
            Ok(None) => Ok(doc),
            Ok(Some(_)) => Err(Error::Invalid {
                path: doc.path,
                message: "the top level is not an object".into(),
            }),
        }
    }

    fn value(&self) -> Option<Value> {
        crate::parse_jsonc(&self.text).ok().flatten()
    }

    fn root(&self) -> Option<Node> {
        if self.text.trim().is_empty() {
            None
        } else {
            spans::parse(&self.text)
        }
    }

    fn member_of(&self, map: &str, name: &str) -> Option<spans::Member> {
        self.root()?.member(map)?.value.member(name).cloned()
    }

    fn server_member(&self, name: &str) -> Option<spans::Member> {
        self.member_of("mcpServers", name)
            .or_else(|| self.member_of("mcp-servers", name))
    }

    /// The text with `path` set to `value`, creating missing objects on the way.
    fn set(&self, path: &[&str], value: &Value) -> Result<String> {
        let Some(root) = self.root() else {
            // Empty or absent file: a fresh document.
            let mut nested = value.clone();
            for key in path.iter().rev() {
                nested = json!({ *key: nested });
            }
            let mut text = serde_json::to_string_pretty(&nested).map_err(|err| self.invalid(err.to_string()))?;
            text.push('\n');
            return self.checked(text, path, Some(value));
        };
        let mut node = &root;
        let mut depth = 0;
        while depth + 1 < path.len() {
            match node.member(path[depth]) {
                Some(member) if matches!(member.value, Node::Object { .. }) => {
                    node = &member.value;
                    depth += 1;
                }
                Some(_) => return Err(self.invalid(format!("`{}` is not an object", path[..=depth].join(".")))),
                None => break,
            }
        }
        let mut nested = value.clone();
        for key in path[depth + 1..].iter().rev() {
            nested = json!({ *key: nested });
        }
        let text = spans::set_member(&self.text, node, path[depth], &nested);
        self.checked(text, path, Some(value))
    }

    /// The text without the member at `path`.
    fn remove(&self, path: &[&str]) -> Result<String> {
        let root = self.root().ok_or_else(|| self.invalid("the file is empty".into()))?;
        let mut node = &root;
        for key in &path[..path.len() - 1] {
            node = &node
                .member(key)
                .ok_or_else(|| self.invalid(format!("`{key}` not found")))?
                .value;
        }
        let text = spans::remove_member(&self.text, node, path[path.len() - 1]);
        self.checked(text, path, None)
    }

    /// Refuses an edit whose result does not parse or does not say what was intended.
    fn checked(&self, text: String, path: &[&str], expected: Option<&Value>) -> Result<String> {
        let parsed = crate::parse_jsonc(&text).ok().flatten().ok_or_else(|| self.refused())?;
        let mut at = Some(&parsed);
        for key in path {
            at = at.and_then(|v| v.get(*key));
        }
        if at != expected {
            return Err(self.refused());
        }
        Ok(text)
    }

    fn invalid(&self, message: String) -> Error {
        Error::Invalid {
            path: self.path.clone(),
            message,
        }
    }

    fn refused(&self) -> Error {
        self.invalid(
            "refusing to write: the edit did not produce the intended valid JSON (the file is unchanged)".into(),
        )
    }
}

/// Writes `text` over the document's file (if it changed), with a backup when needed, and keeps trust current.
fn write(opts: &LoadOptions, doc: &Document, text: String, new_mode: u32, always_backup: bool) -> Result<EditOutcome> {
    let mut outcome = EditOutcome {
        path: doc.path.clone(),
        changed: text != doc.text,
        created: !doc.exists,
        backup: None,
    };
    if !outcome.changed {
        return Ok(outcome);
    }
    let in_project = doc.path.starts_with(&opts.project_dir);
    let was_trusted = in_project && TrustView::load(&opts.project_dir, &opts.data_dir).file_trusted(&doc.path);
    let has_comments = crate::strip_jsonc(&doc.text) != doc.text;
    if doc.exists && (has_comments || always_backup) {
        let mut name = doc.path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".bak");
        let backup = doc.path.with_file_name(name);
        crate::atomic::write_atomic(&backup, doc.text.as_bytes(), 0o600).map_err(|source| Error::Write {
            path: backup.clone(),
            source,
        })?;
        outcome.backup = Some(backup);
    }
    crate::atomic::write_atomic(&doc.path, text.as_bytes(), new_mode).map_err(|source| Error::Write {
        path: doc.path.clone(),
        source,
    })?;
    if in_project {
        crate::trust::refresh_after_edit(&opts.project_dir, &doc.path, &opts.data_dir, was_trusted)?;
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("github").is_ok());
        assert!(check_name("a b").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(" x").is_err());
        assert!(check_name("a\nb").is_err());
    }

    #[test]
    fn distance() {
        assert_eq!(edit_distance("github", "gihtub"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
