//! Agent Plugins 1.0 (<https://agent-plugins.org>): a package directory with a `plugin.json` manifest and an
//! optional root `mcp.json` whose servers pimcp adds as `<plugin>__<server>`.
//!
//! What is validated (the Agent Plugins 1.0 specification, sections 4 to 9):
//! - `plugin.json`: a JSON object; `$schema` is the 1.0.0 identifier; `name` is 1-64 characters of `a-z 0-9 - .`,
//!   starting and ending alphanumeric, without `--` or `..`; `version`, `description`, `homepage`, `repository`,
//!   `license`, `displayName` are strings; `keywords` an array of strings; `author` an object of `name`/`email`/`url`
//!   strings. Unknown top-level fields and a non-object `extensions` are reported and ignored. Anything else
//!   rejects the plugin.
//! - `mcp.json`: a JSON object with the same spec version's `$schema` and an `mcpServers` object, nothing else at the
//!   top level (otherwise MCP is disabled for the plugin). Each server is one closed variant: `stdio` (`command` a
//!   bare name or a `./` path inside the plugin, `args`, `env` without `PLUGIN_ROOT`/`PLUGIN_DATA`, `cwd` as `./…`,
//!   `${PLUGIN_ROOT}…` or `${PLUGIN_DATA}…` staying inside its root) or `streamable-http` / `sse` (`url` absolute,
//!   https unless loopback, no user info or fragment; `headers` of valid header names without case-duplicates).
//!   An invalid server is skipped with a warning; the others load.
//! - `${PLUGIN_ROOT}` and `${PLUGIN_DATA}` are expanded once, textually, in `args`, `env` values and `cwd`; no other
//!   interpolation or `!command` applies to plugin values. `PLUGIN_ROOT` and `PLUGIN_DATA` are set in the server's
//!   environment; the data directory `<data dir>/plugins/<name>` is created (0700) when the plugin has a stdio server.
//! - `sse` servers are loaded as HTTP servers that allow the legacy SSE transport; pimcp tries Streamable HTTP first.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::model::Origin;
use crate::problems::{ConfigProblem, Severity};

/// Canonical manifest identifiers pimcp recognizes for Agent Plugins 1.0.0 (the spec's, and the identifier its
/// schema file carried under the project's former name).
const PLUGIN_SCHEMAS: [&str; 2] = [
    "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json",
    "https://open-plugins.com/schemas/1.0.0/plugin.schema.json",
];
const MCP_SCHEMAS: [&str; 2] = [
    "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json",
    "https://open-plugins.com/schemas/1.0.0/mcp.schema.json",
];

/// Servers contributed by one plugin, already in pimcp's JSON server shape.
#[derive(Debug, Clone)]
pub(crate) struct LoadedPlugin {
    pub name: String,
    pub origin: Origin,
    pub servers: Vec<(String, Map<String, Value>)>,
}

fn warn(problems: &mut Vec<ConfigProblem>, path: &Path, server: Option<&str>, field: Option<&str>, message: String) {
    problems.push(ConfigProblem {
        path: Some(path.to_path_buf()),
        position: None,
        server: server.map(str::to_string),
        field: field.map(str::to_string),
        message,
        severity: Severity::Warning,
    });
}

/// Loads the plugin at `dir`. `None` when the plugin is rejected (a warning is recorded).
pub(crate) fn load_plugin(dir: &Path, data_dir: &Path, problems: &mut Vec<ConfigProblem>) -> Option<LoadedPlugin> {
    let manifest_path = dir.join("plugin.json");
    let root = match std::fs::canonicalize(dir) {
        Ok(root) if root.is_dir() => root,
        _ => {
            warn(
                problems,
                dir,
                None,
                None,
                "agent plugin directory not found; skipped".into(),
            );
            return None;
        }
    };
    let name = read_manifest(&root, &manifest_path, problems)?;
    let mcp_path = root.join("mcp.json");
    let origin = Origin::Plugin {
        plugin: name.clone(),
        path: mcp_path.clone(),
    };
    let mut plugin = LoadedPlugin {
        name: name.clone(),
        origin,
        servers: Vec::new(),
    };
    let meta = match std::fs::metadata(&mcp_path) {
        Ok(meta) => meta,
        Err(_) => return Some(plugin), // no MCP component
    };
    if !meta.is_file() || !within(&mcp_path, &root) {
        warn(
            problems,
            &mcp_path,
            None,
            None,
            "is not a regular file inside the plugin; MCP disabled for this plugin".into(),
        );
        return Some(plugin);
    }
    let Some(servers) = read_mcp(&mcp_path, problems) else {
        return Some(plugin);
    };
    let data = data_dir.join("plugins").join(&name);
    let mut has_stdio = false;
    for (server, value) in servers {
        match translate_server(&value, &root, &data) {
            Ok(entry) => {
                has_stdio |= entry.contains_key("command");
                plugin.servers.push((format!("{name}__{server}"), entry));
            }
            Err((field, message)) => warn(
                problems,
                &mcp_path,
                Some(&server),
                field.as_deref(),
                format!("{message}; the server is skipped"),
            ),
        }
    }
    if has_stdio && let Err(err) = crate::sys::private_dir(std::fs::DirBuilder::new().recursive(true)).create(&data) {
        warn(
            problems,
            &data,
            None,
            None,
            format!("cannot create the plugin data directory: {err}"),
        );
    }
    Some(plugin)
}

fn read_json(path: &Path, problems: &mut Vec<ConfigProblem>) -> Option<Map<String, Value>> {
    let text = match crate::read::read_text_bounded(path, crate::read::CONFIG_FILE_LIMIT) {
        Ok(text) => text,
        Err(err) => {
            warn(problems, path, None, None, crate::load::read_problem(&err));
            return None;
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Some(map),
        Ok(_) => {
            warn(problems, path, None, None, "the top level is not an object".into());
            None
        }
        Err(err) => {
            problems.push(ConfigProblem {
                path: Some(path.to_path_buf()),
                position: Some((err.line(), err.column())),
                server: None,
                field: None,
                message: "not valid JSON".into(),
                severity: Severity::Warning,
            });
            None
        }
    }
}

/// Validates `plugin.json` and returns the plugin name.
fn read_manifest(root: &Path, path: &Path, problems: &mut Vec<ConfigProblem>) -> Option<String> {
    let reject = |problems: &mut Vec<ConfigProblem>, field: Option<&str>, message: &str| {
        warn(problems, path, None, field, format!("{message}; the plugin is skipped"));
    };
    if !path.is_file() || !within(path, root) {
        reject(problems, None, "agent plugin has no `plugin.json`");
        return None;
    }
    let manifest = read_json(path, problems)?;
    match manifest.get("$schema").and_then(Value::as_str) {
        Some(schema) if PLUGIN_SCHEMAS.contains(&schema) => {}
        Some(_) => {
            reject(
                problems,
                Some("$schema"),
                "unsupported Agent Plugins version (pimcp supports 1.0.0)",
            );
            return None;
        }
        None => {
            reject(problems, Some("$schema"), "required string is missing");
            return None;
        }
    }
    let Some(name) = manifest.get("name").and_then(Value::as_str) else {
        reject(problems, Some("name"), "required string is missing");
        return None;
    };
    if !valid_plugin_name(name) {
        reject(
            problems,
            Some("name"),
            "must be 1-64 characters of a-z, 0-9, `-`, `.`, start and end alphanumeric, no `--` or `..`",
        );
        return None;
    }
    for (key, value) in &manifest {
        let ok = match key.as_str() {
            "$schema" | "name" => true,
            "version" | "description" | "homepage" | "repository" | "license" | "displayName" => value.is_string(),
            "keywords" => value.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            "author" => value.as_object().is_some_and(|a| {
                a.iter()
                    .all(|(k, v)| matches!(k.as_str(), "name" | "email" | "url") && v.is_string())
            }),
            "extensions" => {
                if !value.is_object() {
                    warn(problems, path, None, Some(key), "must be an object; ignored".into());
                }
                true
            }
            _ => {
                warn(
                    problems,
                    path,
                    None,
                    Some(key),
                    "unknown manifest field; ignored".into(),
                );
                true
            }
        };
        if !ok {
            reject(problems, Some(key), "has the wrong type");
            return None;
        }
    }
    Some(name.to_string())
}

fn valid_plugin_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=64).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'.')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && !name.contains("--")
        && !name.contains("..")
}

/// Validates `mcp.json`'s top level and returns its servers.
fn read_mcp(path: &Path, problems: &mut Vec<ConfigProblem>) -> Option<Map<String, Value>> {
    let disable = |problems: &mut Vec<ConfigProblem>, field: Option<&str>, message: &str| {
        warn(
            problems,
            path,
            None,
            field,
            format!("{message}; MCP disabled for this plugin"),
        );
    };
    let mut root = read_json(path, problems)?;
    match root.get("$schema").and_then(Value::as_str) {
        Some(schema) if MCP_SCHEMAS.contains(&schema) => {}
        _ => {
            disable(
                problems,
                Some("$schema"),
                "must be the Agent Plugins 1.0.0 MCP schema identifier",
            );
            return None;
        }
    }
    if let Some(key) = root.keys().find(|k| !matches!(k.as_str(), "$schema" | "mcpServers")) {
        disable(problems, Some(key), "unknown top-level field");
        return None;
    }
    match root.remove("mcpServers") {
        Some(Value::Object(servers)) => Some(servers),
        _ => {
            disable(problems, Some("mcpServers"), "required object is missing");
            None
        }
    }
}

type Invalid = (Option<String>, String);

fn invalid(field: &str, message: &str) -> Invalid {
    (Some(field.to_string()), message.to_string())
}

/// One plugin server → pimcp's JSON server shape.
fn translate_server(value: &Value, root: &Path, data: &Path) -> Result<Map<String, Value>, Invalid> {
    let Value::Object(server) = value else {
        return Err((None, "the entry is not an object".into()));
    };
    let kind = server
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid("type", "required string is missing"))?;
    let allowed: &[&str] = match kind {
        "stdio" => &["type", "command", "args", "env", "cwd"],
        "streamable-http" | "sse" => &["type", "url", "headers"],
        _ => return Err(invalid("type", "must be `stdio`, `streamable-http` or `sse`")),
    };
    if let Some(key) = server.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(invalid(key, &format!("is not a field of a `{kind}` server")));
    }
    let root_text = root.to_string_lossy().into_owned();
    let data_text = data.to_string_lossy().into_owned();
    let expand = |s: &str| -> String {
        // Single, non-recursive pass: replaced text is never rescanned.
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(pos) = rest.find("${PLUGIN_") {
            out.push_str(&rest[..pos]);
            let tail = &rest[pos..];
            if let Some(after) = tail.strip_prefix("${PLUGIN_ROOT}") {
                out.push_str(&root_text);
                rest = after;
            } else if let Some(after) = tail.strip_prefix("${PLUGIN_DATA}") {
                out.push_str(&data_text);
                rest = after;
            } else {
                out.push_str("${PLUGIN_");
                rest = &tail["${PLUGIN_".len()..];
            }
        }
        out.push_str(rest);
        out
    };
    let mut out = Map::new();
    if kind == "stdio" {
        let command = server
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| invalid("command", "required non-empty string is missing"))?;
        let command = if let Some(rel) = command.strip_prefix("./") {
            let path = normalize(&root.join(rel));
            if !within(&path, root) {
                return Err(invalid("command", "resolves outside the plugin"));
            }
            path.to_string_lossy().into_owned()
        } else if command.contains('/') || command.contains('\\') {
            return Err(invalid(
                "command",
                "must be a bare executable name or a `./` path inside the plugin",
            ));
        } else {
            command.to_string()
        };
        out.insert("type".into(), json!("stdio"));
        out.insert("command".into(), json!(command));
        if let Some(args) = server.get("args") {
            let args = args
                .as_array()
                .filter(|a| a.iter().all(Value::is_string))
                .ok_or_else(|| invalid("args", "must be an array of strings"))?;
            let args: Vec<String> = args.iter().filter_map(Value::as_str).map(expand).collect();
            out.insert("args".into(), json!(args));
        }
        let mut env = Map::new();
        if let Some(value) = server.get("env") {
            let map = value
                .as_object()
                .filter(|m| m.values().all(Value::is_string))
                .ok_or_else(|| invalid("env", "must be an object of strings"))?;
            for (key, value) in map {
                if key == "PLUGIN_ROOT" || key == "PLUGIN_DATA" {
                    return Err(invalid(&format!("env.{key}"), "is reserved for the client"));
                }
                env.insert(key.clone(), json!(expand(value.as_str().unwrap_or_default())));
            }
        }
        env.insert("PLUGIN_ROOT".into(), json!(root_text));
        env.insert("PLUGIN_DATA".into(), json!(data_text));
        out.insert("env".into(), Value::Object(env));
        let cwd = match server.get("cwd") {
            None => root.to_path_buf(),
            Some(value) => {
                let cwd = value.as_str().ok_or_else(|| invalid("cwd", "must be a string"))?;
                let (base, rest) = if let Some(rest) = cwd.strip_prefix("./") {
                    (root, rest)
                } else if cwd == "${PLUGIN_ROOT}" || cwd.starts_with("${PLUGIN_ROOT}/") {
                    (root, cwd["${PLUGIN_ROOT}".len()..].trim_start_matches('/'))
                } else if cwd == "${PLUGIN_DATA}" || cwd.starts_with("${PLUGIN_DATA}/") {
                    (data, cwd["${PLUGIN_DATA}".len()..].trim_start_matches('/'))
                } else {
                    return Err(invalid(
                        "cwd",
                        "must start with `./`, `${PLUGIN_ROOT}` or `${PLUGIN_DATA}`",
                    ));
                };
                let path = normalize(&base.join(rest));
                if !within(&path, base) {
                    return Err(invalid("cwd", "resolves outside its root"));
                }
                path
            }
        };
        out.insert("cwd".into(), json!(cwd.to_string_lossy()));
    } else {
        let url = server
            .get("url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| invalid("url", "required non-empty string is missing"))?;
        check_url(url).map_err(|message| invalid("url", message))?;
        out.insert(
            "type".into(),
            json!(if kind == "sse" { "sse" } else { "streamable-http" }),
        );
        out.insert("url".into(), json!(url));
        if let Some(value) = server.get("headers") {
            let map = value
                .as_object()
                .filter(|m| m.values().all(Value::is_string))
                .ok_or_else(|| invalid("headers", "must be an object of strings"))?;
            let mut seen: Vec<String> = Vec::new();
            for key in map.keys() {
                let valid = !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if !valid {
                    return Err(invalid(&format!("headers.{key}"), "is not a valid header name"));
                }
                let lower = key.to_ascii_lowercase();
                if seen.contains(&lower) {
                    return Err(invalid(
                        &format!("headers.{key}"),
                        "appears twice (header names ignore case)",
                    ));
                }
                seen.push(lower);
            }
            if map
                .values()
                .filter_map(Value::as_str)
                .any(|v| v.contains(['\r', '\n', '\0']))
            {
                return Err(invalid("headers", "a value is not a valid header value"));
            }
            out.insert("headers".into(), value.clone());
        }
    }
    Ok(out)
}

/// Absolute http(s) URL without user info or fragment; plain http only for loopback hosts.
fn check_url(url: &str) -> Result<(), &'static str> {
    let lower = url.to_ascii_lowercase();
    let (https, rest) = if let Some(rest) = lower.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = lower.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err("must be an absolute http:// or https:// URL");
    };
    if url.contains('#') {
        return Err("must not contain a fragment");
    }
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err("must not contain user information");
    }
    if authority.is_empty() {
        return Err("has no host");
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    let loopback = host == "localhost" || host == "::1" || host.starts_with("127.");
    if !https && !loopback {
        return Err("must use https (plain http is allowed only for loopback hosts)");
    }
    Ok(())
}

/// Lexical normalization (`.` and `..` removed), then the canonical path when it exists.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    std::fs::canonicalize(&out).unwrap_or(out)
}

fn within(path: &Path, root: &Path) -> bool {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path));
    resolved.starts_with(root)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn plugin_names() {
        for ok in ["my-plugin", "acme.tools", "lint3r", "a"] {
            assert!(valid_plugin_name(ok), "{ok}");
        }
        for bad in ["My-Plugin", "-start", "has--double", "too.many..dots", "", "end-"] {
            assert!(!valid_plugin_name(bad), "{bad}");
        }
    }

    #[test]
    fn urls() {
        assert!(check_url("https://deploy.example.com/mcp").is_ok());
        assert!(check_url("http://127.0.0.1:8080/mcp").is_ok());
        assert!(check_url("http://localhost/mcp").is_ok());
        assert!(check_url("http://[::1]:3000/mcp").is_ok());
        assert!(check_url("http://example.com/mcp").is_err());
        assert!(check_url("https://user:pw@example.com/mcp").is_err());
        assert!(check_url("https://example.com/mcp#frag").is_err());
        assert!(check_url("ftp://example.com").is_err());
    }
}
