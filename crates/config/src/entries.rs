//! Reading one parsed file (or an imported host file, or an in-memory config) into validated, normalized entries:
//! every field is type-checked on its own against the `raw` model, so a bad field is reported by name (never by value)
//! and only its entry is skipped. Aliases are folded into one canonical key per meaning so later files override
//! earlier ones whichever spelling they use:
//! `enabled` → `disabled`, `allowedTools` → `includeTools`, `protocol` → `protocolVersion`,
//! a string `toolExposure` → `exposure`, `lifecycle: {mode}` → `lifecycle: "mode"`.
//!
//! A JSON `null` is kept: during the merge it removes the field a lower file set.

use serde_json::{Map, Value, json};

use crate::imports::HostKind;
use crate::problems::Sink;
use crate::raw::{RawOAuth, RawServer, RawSettings};
use crate::schema::{expected, oauth_fields, server_fields, settings_fields};

/// Transport-selecting fields, in the order conflicts are reported.
pub(crate) const TRANSPORT_FIELDS: [&str; 3] = ["command", "url", "socket"];

/// Fields pi-mcp-adapter accepts that pimcp does not support (reported as warnings, not as unknown).
const ADAPTER_SERVER_FIELDS: [&str; 7] = [
    "tasks",
    "requestHeadersCommand",
    "caFile",
    "bearerTokenStore",
    "literalEnv",
    "httpTransport",
    "pluginDataDir",
];
const ADAPTER_SETTINGS: [&str; 13] = [
    "namespaceProxyTools",
    "strictDirectToolArguments",
    "directToolResultDetails",
    "warnOnLargeDirectTools",
    "authRequiredMessage",
    "oauthCredentialStore",
    "ancestorConfigRoots",
    "showStatusIcon",
    "mcpFooterStatus",
    "toolResultRendering",
    "collapsedResultLines",
    "notifyOnStartupConnect",
    "jev",
];

/// One file's content after validation.
#[derive(Debug, Default)]
pub(crate) struct FileContent {
    /// Valid entries, in file order (`mcp-servers` first, then `mcpServers`).
    pub servers: Vec<(String, Map<String, Value>)>,
    /// Entries that were skipped, with the fields at fault (empty when the entry was not an object).
    pub invalid: Vec<(String, Vec<String>)>,
    /// Valid settings, by key.
    pub settings: Map<String, Value>,
    pub imports: Vec<HostKind>,
    /// The file had an `imports` key (even an empty one).
    pub has_imports_key: bool,
}

/// Reads a file's root value. `None` when the file fails as a whole (the problem is recorded).
pub(crate) fn parse_root(root: &Value, sink: &mut Sink<'_>) -> Option<FileContent> {
    let Value::Object(root) = root else {
        sink.error(None, None, "the top level is not an object; the file is skipped");
        return None;
    };
    for key in ["mcpServers", "mcp-servers", "settings"] {
        if let Some(value) = root.get(key)
            && !value.is_object()
        {
            sink.error(None, Some(key), "expected an object; the file is skipped");
            return None;
        }
    }
    if let Some(value) = root.get("imports")
        && !value.is_array()
    {
        sink.error(
            None,
            Some("imports"),
            "expected an array of host names; the file is skipped",
        );
        return None;
    }
    let mut content = FileContent::default();
    for key in root.keys() {
        match key.as_str() {
            "mcpServers" | "mcp-servers" | "settings" | "imports" | "$schema" => {}
            "claudePlugins" => sink.warning(None, Some(key), "Claude plugin bundles are not supported; ignored"),
            _ => sink.warning(None, Some(key), "unknown top-level key; ignored"),
        }
    }
    let legacy = root.get("mcp-servers").and_then(Value::as_object);
    let modern = root.get("mcpServers").and_then(Value::as_object);
    for (name, value) in legacy.into_iter().flatten() {
        if modern.is_some_and(|m| m.contains_key(name)) {
            sink.warning(
                Some(name),
                None,
                "defined under both `mcpServers` and `mcp-servers`; `mcpServers` wins",
            );
            continue;
        }
        push_server(&mut content, name, value, sink);
    }
    for (name, value) in modern.into_iter().flatten() {
        push_server(&mut content, name, value, sink);
    }
    if let Some(settings) = root.get("settings").and_then(Value::as_object) {
        content.settings = parse_settings(settings, sink);
    }
    if let Some(imports) = root.get("imports").and_then(Value::as_array) {
        content.has_imports_key = true;
        content.imports = parse_imports(imports, sink);
    }
    Some(content)
}

fn push_server(content: &mut FileContent, name: &str, value: &Value, sink: &mut Sink<'_>) {
    match parse_server(name, value, sink) {
        Ok(entry) => content.servers.push((name.to_string(), entry)),
        Err(fields) => content.invalid.push((name.to_string(), fields)),
    }
}

/// `imports`: known host ids; anything else is reported and skipped.
pub(crate) fn parse_imports(items: &[Value], sink: &mut Sink<'_>) -> Vec<HostKind> {
    let mut out = Vec::new();
    for (idx, item) in items.iter().enumerate() {
        let field = format!("imports[{idx}]");
        match item.as_str() {
            Some(id) => match HostKind::from_id(id) {
                Some(host) if !out.contains(&host) => out.push(host),
                Some(_) => {}
                None => {
                    let known: Vec<&str> = HostKind::ALL.iter().map(|h| h.id()).collect();
                    sink.error(
                        None,
                        Some(&field),
                        format!("unknown host; expected one of {}", known.join(", ")),
                    );
                }
            },
            None => sink.error(None, Some(&field), "expected a host name (a string)"),
        }
    }
    out
}

/// Validates and normalizes one server entry. `Err` lists the fields at fault (problems already recorded).
pub(crate) fn parse_server(name: &str, value: &Value, sink: &mut Sink<'_>) -> Result<Map<String, Value>, Vec<String>> {
    let Value::Object(obj) = value else {
        sink.error(Some(name), None, "the entry is not an object; it is skipped");
        return Err(Vec::new());
    };
    let known = server_fields();
    let mut out = Map::new();
    let mut bad: Vec<String> = Vec::new();
    for (key, val) in obj {
        if !known.iter().any(|k| k == key) {
            if ADAPTER_SERVER_FIELDS.contains(&key.as_str()) {
                sink.warning(
                    Some(name),
                    Some(key),
                    "pi-mcp-adapter field not supported by pimcp; ignored",
                );
            } else {
                sink.warning(Some(name), Some(key), "unknown field; ignored");
            }
            continue;
        }
        if val.is_null() {
            out.insert(key.clone(), Value::Null);
            continue;
        }
        if serde_json::from_value::<RawServer>(json!({ key: val })).is_err() {
            let field = if key == "oauth" { failing_oauth_field(val) } else { None };
            let field = field.unwrap_or_else(|| key.clone());
            let leaf = field.rsplit('.').next().unwrap_or(&field).to_string();
            sink.error(
                Some(name),
                Some(&field),
                format!("expected {}; the entry is skipped", expected(&leaf)),
            );
            bad.push(field);
            continue;
        }
        if key == "oauth"
            && let Some(oauth) = val.as_object()
        {
            for sub in oauth.keys() {
                if !oauth_fields().iter().any(|k| k == sub) {
                    sink.warning(Some(name), Some(&format!("oauth.{sub}")), "unknown field; ignored");
                }
            }
        }
        out.insert(key.clone(), val.clone());
    }

    // Values with the right type but a meaning we reject or adjust.
    for key in TRANSPORT_FIELDS {
        if out
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|s| s.trim().is_empty())
        {
            sink.error(Some(name), Some(key), "must not be empty; the entry is skipped");
            bad.push(key.to_string());
        }
    }
    for key in ["timeout", "startupTimeout", "toolTimeout"] {
        if out.get(key).and_then(Value::as_f64).is_some_and(|v| v <= 0.0) {
            sink.warning(Some(name), Some(key), "must be a positive number of seconds; ignored");
            out.remove(key);
        }
    }
    if out.get("idleTimeout").and_then(Value::as_f64).is_some_and(|v| v < 0.0) {
        sink.warning(
            Some(name),
            Some("idleTimeout"),
            "must be zero or a positive number of minutes; ignored",
        );
        out.remove("idleTimeout");
    }
    if out.get("directTools").and_then(Value::as_str) == Some("search") {
        sink.warning(
            Some(name),
            Some("directTools"),
            "`\"search\"` mode is not supported; treated as `false`",
        );
        out.insert("directTools".into(), Value::Bool(false));
    }
    if out
        .get("oauth")
        .and_then(|o| o.get("callbackPort"))
        .and_then(Value::as_u64)
        == Some(0)
    {
        sink.error(
            Some(name),
            Some("oauth.callbackPort"),
            format!("expected {}; the entry is skipped", expected("callbackPort")),
        );
        bad.push("oauth.callbackPort".into());
    }

    // One transport per entry, and `type` agreeing with it.
    let set: Vec<&str> = TRANSPORT_FIELDS
        .into_iter()
        .filter(|k| out.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if set.len() > 1 {
        sink.error(
            Some(name),
            Some(set[1]),
            format!(
                "`{}` and `{}` are both set; a server has exactly one transport; the entry is skipped",
                set[0], set[1]
            ),
        );
        bad.push(set[1].to_string());
    } else if let Some(kind) = out.get("type").and_then(Value::as_str)
        && let Some(transport) = set.first()
        && let Some(message) = type_conflict(kind, transport)
    {
        sink.error(Some(name), Some("type"), format!("{message}; the entry is skipped"));
        bad.push("type".into());
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    normalize(name, &mut out, sink);
    Ok(out)
}

/// Why `type` contradicts the transport field, if it does.
pub(crate) fn type_conflict(kind: &str, transport: &str) -> Option<String> {
    let http = matches!(kind, "http" | "streamable-http" | "sse");
    let ok = match transport {
        "command" => kind == "stdio",
        "url" => http,
        _ => false, // a socket has no `type`
    };
    (!ok).then(|| format!("`type` is \"{kind}\" but the server sets `{transport}`"))
}

/// Folds aliases into canonical keys (see the module docs).
fn normalize(name: &str, out: &mut Map<String, Value>, sink: &mut Sink<'_>) {
    // enabled / disabled → disabled
    let enabled = out.remove("enabled");
    match (out.get("disabled").cloned(), enabled) {
        (_, None) => {}
        (None, Some(Value::Bool(e))) => {
            out.insert("disabled".into(), Value::Bool(!e));
        }
        (None, Some(_)) => {
            out.insert("disabled".into(), Value::Null);
        }
        (Some(Value::Bool(d)), Some(Value::Bool(e))) => {
            if d == e {
                sink.warning(
                    Some(name),
                    Some("enabled"),
                    "contradicts `disabled`; the server is disabled",
                );
            }
            out.insert("disabled".into(), Value::Bool(d || !e));
        }
        (Some(_), Some(_)) => {}
    }
    alias(name, out, "allowedTools", "includeTools", sink);
    alias(name, out, "protocol", "protocolVersion", sink);
    if let Some(Value::String(mode)) = out.get("toolExposure").cloned() {
        out.remove("toolExposure");
        if out.contains_key("exposure") {
            sink.warning(Some(name), Some("toolExposure"), "ignored: `exposure` is also set");
        } else {
            out.insert("exposure".into(), Value::String(mode));
        }
    }
    if let Some(Value::Object(legacy)) = out.get("lifecycle")
        && let Some(mode) = legacy.get("mode").cloned()
    {
        out.insert("lifecycle".into(), mode);
    }
}

fn alias(name: &str, out: &mut Map<String, Value>, from: &str, to: &str, sink: &mut Sink<'_>) {
    let Some(value) = out.remove(from) else {
        return;
    };
    if out.contains_key(to) {
        if out.get(to) != Some(&value) {
            sink.warning(Some(name), Some(from), format!("ignored: `{to}` is also set and wins"));
        }
    } else {
        out.insert(to.to_string(), value);
    }
}

/// The `oauth.<field>` whose value has the wrong type, if the object is otherwise fine.
fn failing_oauth_field(value: &Value) -> Option<String> {
    let obj = value.as_object()?;
    obj.iter()
        .find(|(k, v)| serde_json::from_value::<RawOAuth>(json!({ k.as_str(): v })).is_err())
        .map(|(k, _)| format!("oauth.{k}"))
}

/// Validates `settings`: a bad key is reported and dropped; the others stay.
pub(crate) fn parse_settings(settings: &Map<String, Value>, sink: &mut Sink<'_>) -> Map<String, Value> {
    let known = settings_fields();
    let mut out = Map::new();
    for (key, val) in settings {
        let field = format!("settings.{key}");
        if !known.iter().any(|k| k == key) {
            if ADAPTER_SETTINGS.contains(&key.as_str()) {
                sink.warning(
                    None,
                    Some(&field),
                    "pi-mcp-adapter setting not supported by pimcp; ignored",
                );
            } else {
                sink.warning(None, Some(&field), "unknown setting; ignored");
            }
            continue;
        }
        if val.is_null() {
            continue;
        }
        if serde_json::from_value::<RawSettings>(json!({ key: val })).is_err() {
            sink.error(
                None,
                Some(&field),
                format!("expected {}; the setting is ignored", expected(key)),
            );
            continue;
        }
        let negative = val.as_f64().is_some_and(|v| v < 0.0);
        if negative || (key == "healthInterval" && val.as_f64().is_some_and(|v| v <= 0.0)) {
            sink.warning(None, Some(&field), "must be a positive number; ignored");
            continue;
        }
        if key == "directTools" && val.as_str() == Some("search") {
            sink.warning(
                None,
                Some(&field),
                "`\"search\"` mode is not supported; treated as `false`",
            );
            out.insert(key.clone(), Value::Bool(false));
            continue;
        }
        out.insert(key.clone(), val.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::problems::{ConfigProblem, Severity};

    type Parsed = (Result<Map<String, Value>, Vec<String>>, Vec<ConfigProblem>);

    fn server(value: Value) -> Parsed {
        let mut problems = Vec::new();
        let result = parse_server("s", &value, &mut Sink::new(&mut problems, None));
        (result, problems)
    }

    #[test]
    fn wrong_type_names_field_not_value() {
        let (result, problems) = server(json!({"command": "x", "args": "--secret-value"}));
        assert_eq!(result.unwrap_err(), vec!["args".to_string()]);
        assert_eq!(problems.len(), 1);
        let text = problems[0].to_string();
        assert_eq!(
            text,
            "server `s`: `args`: expected an array of strings; the entry is skipped"
        );
        assert!(!text.contains("secret-value"));
    }

    #[test]
    fn lifecycle_must_be_one_of_four() {
        let (result, problems) = server(json!({"command": "x", "lifecycle": "sometimes"}));
        assert!(result.is_err());
        assert!(
            problems[0]
                .message
                .contains("`lazy`, `eager`, `keep-alive`, `lazy-keep-alive`")
        );
        assert!(!problems[0].to_string().contains("sometimes"));
        let (ok, _) = server(json!({"command": "x", "lifecycle": {"mode": "keep-alive"}}));
        assert_eq!(ok.unwrap()["lifecycle"], "keep-alive");
    }

    #[test]
    fn both_command_and_url() {
        let (result, problems) = server(json!({"command": "x", "url": "https://h/mcp"}));
        assert_eq!(result.unwrap_err(), vec!["url".to_string()]);
        assert!(
            problems[0].message.contains("`command` and `url` are both set"),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn unknown_and_conflicting_type() {
        let (result, problems) = server(json!({"url": "https://h", "type": "websocket"}));
        assert_eq!(result.unwrap_err(), vec!["type".to_string()]);
        assert!(problems[0].message.starts_with("expected one of `stdio`"));
        let (result, problems) = server(json!({"command": "x", "type": "http"}));
        assert_eq!(result.unwrap_err(), vec!["type".to_string()]);
        assert!(
            problems[0]
                .message
                .contains("`type` is \"http\" but the server sets `command`")
        );
    }

    #[test]
    fn not_an_object() {
        let (result, problems) = server(json!(["command"]));
        assert!(result.is_err());
        assert_eq!(
            problems[0].to_string(),
            "server `s`: the entry is not an object; it is skipped"
        );
    }

    #[test]
    fn aliases_fold_into_canonical_keys() {
        let (result, problems) = server(json!({
            "command": "x", "enabled": false, "allowedTools": ["a*"], "protocol": "legacy", "toolExposure": "hidden"
        }));
        let entry = result.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(entry["disabled"], true);
        assert_eq!(entry["includeTools"], json!(["a*"]));
        assert_eq!(entry["protocolVersion"], "legacy");
        assert_eq!(entry["exposure"], "hidden");
        assert!(!entry.contains_key("enabled") && !entry.contains_key("allowedTools"));
    }

    #[test]
    fn unknown_fields_warn() {
        let (result, problems) = server(json!({"command": "x", "caFile": "/ca.pem", "bogus": 1}));
        assert!(result.is_ok());
        assert_eq!(problems.len(), 2);
        assert!(problems.iter().all(|p| p.severity == Severity::Warning));
    }

    #[test]
    fn oauth_sub_field_is_named() {
        let (result, problems) = server(json!({"url": "https://h", "oauth": {"clientId": 5}}));
        assert_eq!(result.unwrap_err(), vec!["oauth.clientId".to_string()]);
        assert_eq!(problems[0].field.as_deref(), Some("oauth.clientId"));
    }

    #[test]
    fn settings_bad_key_is_dropped_alone() {
        let mut problems = Vec::new();
        let settings = json!({"toolPrefix": "short", "idleTimeout": "ten", "showStatusIcon": true});
        let out = parse_settings(settings.as_object().unwrap(), &mut Sink::new(&mut problems, None));
        assert_eq!(out.keys().collect::<Vec<_>>(), ["toolPrefix"]);
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[0].field.as_deref(), Some("settings.idleTimeout"));
    }

    #[test]
    fn root_shape() {
        let mut problems = Vec::new();
        assert!(parse_root(&json!({"mcpServers": []}), &mut Sink::new(&mut problems, None)).is_none());
        assert!(parse_root(&json!([1]), &mut Sink::new(&mut problems, None)).is_none());
        let content = parse_root(
            &json!({"mcp-servers": {"a": {"command": "old"}, "b": {"command": "b"}}, "mcpServers": {"a": {"command": "new"}},
                    "imports": ["cursor", "nope", "cursor"]}),
            &mut Sink::new(&mut problems, None),
        )
        .unwrap();
        let names: Vec<_> = content
            .servers
            .iter()
            .map(|(n, e)| (n.as_str(), e["command"].as_str().unwrap()))
            .collect();
        assert_eq!(names, [("b", "b"), ("a", "new")]);
        assert_eq!(content.imports, [HostKind::Cursor]);
    }
}
