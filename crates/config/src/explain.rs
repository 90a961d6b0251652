//! The merged configuration as a person (or a script) inspects it: every field as written, which file set it, and
//! redaction of everything that can be a secret. Backs `pimcp-run config show` (its `--json` shape is this
//! module's serde output and is kept stable).
//!
//! Redacted: every `env` and `headers` value, `bearerToken`, `oauth.clientSecret`, `oauth.clientPrivateKey`,
//! `oauth.identityAssertion.idpClientSecret` and `.idToken` (literal values and `!command`s
//! alike), and in `url` the password of the user info and every query value. Values are shown as written, so a
//! `${VAR}` shows as `${VAR}`, never as the variable's value.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::load::load_detailed;
use crate::model::{Availability, Config, Origin, ServerConfig, Transport};
use crate::options::LoadOptions;
use crate::problems::ConfigProblem;

/// Shown instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// One field's value (as written, redacted) and the source that set it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldView {
    /// The value as written, secrets redacted.
    pub value: Value,
    /// The source that set it.
    pub from: Origin,
}

/// A config file that was considered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceView {
    /// Which source it is.
    #[serde(flatten)]
    pub origin: Origin,
    /// Whether the file exists.
    pub exists: bool,
    /// Whether it was read and merged.
    pub loaded: bool,
    /// For project-scope files: whether the project trust record covers the file as it is now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trusted: Option<bool>,
}

/// One listed server.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerView {
    /// The server's name.
    pub name: String,
    /// `available`, `disabled`, `untrusted` or `config-error`.
    pub status: &'static str,
    /// Why it is not available (no values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `stdio`, `http` or `socket`.
    pub transport: &'static str,
    /// The highest-precedence source that contributed.
    pub origin: Origin,
    /// Canonical field name → value as written (redacted) and its source.
    pub fields: BTreeMap<String, FieldView>,
    /// SHA-256 of the identity fields (metadata-cache key).
    pub identity: String,
}

/// The whole merged configuration for display.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigView {
    /// The project directory the config was loaded for.
    pub project_dir: PathBuf,
    /// Every config file that was considered, in precedence order.
    pub sources: Vec<SourceView>,
    /// Each setting that was set, with its source.
    pub settings: BTreeMap<String, FieldView>,
    /// Every configured server.
    pub servers: Vec<ServerView>,
    /// Every problem met while loading.
    pub problems: Vec<ConfigProblem>,
}

/// Loads like [`crate::load`] and also returns the view `config show` prints.
pub fn explain(opts: &LoadOptions) -> (Config, ConfigView) {
    let loaded = load_detailed(opts);
    let sources = loaded
        .sources
        .iter()
        .map(|s| SourceView {
            origin: s.file.origin.clone(),
            exists: s.file.exists,
            loaded: s.file.loaded,
            trusted: s.trusted,
        })
        .collect();
    let settings = loaded
        .settings
        .values
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.clone(),
                FieldView {
                    value: v.clone(),
                    from: loaded.settings.provenance.get(k)?.clone(),
                },
            ))
        })
        .collect();
    let servers = loaded
        .config
        .servers
        .iter()
        .filter_map(|server| {
            let merged = loaded.merged.get(&server.name)?;
            Some(server_view(server, &merged.fields, &merged.provenance))
        })
        .collect();
    let view = ConfigView {
        project_dir: loaded.config.project_dir.clone(),
        sources,
        settings,
        servers,
        problems: loaded.config.problems.clone(),
    };
    (loaded.config, view)
}

fn server_view(
    server: &ServerConfig,
    fields: &Map<String, Value>,
    provenance: &BTreeMap<String, Origin>,
) -> ServerView {
    let (status, reason) = match &server.availability {
        Availability::Available => ("available", None),
        Availability::Disabled => ("disabled", None),
        Availability::Untrusted { trust_command, .. } => (
            "untrusted",
            Some(format!("defined by an untrusted project file; run `{trust_command}`")),
        ),
        Availability::ConfigError { message } => ("config-error", Some(message.clone())),
    };
    let transport = match server.transport {
        Transport::Stdio(_) => "stdio",
        Transport::Http(_) => "http",
        Transport::Socket(_) => "socket",
    };
    let fields = fields
        .iter()
        .filter_map(|(k, v)| {
            let from = provenance.get(k)?.clone();
            Some((
                k.clone(),
                FieldView {
                    value: redact_field(k, v),
                    from,
                },
            ))
        })
        .collect();
    ServerView {
        name: server.name.clone(),
        status,
        reason,
        transport,
        origin: server.origin.clone(),
        fields,
        identity: server.identity_hash(),
    }
}

/// The value of a server field as it may be shown.
pub fn redact_field(field: &str, value: &Value) -> Value {
    match (field, value) {
        ("env" | "headers", Value::Object(map)) => Value::Object(
            map.keys()
                .map(|k| (k.clone(), Value::String(REDACTED.into())))
                .collect(),
        ),
        ("bearerToken", _) => Value::String(REDACTED.into()),
        ("oauth", Value::Object(map)) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("clientSecret" | "clientPrivateKey", _) => Value::String(REDACTED.into()),
                        ("identityAssertion", Value::Object(ia)) => Value::Object(
                            ia.iter()
                                .map(|(k, v)| {
                                    let v = if k == "idpClientSecret" || k == "idToken" {
                                        Value::String(REDACTED.into())
                                    } else {
                                        v.clone()
                                    };
                                    (k.clone(), v)
                                })
                                .collect(),
                        ),
                        _ => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        ("url", Value::String(url)) => Value::String(redact_url(url)),
        _ => value.clone(),
    }
}

/// Hides the user-info password and every query value of a URL.
pub fn redact_url(url: &str) -> String {
    let (before_fragment, fragment) = match url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (url, None),
    };
    let (base, query) = match before_fragment.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (before_fragment, None),
    };
    let base = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let authority = match authority.rsplit_once('@') {
                Some((userinfo, host)) => match userinfo.split_once(':') {
                    Some((user, _)) => format!("{user}:{REDACTED}@{host}"),
                    None => format!("{userinfo}@{host}"),
                },
                None => authority.to_string(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => base.to_string(),
    };
    let mut out = base;
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) => format!("{k}={REDACTED}"),
                None => pair.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn url_redaction() {
        assert_eq!(redact_url("https://h.example/mcp"), "https://h.example/mcp");
        assert_eq!(
            redact_url("https://me:pw@h.example/mcp?key=abc&flag&x=${TOKEN}#top"),
            "https://me:<redacted>@h.example/mcp?key=<redacted>&flag&x=<redacted>#top"
        );
    }

    #[test]
    fn secret_fields_are_redacted() {
        assert_eq!(
            redact_field("env", &json!({"A": "1", "B": "!op read"})),
            json!({"A": REDACTED, "B": REDACTED})
        );
        assert_eq!(redact_field("bearerToken", &json!("t")), json!(REDACTED));
        assert_eq!(
            redact_field("oauth", &json!({"clientId": "c", "clientSecret": "s"})),
            json!({"clientId": "c", "clientSecret": REDACTED})
        );
        assert_eq!(
            redact_field(
                "oauth",
                &json!({"clientPrivateKey": "pem", "identityAssertion": {"idpClientId": "i", "idpClientSecret": "s", "idToken": "t"}})
            ),
            json!({"clientPrivateKey": REDACTED, "identityAssertion": {"idpClientId": "i", "idpClientSecret": REDACTED, "idToken": REDACTED}})
        );
        assert_eq!(redact_field("args", &json!(["--x"])), json!(["--x"]));
    }
}
