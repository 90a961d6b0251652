//! Codex `config.toml`: `[mcp_servers.<name>]` tables, field by field as in codex-rs `RawMcpServerConfig`.
//! Codex does no interpolation in its config, so every string is taken literally (`$` escaped for pimcp); the
//! environment references Codex resolves itself (`env_vars`, `env_http_headers`) become pimcp `${VAR}` references.

use serde_json::{Map, Value};

use super::editor::scope_string;
use super::opencode::ms_to_secs;
use super::text;
use super::{HostKind, ImportError, ImportedFile, ServerNotes, shape};

const HOST: HostKind = HostKind::Codex;

pub(super) fn translate(root: &Map<String, Value>, file: &mut ImportedFile) -> Result<(), ImportError> {
    let Some(servers) = root.get("mcp_servers") else {
        return Ok(());
    };
    let Value::Object(servers) = servers else {
        return Err(shape(&file.path, "`mcp_servers` is not a table"));
    };
    let mut out = Vec::with_capacity(servers.len());
    for (name, entry) in servers {
        let mut notes = ServerNotes::new(name, &mut file.notes);
        if let Some(server) = translate_server(entry, &mut notes) {
            out.push((name.clone(), server));
        }
    }
    file.servers = out;
    Ok(())
}

fn translate_server(entry: &Value, notes: &mut ServerNotes<'_>) -> Option<Map<String, Value>> {
    let Value::Object(entry) = entry else {
        notes.server("entry is not a table; skipped");
        return None;
    };
    let mut out = Map::new();
    let (mut env, mut headers, mut oauth) = (Map::new(), Map::new(), Map::new());
    let mut approve: Vec<Value> = Vec::new();
    let mut approve_all = false;
    for (field, v) in entry {
        match field.as_str() {
            "command" | "cwd" | "url" => {
                out.insert(field.clone(), literal(v));
            }
            "args" => {
                let args = match v {
                    Value::Array(items) => Value::Array(items.iter().map(literal).collect()),
                    other => other.clone(),
                };
                out.insert("args".to_string(), args);
            }
            "env" | "http_headers" => {
                let Some(map) = string_table(v, field, notes) else {
                    continue;
                };
                let slot = if field == "env" { &mut env } else { &mut headers };
                for (key, val) in map {
                    slot.insert(key, Value::String(text::escape_literal_secretable(&val)));
                }
            }
            "env_vars" => {
                let Some(names) = v.as_array() else {
                    notes.field("env_vars", "is not a list; not imported");
                    continue;
                };
                for (i, item) in names.iter().enumerate() {
                    match item.as_str().filter(|n| text::is_var_name(n)) {
                        Some(var) => {
                            env.entry(var.to_string())
                                .or_insert_with(|| Value::String(format!("${{{var}}}")));
                        }
                        None => notes.field(format!("env_vars[{i}]"), "is not a variable name; not imported"),
                    }
                }
            }
            "env_http_headers" => {
                let Some(map) = string_table(v, field, notes) else {
                    continue;
                };
                for (header, var) in map {
                    if text::is_var_name(&var) {
                        headers.insert(header, Value::String(format!("${{{var}}}")));
                    } else {
                        notes.field(
                            format!("env_http_headers.{header}"),
                            "is not a variable name; not imported",
                        );
                    }
                }
            }
            "bearer_token_env_var" => match v.as_str().filter(|n| text::is_var_name(n)) {
                Some(var) => {
                    out.insert("auth".to_string(), Value::String("bearer".to_string()));
                    out.insert("bearerTokenEnv".to_string(), Value::String(var.to_string()));
                }
                None => notes.field(field.as_str(), "is not a variable name; not imported"),
            },
            "startup_timeout_sec" | "tool_timeout_sec" => {
                let target = if field == "startup_timeout_sec" {
                    "startupTimeout"
                } else {
                    "toolTimeout"
                };
                match v.as_f64().filter(|s| *s > 0.0) {
                    Some(_) => {
                        out.insert(target.to_string(), v.clone());
                    }
                    None => notes.field(field.as_str(), "is not a positive number of seconds; not imported"),
                }
            }
            "startup_timeout_ms" => {
                if entry.contains_key("startup_timeout_sec") {
                    notes.field(
                        field.as_str(),
                        "is overridden by `startup_timeout_sec`, as in Codex; not imported",
                    );
                    continue;
                }
                match v.as_f64().filter(|ms| *ms > 0.0) {
                    Some(ms) => {
                        out.insert("startupTimeout".to_string(), ms_to_secs(ms));
                    }
                    None => notes.field(field.as_str(), "is not a positive number of milliseconds; not imported"),
                }
            }
            "enabled" => match v {
                Value::Bool(b) => {
                    out.insert("enabled".to_string(), Value::Bool(*b));
                }
                _ => notes.field("enabled", "is not a boolean; not imported"),
            },
            "enabled_tools" | "disabled_tools" => {
                let target = if field == "enabled_tools" {
                    "includeTools"
                } else {
                    "excludeTools"
                };
                out.insert(target.to_string(), v.clone());
            }
            "scopes" => match scope_string(v) {
                Some(scope) => {
                    oauth.insert("scope".to_string(), Value::String(scope));
                }
                None => notes.field("scopes", "is not a list of strings; not imported"),
            },
            "default_tools_approval_mode" => match v.as_str() {
                Some("prompt") => approve_all = true,
                _ => notes.field(
                    field.as_str(),
                    "only `prompt` has a pimcp equivalent (`approveTools`); other modes are not imported",
                ),
            },
            "tools" => {
                let Some(tools) = v.as_object() else {
                    notes.field("tools", "is not a table; not imported");
                    continue;
                };
                for (tool, config) in tools {
                    let tool_field = format!("tools.{tool}");
                    match config.as_object().map(|c| c.iter().collect::<Vec<_>>()).as_deref() {
                        Some([(key, mode)]) if key.as_str() == "approval_mode" && mode.as_str() == Some("prompt") => {
                            approve.push(Value::String(tool.clone()));
                        }
                        Some([]) => {}
                        _ => notes.field(
                            tool_field,
                            "only `approval_mode = \"prompt\"` has a pimcp equivalent (`approveTools`); not imported",
                        ),
                    }
                }
            }
            _ => notes.unsupported(HOST, field.as_str()),
        }
    }
    for (key, map) in [("env", env), ("headers", headers), ("oauth", oauth)] {
        if !map.is_empty() {
            out.insert(key.to_string(), Value::Object(map));
        }
    }
    if approve_all {
        out.insert("approveTools".to_string(), Value::Bool(true));
    } else if !approve.is_empty() {
        out.insert("approveTools".to_string(), Value::Array(approve));
    }
    Some(out)
}

/// A Codex string (taken literally) in pimcp syntax; other values pass through for the loader to judge.
fn literal(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(text::escape_dollars(s)),
        other => other.clone(),
    }
}

/// A table of strings; `None` (with a note) when it is not one.
fn string_table(value: &Value, field: &str, notes: &mut ServerNotes<'_>) -> Option<Vec<(String, String)>> {
    let Some(table) = value.as_object() else {
        notes.field(field, "is not a table; not imported");
        return None;
    };
    let mut out = Vec::with_capacity(table.len());
    for (key, v) in table {
        match v.as_str() {
            Some(s) => out.push((key.clone(), s.to_string())),
            None => notes.field(format!("{field}.{key}"), "is not a string; not imported"),
        }
    }
    Some(out)
}
