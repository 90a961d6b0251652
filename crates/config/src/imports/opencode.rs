//! OpenCode's `mcp` key: V1 entries directly under `mcp.<name>` (`enabled`, `timeout` in ms, camelCase `oauth`) and
//! V2 entries under `mcp.servers.<name>` (`disabled`, `cwd`, `timeout: {startup, catalog, execution}`, snake_case
//! `oauth`, an optional global `mcp.timeout`). Detection follows OpenCode's own V2→V1 lowering: `mcp.servers` is the
//! V2 envelope unless it looks like a server itself, and a V1 entry wins over a V2 entry of the same name.

use serde_json::{Map, Number, Value};

use super::editor::{convert_map, convert_value};
use super::text::Dialect;
use super::{HostKind, ImportEnv, ImportError, ImportedFile, ServerNotes, shape};

const HOST: HostKind = HostKind::OpenCode;
const DIALECT: Dialect = Dialect::OpenCode;
const TIMEOUT_KEYS: [&str; 3] = ["startup", "catalog", "execution"];

pub(super) fn translate(
    root: &Map<String, Value>,
    env: &ImportEnv,
    file: &mut ImportedFile,
) -> Result<(), ImportError> {
    let Some(mcp) = root.get("mcp") else {
        return Ok(());
    };
    let Value::Object(mcp) = mcp else {
        return Err(shape(&file.path, "`mcp` is not an object"));
    };
    let envelope = match mcp.get("servers") {
        Some(Value::Object(servers)) if !is_direct_server(servers) => Some(servers),
        _ => None,
    };
    let global_timeout = match mcp.get("timeout") {
        Some(Value::Object(t))
            if !is_direct_server(t) && (t.is_empty() || TIMEOUT_KEYS.iter().any(|k| t.contains_key(*k))) =>
        {
            Some(t)
        }
        _ => None,
    };
    let mut servers: Vec<(String, Map<String, Value>)> = Vec::new();
    for (name, value) in mcp {
        if (name == "servers" && envelope.is_some()) || (name == "timeout" && global_timeout.is_some()) {
            continue;
        }
        let mut notes = ServerNotes::new(name, &mut file.notes);
        if let Some(server) = translate_server(value, env, global_timeout, &mut notes) {
            servers.push((name.clone(), server));
        }
    }
    for (name, value) in envelope.into_iter().flatten() {
        let mut notes = ServerNotes::new(name, &mut file.notes);
        if mcp.contains_key(name) {
            notes.server("is defined both under `mcp` (V1) and `mcp.servers` (V2); the V1 entry is imported");
            continue;
        }
        if let Some(server) = translate_server(value, env, global_timeout, &mut notes) {
            servers.push((name.clone(), server));
        }
    }
    file.servers = servers;
    Ok(())
}

/// A record whose `type` or `enabled` is not an object is a server, not the V2 envelope (OpenCode's rule).
fn is_direct_server(value: &Map<String, Value>) -> bool {
    ["type", "enabled"]
        .iter()
        .any(|k| value.get(*k).is_some_and(|v| !v.is_object()))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Local,
    Remote,
}

fn translate_server(
    value: &Value,
    env: &ImportEnv,
    global_timeout: Option<&Map<String, Value>>,
    notes: &mut ServerNotes<'_>,
) -> Option<Map<String, Value>> {
    let Value::Object(entry) = value else {
        notes.server("entry is not an object; skipped");
        return None;
    };
    let kind = match entry.get("type").map(Value::as_str) {
        Some(Some("local")) => Kind::Local,
        Some(Some("remote")) => Kind::Remote,
        None if entry.contains_key("command") => Kind::Local,
        None if entry.contains_key("url") => Kind::Remote,
        None => {
            notes.server("has neither `type` nor `command` or `url`; skipped");
            return None;
        }
        Some(_) => {
            notes.field("type", "is not `local` or `remote`; server skipped");
            return None;
        }
    };
    let mut out = Map::new();
    for (field, v) in entry {
        match (field.as_str(), kind) {
            ("type", _) => {}
            ("command", Kind::Local) => {
                if !local_command(v, env, notes, &mut out) {
                    return None;
                }
            }
            ("environment", Kind::Local) => {
                out.insert("env".to_string(), convert_map(DIALECT, field, v, env, notes));
            }
            ("cwd", Kind::Local) => match convert_value(DIALECT, v, env, false) {
                Ok(v) => {
                    out.insert("cwd".to_string(), v);
                }
                Err(unresolved) => notes.field("cwd", unresolved.message("field")),
            },
            ("url", Kind::Remote) => match convert_value(DIALECT, v, env, false) {
                Ok(v) => {
                    out.insert("url".to_string(), v);
                }
                Err(unresolved) => {
                    notes.field("url", unresolved.message("server"));
                    return None;
                }
            },
            ("headers", Kind::Remote) => {
                out.insert("headers".to_string(), convert_map(DIALECT, field, v, env, notes));
            }
            ("oauth", Kind::Remote) => oauth(v, env, notes, &mut out),
            ("enabled", _) => match v {
                Value::Bool(b) => {
                    out.insert("enabled".to_string(), Value::Bool(*b));
                }
                _ => notes.field("enabled", "is not a boolean; not imported"),
            },
            ("disabled", _) => match v {
                Value::Bool(b) if !entry.contains_key("enabled") => {
                    out.insert("enabled".to_string(), Value::Bool(!b));
                }
                Value::Bool(_) => notes.field("disabled", "is ignored because `enabled` is also set; not imported"),
                _ => notes.field("disabled", "is not a boolean; not imported"),
            },
            ("timeout", _) => timeout(v, notes, &mut out),
            _ => notes.unsupported(HOST, field.as_str()),
        }
    }
    if let Some(global) = global_timeout {
        let mut defaults = Map::new();
        timeout_object(global, "mcp.timeout", notes, &mut defaults);
        for (key, v) in defaults {
            out.entry(key).or_insert(v);
        }
    }
    Some(out)
}

/// `command: ["npx", "-y", "pkg"]` → `command` + `args`. `false` when the server must be skipped.
fn local_command(value: &Value, env: &ImportEnv, notes: &mut ServerNotes<'_>, out: &mut Map<String, Value>) -> bool {
    let parts: Vec<&Value> = match value {
        Value::Array(items) => items.iter().collect(),
        Value::String(_) => vec![value],
        _ => {
            notes.field("command", "is not a list of strings; server skipped");
            return false;
        }
    };
    if parts.is_empty() || parts.iter().any(|p| !p.is_string()) {
        notes.field("command", "is empty or not a list of strings; server skipped");
        return false;
    }
    let mut converted = Vec::with_capacity(parts.len());
    for part in parts {
        match convert_value(DIALECT, part, env, false) {
            Ok(v) => converted.push(v),
            Err(unresolved) => {
                notes.field("command", unresolved.message("server"));
                return false;
            }
        }
    }
    let mut converted = converted.into_iter();
    if let Some(command) = converted.next() {
        out.insert("command".to_string(), command);
    }
    let args: Vec<Value> = converted.collect();
    if !args.is_empty() {
        out.insert("args".to_string(), Value::Array(args));
    }
    true
}

/// `oauth: false` disables OAuth detection; an object configures the client (V1 camelCase or V2 snake_case keys).
fn oauth(value: &Value, env: &ImportEnv, notes: &mut ServerNotes<'_>, out: &mut Map<String, Value>) {
    let auth = match value {
        Value::Bool(false) => {
            out.insert("oauth".to_string(), Value::Bool(false));
            return;
        }
        Value::Object(auth) => auth,
        _ => {
            notes.field("oauth", "is not an object or `false`; not imported");
            return;
        }
    };
    let mut oauth = Map::new();
    for (key, v) in auth {
        let field = format!("oauth.{key}");
        let (target, secretable) = match key.as_str() {
            "clientId" | "client_id" => ("clientId", false),
            "clientSecret" | "client_secret" => ("clientSecret", true),
            "scope" => ("scope", false),
            "redirectUri" | "redirect_uri" => ("redirectUri", false),
            "callbackPort" | "callback_port" => ("callbackPort", false),
            _ => {
                notes.unsupported(HOST, field);
                continue;
            }
        };
        match convert_value(DIALECT, v, env, secretable) {
            Ok(v) => {
                oauth.insert(target.to_string(), v);
            }
            Err(unresolved) => notes.field(field, unresolved.message("field")),
        }
    }
    out.insert("oauth".to_string(), Value::Object(oauth));
}

/// V1 `timeout` (ms for every MCP request) → `requestTimeoutMs`; V2 `timeout: {startup, catalog, execution}` (ms).
fn timeout(value: &Value, notes: &mut ServerNotes<'_>, out: &mut Map<String, Value>) {
    match value {
        Value::Number(ms) if ms.as_f64().is_some_and(|ms| ms > 0.0) => {
            out.insert("requestTimeoutMs".to_string(), Value::Number(ms.clone()));
        }
        Value::Object(t) => timeout_object(t, "timeout", notes, out),
        _ => notes.field("timeout", "is not a positive number of milliseconds; not imported"),
    }
}

fn timeout_object(t: &Map<String, Value>, prefix: &str, notes: &mut ServerNotes<'_>, out: &mut Map<String, Value>) {
    for (key, v) in t {
        let field = format!("{prefix}.{key}");
        let Some(ms) = v.as_f64().filter(|ms| *ms > 0.0) else {
            notes.field(field, "is not a positive number of milliseconds; not imported");
            continue;
        };
        match key.as_str() {
            "startup" => {
                out.insert("startupTimeout".to_string(), ms_to_secs(ms));
            }
            "catalog" => {
                out.insert("requestTimeoutMs".to_string(), v.clone());
            }
            "execution" => {
                out.insert("toolTimeout".to_string(), ms_to_secs(ms));
            }
            _ => notes.unsupported(HOST, field),
        }
    }
}

/// Milliseconds as pimcp seconds: an integer when exact, otherwise a fraction.
pub(super) fn ms_to_secs(ms: f64) -> Value {
    if ms.fract() == 0.0 && ms % 1000.0 == 0.0 && ms < 9.0e15 {
        #[allow(clippy::cast_possible_truncation)] // integral and far below i64::MAX (checked above)
        return Value::Number(Number::from((ms / 1000.0) as i64));
    }
    Number::from_f64(ms / 1000.0).map_or(Value::Null, Value::Number)
}
