//! The `mcpServers`-shaped hosts: Cursor, Claude Code (user scope and `projects[<dir>]` scope of `~/.claude.json`),
//! Claude Desktop, VS Code (`servers` + `inputs`) and Windsurf (`serverUrl`, `disabled`, `disabledTools`).

use std::path::Path;

use serde_json::{Map, Value};

use super::text::{self, Dialect};
use super::{HostKind, ImportEnv, ImportError, ImportNote, ImportedFile, ServerNotes, dotenv, shape};

/// Cursor, Claude Desktop, VS Code and Windsurf files.
pub(super) fn translate(
    root: &Map<String, Value>,
    env: &ImportEnv,
    file: &mut ImportedFile,
) -> Result<(), ImportError> {
    let key = if file.host == HostKind::VsCode {
        "servers"
    } else {
        "mcpServers"
    };
    if file.host == HostKind::VsCode && root.contains_key("mcpServers") {
        file.notes.push(ImportNote {
            server: None,
            field: Some("mcpServers".to_string()),
            message: "VS Code reads servers from `servers` and ignores `mcpServers`; not imported".to_string(),
        });
    }
    let Some(servers) = root.get(key) else {
        return Ok(());
    };
    let Value::Object(servers) = servers else {
        return Err(shape(&file.path, format!("`{key}` is not an object")));
    };
    file.servers = translate_servers(file.host, servers, env, &mut file.notes);
    Ok(())
}

/// `~/.claude.json`: the user scope (`mcpServers`) and the local scope of this project
/// (`projects["<abs project dir>"].mcpServers`), which replaces same-named user entries as a whole, as in Claude Code.
/// Servers listed in the project's `disabledMcpServers` are imported with `enabled: false`.
pub(super) fn translate_claude_code(
    root: &Map<String, Value>,
    env: &ImportEnv,
    file: &mut ImportedFile,
) -> Result<(), ImportError> {
    let host = HostKind::ClaudeCode;
    let mut servers = match root.get("mcpServers") {
        None => Vec::new(),
        Some(Value::Object(user)) => translate_servers(host, user, env, &mut file.notes),
        Some(_) => return Err(shape(&file.path, "`mcpServers` is not an object")),
    };
    let project = match root.get("projects") {
        Some(Value::Object(projects)) => projects
            .iter()
            .find(|(dir, _)| same_dir(dir, &env.project_dir))
            .map(|(_, entry)| entry),
        _ => None,
    };
    if let Some(project) = project {
        let project_field = |field: &str| format!("projects[<project dir>].{field}");
        match project.get("mcpServers") {
            None => {}
            Some(Value::Object(local)) => {
                for (name, server) in translate_servers(host, local, env, &mut file.notes) {
                    match servers.iter_mut().find(|(n, _)| *n == name) {
                        Some(slot) => slot.1 = server,
                        None => servers.push((name, server)),
                    }
                }
            }
            Some(_) => file.notes.push(ImportNote {
                server: None,
                field: Some(project_field("mcpServers")),
                message: "is not an object; the project's local-scope servers were not imported".to_string(),
            }),
        }
        if let Some(Value::Array(disabled)) = project.get("disabledMcpServers") {
            for name in disabled.iter().filter_map(Value::as_str) {
                if let Some((_, server)) = servers.iter_mut().find(|(n, _)| n == name) {
                    server.insert("enabled".to_string(), Value::Bool(false));
                }
            }
        }
    }
    file.servers = servers;
    Ok(())
}

/// Whether a `projects` key of `~/.claude.json` names `project_dir` (Claude Code stores absolute paths; on Windows
/// with either slash).
fn same_dir(key: &str, project_dir: &Path) -> bool {
    let norm = |s: &str| s.replace('\\', "/").trim_end_matches('/').to_string();
    let key = norm(key);
    let mut candidates = vec![norm(&project_dir.to_string_lossy())];
    if let Ok(canonical) = std::fs::canonicalize(project_dir) {
        candidates.push(norm(&canonical.to_string_lossy()));
    }
    candidates.iter().any(|c| !c.is_empty() && *c == key)
}

fn translate_servers(
    host: HostKind,
    servers: &Map<String, Value>,
    env: &ImportEnv,
    notes: &mut Vec<ImportNote>,
) -> Vec<(String, Map<String, Value>)> {
    servers
        .iter()
        .filter_map(|(name, entry)| {
            translate_entry(host, entry, env, &mut ServerNotes::new(name, notes)).map(|server| (name.clone(), server))
        })
        .collect()
}

fn dialect(host: HostKind) -> Dialect {
    match host {
        HostKind::ClaudeCode => Dialect::DollarBrace,
        HostKind::ClaudeDesktop => Dialect::Literal,
        _ => Dialect::Editor,
    }
}

/// One server entry; `None` when it is skipped (always with a note).
fn translate_entry(
    host: HostKind,
    entry: &Value,
    env: &ImportEnv,
    notes: &mut ServerNotes<'_>,
) -> Option<Map<String, Value>> {
    let Value::Object(entry) = entry else {
        notes.server("entry is not an object; skipped");
        return None;
    };
    let dialect = dialect(host);
    let mut out = Map::new();
    let mut env_file: Option<&Value> = None;
    for (field, value) in entry {
        match (field.as_str(), host) {
            ("type", _) => {
                let kind = match value.as_str() {
                    Some(kind @ ("stdio" | "http" | "sse" | "streamable-http")) => kind,
                    Some("streamableHttp") => "streamable-http",
                    _ => {
                        notes.field("type", "transport type is not supported by pimcp; server skipped");
                        return None;
                    }
                };
                out.insert("type".to_string(), Value::String(kind.to_string()));
            }
            ("command" | "url", _) | ("serverUrl", HostKind::Windsurf) => {
                let target = if field == "serverUrl" { "url" } else { field.as_str() };
                if field == "url" && host == HostKind::Windsurf && entry.contains_key("serverUrl") {
                    notes.field("url", "`serverUrl` is also set and is the one imported; not imported");
                    continue;
                }
                match convert_value(dialect, value, env, false) {
                    Ok(v) => {
                        out.insert(target.to_string(), v);
                    }
                    Err(unresolved) => {
                        notes.field(field.as_str(), unresolved.message("server"));
                        return None;
                    }
                }
            }
            ("args", _) => match convert_array(dialect, value, env) {
                Ok(v) => {
                    out.insert("args".to_string(), v);
                }
                Err(unresolved) => {
                    notes.field("args", unresolved.message("server"));
                    return None;
                }
            },
            ("cwd", _) => match convert_value(dialect, value, env, false) {
                Ok(v) => {
                    out.insert("cwd".to_string(), v);
                }
                Err(unresolved) => notes.field("cwd", unresolved.message("field")),
            },
            ("env" | "headers", _) => {
                out.insert(field.clone(), convert_map(dialect, field, value, env, notes));
            }
            ("envFile", HostKind::Cursor | HostKind::VsCode) => env_file = Some(value),
            ("auth", HostKind::Cursor) => cursor_auth(value, env, notes, &mut out),
            ("oauth", HostKind::ClaudeCode) => claude_oauth(value, env, notes, &mut out),
            ("disabled", HostKind::Windsurf) => match value {
                Value::Bool(disabled) => {
                    out.insert("enabled".to_string(), Value::Bool(!disabled));
                }
                _ => notes.field("disabled", "is not a boolean; not imported"),
            },
            ("disabledTools", HostKind::Windsurf) => {
                out.insert("excludeTools".to_string(), value.clone());
            }
            _ => notes.unsupported(host, field.as_str()),
        }
    }
    if let Some(env_file) = env_file {
        merge_env_file(env_file, env, notes, &mut out);
    }
    Some(out)
}

/// A string (or anything else, passed through for the loader to judge) in pimcp syntax.
pub(super) fn convert_value(
    dialect: Dialect,
    value: &Value,
    env: &ImportEnv,
    secretable: bool,
) -> Result<Value, text::Unresolved> {
    match value {
        Value::String(s) if secretable => text::convert_secretable(dialect, s, env).map(Value::String),
        Value::String(s) => text::convert(dialect, s, env).map(Value::String),
        other => Ok(other.clone()),
    }
}

fn convert_array(dialect: Dialect, value: &Value, env: &ImportEnv) -> Result<Value, text::Unresolved> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|item| convert_value(dialect, item, env, false))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// `env` / `headers`: each value converted; an entry with a placeholder pimcp cannot expand is left out with a note.
pub(super) fn convert_map(
    dialect: Dialect,
    field: &str,
    value: &Value,
    env: &ImportEnv,
    notes: &mut ServerNotes<'_>,
) -> Value {
    let Value::Object(map) = value else {
        return value.clone();
    };
    let mut out = Map::new();
    for (key, v) in map {
        match convert_value(dialect, v, env, true) {
            Ok(v) => {
                out.insert(key.clone(), v);
            }
            Err(unresolved) => notes.field(format!("{field}.{key}"), unresolved.message("entry")),
        }
    }
    Value::Object(out)
}

/// Cursor's static OAuth client: `auth: { CLIENT_ID, CLIENT_SECRET, scopes: [...] }`.
fn cursor_auth(value: &Value, env: &ImportEnv, notes: &mut ServerNotes<'_>, out: &mut Map<String, Value>) {
    let Value::Object(auth) = value else {
        notes.field("auth", "is not an object; not imported");
        return;
    };
    let mut oauth = Map::new();
    for (key, v) in auth {
        let field = format!("auth.{key}");
        let (target, secretable) = match key.as_str() {
            "CLIENT_ID" => ("clientId", false),
            "CLIENT_SECRET" => ("clientSecret", true),
            "scopes" => {
                match scope_string(v) {
                    Some(scope) => {
                        oauth.insert("scope".to_string(), Value::String(scope));
                    }
                    None => notes.field(field, "is not a list of strings; not imported"),
                }
                continue;
            }
            _ => {
                notes.unsupported(HostKind::Cursor, field);
                continue;
            }
        };
        match convert_value(Dialect::Editor, v, env, secretable) {
            Ok(v) => {
                oauth.insert(target.to_string(), v);
            }
            Err(unresolved) => notes.field(field, unresolved.message("field")),
        }
    }
    out.insert("oauth".to_string(), Value::Object(oauth));
}

/// Claude Code's `oauth: { clientId, callbackPort, scopes, authServerMetadataUrl }` (the client secret lives in
/// Claude Code's credential store, not in the file).
fn claude_oauth(value: &Value, env: &ImportEnv, notes: &mut ServerNotes<'_>, out: &mut Map<String, Value>) {
    let Value::Object(auth) = value else {
        notes.field("oauth", "is not an object; not imported");
        return;
    };
    let mut oauth = Map::new();
    for (key, v) in auth {
        let field = format!("oauth.{key}");
        let target = match key.as_str() {
            "clientId" => "clientId",
            "callbackPort" => "callbackPort",
            "authServerMetadataUrl" => "authServerMetadataUrl",
            "scopes" | "scope" => {
                match scope_string(v) {
                    Some(scope) => {
                        oauth.insert("scope".to_string(), Value::String(scope));
                    }
                    None => notes.field(field, "is not a string or a list of strings; not imported"),
                }
                continue;
            }
            _ => {
                notes.unsupported(HostKind::ClaudeCode, field);
                continue;
            }
        };
        match convert_value(Dialect::DollarBrace, v, env, false) {
            Ok(v) => {
                oauth.insert(target.to_string(), v);
            }
            Err(unresolved) => notes.field(field, unresolved.message("field")),
        }
    }
    out.insert("oauth".to_string(), Value::Object(oauth));
}

/// A space-separated scope string from a string or a list of strings.
pub(super) fn scope_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(text::escape_dollars(s)),
        Value::Array(items) => {
            let scopes: Option<Vec<&str>> = items.iter().map(Value::as_str).collect();
            scopes.map(|s| text::escape_dollars(&s.join(" ")))
        }
        _ => None,
    }
}

/// Cursor's and VS Code's `envFile`: its variables are read now and put under `env` (escaped, since they are literal);
/// the entry's own `env` wins for a variable set in both, as in the hosts.
fn merge_env_file(value: &Value, env: &ImportEnv, notes: &mut ServerNotes<'_>, out: &mut Map<String, Value>) {
    let Some(raw) = value.as_str() else {
        notes.field("envFile", "is not a string; not imported");
        return;
    };
    let Some(path) = text::resolve_editor_path(raw, env) else {
        notes.field(
            "envFile",
            "uses a placeholder pimcp cannot resolve while importing; not imported",
        );
        return;
    };
    let parsed = match dotenv::read(&path) {
        Ok(parsed) => parsed,
        Err(err) => {
            notes.field(
                "envFile",
                format!(
                    "the env file could not be read ({}); its variables were not imported",
                    err.kind()
                ),
            );
            return;
        }
    };
    if parsed.skipped_lines > 0 {
        notes.field(
            "envFile",
            format!(
                "{} line(s) of the env file are not `KEY=value` and were not imported",
                parsed.skipped_lines
            ),
        );
    }
    let own = match out.remove("env") {
        Some(Value::Object(own)) => own,
        Some(other) => {
            // Not an object: keep it for the loader to report and do not mix the file in.
            out.insert("env".to_string(), other);
            notes.field(
                "envFile",
                "`env` is not an object, so the env file was not merged; not imported",
            );
            return;
        }
        None => Map::new(),
    };
    let mut merged = Map::new();
    for (key, val) in parsed.vars {
        if !own.contains_key(&key) {
            merged.insert(key, Value::String(text::escape_literal_secretable(&val)));
        }
    }
    merged.extend(own);
    out.insert("env".to_string(), Value::Object(merged));
}
