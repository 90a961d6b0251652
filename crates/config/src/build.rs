//! From a merged JSON server (and merged settings) to the typed model: transport selection, interpolation, `!command`
//! classification, auth, timeouts, filters and availability. A server without a transport, or whose `type`
//! contradicts it, is skipped; a missing variable or an unusable value keeps the server listed with
//! [`Availability::ConfigError`], naming the field and variable, never a value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::interpolate::{self, Syntax, describe_missing};
use crate::merge::MergedServer;
use crate::model::{
    ApproveTools, AuthConfig, Availability, DirectTools, HttpTransport, IdentityAssertionConfig, Lifecycle,
    OAuthConfig, OAuthGrant, OutputGuard, ServerConfig, Settings, SocketTransport, StdioTransport, Timeouts,
    TraceSettings, Transport,
};
use crate::paths::{EnvMap, absolute, expand_tilde, expand_tilde_str};
use crate::problems::Sink;
use crate::raw::{
    RawApproveTools, RawAuth, RawAuthKind, RawDirectTools, RawOAuth, RawOAuthField, RawOutputGuard, RawServer,
    RawSettings, RawToolExposure, RawTrace, RawType,
};
use crate::secret::{Secret, SecretValue};

/// What building needs besides the merged server.
pub(crate) struct BuildCtx<'a> {
    pub env: &'a EnvMap,
    pub home: &'a Path,
    pub project_dir: &'a Path,
    pub settings: &'a Settings,
}

/// Expands strings of one server, collecting missing-variable messages.
struct Expander<'a> {
    ctx: &'a BuildCtx<'a>,
    literal: &'a std::collections::BTreeSet<String>,
    errors: Vec<String>,
}

impl Expander<'_> {
    /// `top`: the top-level field (decides literal-ness); `name`: how the field is named in messages.
    fn string(&mut self, top: &str, name: &str, value: &str, syntax: Syntax) -> String {
        if self.literal.contains(top) {
            return value.to_string();
        }
        let mut missing = Vec::new();
        let out = interpolate::expand(value, syntax, self.ctx.env, &mut missing);
        if !missing.is_empty() {
            self.errors.push(describe_missing(name, &missing));
        }
        out
    }

    fn secret(&mut self, top: &str, name: &str, value: &str, syntax: Syntax) -> SecretValue {
        if self.literal.contains(top) {
            return SecretValue::Plain(Secret::new(value));
        }
        crate::secret::classify(value, |rest| self.string(top, name, rest, syntax))
    }

    fn secret_map(&mut self, top: &str, map: &BTreeMap<String, String>) -> BTreeMap<String, SecretValue> {
        map.iter()
            .map(|(k, v)| (k.clone(), self.secret(top, &format!("{top}.{k}"), v, Syntax::WithBare)))
            .collect()
    }

    fn opt(&mut self, top: &str, name: &str, value: &Option<String>) -> Option<String> {
        value.as_ref().map(|v| self.string(top, name, v, Syntax::Braced))
    }
}

/// Builds the typed server, or `None` (with an error problem) when it cannot be listed at all.
pub(crate) fn build_server(merged: &MergedServer, ctx: &BuildCtx<'_>, sink: &mut Sink<'_>) -> Option<ServerConfig> {
    let name = merged.name.as_str();
    let raw: RawServer = match serde_json::from_value(Value::Object(merged.fields.clone())) {
        Ok(raw) => raw,
        Err(_) => {
            sink.error(
                Some(name),
                None,
                "the merged definition is not valid; the server is skipped",
            );
            return None;
        }
    };
    let transport_field = crate::entries::TRANSPORT_FIELDS
        .into_iter()
        .find(|k| merged.fields.get(*k).is_some_and(|v| !v.is_null()));
    let Some(transport_field) = transport_field else {
        sink.error(Some(name), None, "has no `command`, `url` or `socket` (every definition needs one, even when disabled); the server is skipped");
        return None;
    };
    if let Some(kind) = raw.kind {
        let kind_str = match kind {
            RawType::Stdio => "stdio",
            RawType::Http => "http",
            RawType::StreamableHttp => "streamable-http",
            RawType::Sse => "sse",
        };
        if let Some(message) = crate::entries::type_conflict(kind_str, transport_field) {
            sink.error(Some(name), Some("type"), format!("{message}; the server is skipped"));
            return None;
        }
    }
    for (field, transports) in [
        ("args", "command"),
        ("env", "command"),
        ("cwd", "command"),
        ("inheritEnv", "command"),
        ("headers", "url"),
        ("auth", "url"),
        ("bearerToken", "url"),
        ("bearerTokenEnv", "url"),
        ("oauth", "url"),
    ] {
        if transports != transport_field && merged.fields.contains_key(field) {
            let kind = if transports == "command" { "stdio" } else { "HTTP" };
            sink.warning(
                Some(name),
                Some(field),
                format!("applies only to {kind} servers; ignored"),
            );
        }
    }

    let mut ex = Expander {
        ctx,
        literal: &merged.literal,
        errors: Vec::new(),
    };
    let transport = match transport_field {
        "command" => {
            let command = raw.command.as_deref().unwrap_or_default();
            let command = expand_tilde_str(&ex.string("command", "command", command, Syntax::Braced), ctx.home);
            let args = raw
                .args
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, arg)| ex.string("args", &format!("args[{i}]"), arg, Syntax::Braced))
                .collect();
            let env = raw
                .env
                .as_ref()
                .map(|env| ex.secret_map("env", env))
                .unwrap_or_default();
            let cwd = raw.cwd.as_ref().map(|cwd| {
                let cwd = ex.string("cwd", "cwd", cwd, Syntax::Braced);
                absolute(&expand_tilde(&cwd, ctx.home), ctx.project_dir)
            });
            Transport::Stdio(StdioTransport {
                command,
                args,
                env,
                cwd,
                inherit_env: raw.inherit_env.unwrap_or(true),
            })
        }
        "url" => {
            let url = ex.string("url", "url", raw.url.as_deref().unwrap_or_default(), Syntax::Braced);
            let headers = raw
                .headers
                .as_ref()
                .map(|h| ex.secret_map("headers", h))
                .unwrap_or_default();
            Transport::Http(HttpTransport {
                url,
                headers,
                allow_legacy_sse: raw.kind == Some(RawType::Sse),
            })
        }
        _ => {
            let path = ex.string(
                "socket",
                "socket",
                raw.socket.as_deref().unwrap_or_default(),
                Syntax::Braced,
            );
            Transport::Socket(SocketTransport {
                path: absolute(&expand_tilde(&path, ctx.home), ctx.project_dir),
            })
        }
    };
    let missing_vars = !ex.errors.is_empty();
    if let Transport::Http(http) = &transport
        && !missing_vars
        && !is_http_url(&http.url)
    {
        ex.errors
            .push("`url` is not an absolute http:// or https:// URL".into());
    }

    let auth = if matches!(transport, Transport::Http(_)) {
        build_auth(&raw, &mut ex)
    } else {
        AuthConfig::Auto
    };
    let lifecycle = raw.lifecycle.map(|l| l.mode()).unwrap_or_default();
    let timeouts = build_timeouts(&raw, lifecycle, ctx.settings);

    let disabled = raw.disabled == Some(true);
    let availability = if !ex.errors.is_empty() {
        let message = ex.errors.join("; ");
        let severity_disabled = disabled;
        if severity_disabled {
            sink.warning(Some(name), None, format!("{message} (the server is disabled)"));
        } else {
            sink.error(Some(name), None, format!("{message}; the server will not connect"));
        }
        Availability::ConfigError { message }
    } else {
        Availability::Available
    };
    let availability = if disabled { Availability::Disabled } else { availability };

    Some(ServerConfig {
        name: name.to_string(),
        transport,
        auth,
        lifecycle,
        timeouts,
        protocol: raw.protocol_version.unwrap_or_default(),
        availability,
        description: raw.description.clone(),
        expose_resources: raw.expose_resources.unwrap_or(true),
        direct_tools: raw.direct_tools.as_ref().map(direct_tools),
        tool_prefix: raw.tool_prefix,
        include_tools: raw.include_tools.clone().unwrap_or_default(),
        exclude_tools: raw.exclude_tools.clone().unwrap_or_default(),
        hidden: raw
            .exposure
            .as_deref()
            .is_some_and(|e| e.eq_ignore_ascii_case("hidden")),
        tool_exposure: match &raw.tool_exposure {
            Some(RawToolExposure::PerTool(map)) => map
                .iter()
                .filter_map(|(tool, mode)| Some((tool.clone(), mode.as_str()?.to_ascii_lowercase())))
                .collect(),
            // A string was folded into `exposure` by the entry normalization.
            Some(RawToolExposure::Mode(_)) | None => Vec::new(),
        },
        search_keywords: raw.search_keywords.clone().unwrap_or_default(),
        approve_tools: raw.approve_tools.as_ref().map(approve_tools),
        debug: raw.debug.unwrap_or(false),
        trace: raw.trace,
        origin: merged.origin.clone(),
        provenance: merged.provenance.clone(),
    })
}

fn is_http_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    let rest = lower.strip_prefix("https://").or_else(|| lower.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/'))
}

fn build_auth(raw: &RawServer, ex: &mut Expander<'_>) -> AuthConfig {
    let bearer = || AuthConfig::Bearer {
        token: None,
        token_env: None,
    };
    let with_bearer = |ex: &mut Expander<'_>| {
        let token = raw
            .bearer_token
            .as_ref()
            .map(|t| ex.secret("bearerToken", "bearerToken", t, Syntax::Braced));
        AuthConfig::Bearer {
            token,
            token_env: raw.bearer_token_env.clone(),
        }
    };
    let auth = match (raw.auth, &raw.oauth) {
        (Some(RawAuth::Flag(false)), _) => AuthConfig::Disabled,
        (Some(RawAuth::Kind(RawAuthKind::Bearer)), _) => {
            let auth = with_bearer(ex);
            if auth == bearer() {
                ex.errors
                    .push("`auth` is \"bearer\" but neither `bearerToken` nor `bearerTokenEnv` is set".into());
            }
            auth
        }
        (Some(RawAuth::Kind(RawAuthKind::Oauth)), Some(RawOAuthField::Flag(false))) => {
            ex.errors.push("`auth` is \"oauth\" but `oauth` is false".into());
            AuthConfig::Disabled
        }
        (Some(RawAuth::Kind(RawAuthKind::Oauth)), Some(RawOAuthField::Settings(oauth))) => {
            AuthConfig::OAuth(build_oauth(oauth, ex))
        }
        (Some(RawAuth::Kind(RawAuthKind::Oauth)), _) => AuthConfig::OAuth(OAuthConfig::default()),
        (_, Some(RawOAuthField::Flag(false))) => AuthConfig::Disabled,
        (_, Some(RawOAuthField::Settings(oauth))) => AuthConfig::OAuth(build_oauth(oauth, ex)),
        (_, Some(RawOAuthField::Flag(true))) => AuthConfig::OAuth(OAuthConfig::default()),
        _ if raw.bearer_token.is_some() || raw.bearer_token_env.is_some() => with_bearer(ex),
        _ => AuthConfig::Auto,
    };
    if let Some(env) = &raw.bearer_token_env {
        let valid = !env.is_empty() && env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid && matches!(auth, AuthConfig::Bearer { .. }) {
            ex.errors
                .push("`bearerTokenEnv` must be the name of an environment variable".into());
        }
    }
    auth
}

fn build_oauth(raw: &RawOAuth, ex: &mut Expander<'_>) -> OAuthConfig {
    let field = |name: &str| format!("oauth.{name}");
    OAuthConfig {
        grant_type: raw.grant_type.unwrap_or_default(),
        client_id: ex.opt("oauth", &field("clientId"), &raw.client_id),
        client_secret: raw
            .client_secret
            .as_ref()
            .map(|s| ex.secret("oauth", &field("clientSecret"), s, Syntax::Braced)),
        client_metadata_url: ex.opt("oauth", &field("clientMetadataUrl"), &raw.client_metadata_url),
        scope: ex.opt("oauth", &field("scope"), &raw.scope),
        redirect_uri: ex.opt("oauth", &field("redirectUri"), &raw.redirect_uri),
        callback_port: raw.callback_port,
        authorization_params: raw
            .authorization_params
            .iter()
            .flatten()
            .map(|(k, v)| {
                (
                    k.clone(),
                    ex.string("oauth", &format!("oauth.authorizationParams.{k}"), v, Syntax::Braced),
                )
            })
            .collect(),
        client_name: ex.opt("oauth", &field("clientName"), &raw.client_name),
        client_uri: ex.opt("oauth", &field("clientUri"), &raw.client_uri),
        logo_uri: ex.opt("oauth", &field("logoUri"), &raw.logo_uri),
        auth_server_metadata_url: ex.opt("oauth", &field("authServerMetadataUrl"), &raw.auth_server_metadata_url),
        skip_issuer_metadata_validation: raw.skip_issuer_metadata_validation.unwrap_or(false),
        dpop: raw.dpop.unwrap_or(false),
        client_private_key: raw
            .client_private_key
            .as_ref()
            .map(|s| ex.secret("oauth", &field("clientPrivateKey"), s, Syntax::Braced)),
        identity_assertion: build_identity_assertion(raw, ex),
    }
}

fn build_identity_assertion(raw: &RawOAuth, ex: &mut Expander<'_>) -> Option<IdentityAssertionConfig> {
    let grant = raw.grant_type.unwrap_or_default();
    let Some(ia) = &raw.identity_assertion else {
        if grant == OAuthGrant::IdentityAssertion {
            ex.errors
                .push("`grantType: \"identity_assertion\"` needs `oauth.identityAssertion`".into());
        }
        return None;
    };
    let field = |name: &str| format!("oauth.identityAssertion.{name}");
    let built = IdentityAssertionConfig {
        idp_issuer: ex.opt("oauth", &field("idpIssuer"), &ia.idp_issuer),
        idp_token_endpoint: ex.opt("oauth", &field("idpTokenEndpoint"), &ia.idp_token_endpoint),
        idp_client_id: ex.opt("oauth", &field("idpClientId"), &ia.idp_client_id),
        idp_client_secret: ia
            .idp_client_secret
            .as_ref()
            .map(|s| ex.secret("oauth", &field("idpClientSecret"), s, Syntax::Braced)),
        id_token: ia
            .id_token
            .as_ref()
            .map(|s| ex.secret("oauth", &field("idToken"), s, Syntax::Braced)),
    };
    if grant == OAuthGrant::IdentityAssertion {
        if built.idp_issuer.is_none() && built.idp_token_endpoint.is_none() {
            ex.errors
                .push("`oauth.identityAssertion` needs `idpIssuer` or `idpTokenEndpoint`".into());
        }
        if built.id_token.is_none() {
            ex.errors.push("`oauth.identityAssertion` needs `idToken`".into());
        }
    }
    Some(built)
}

fn seconds(value: f64) -> Option<Duration> {
    (value > 0.0).then(|| Duration::try_from_secs_f64(value).ok()).flatten()
}

/// Minutes → duration; `0` (or absurdly large) → never.
fn minutes(value: f64) -> Option<Duration> {
    seconds(value * 60.0)
}

/// `requestTimeoutMs` and `timeout` set the request timeout (ms wins); `startupTimeout` and `toolTimeout`
/// are more specific and win for their phase.
fn build_timeouts(raw: &RawServer, lifecycle: Lifecycle, settings: &Settings) -> Timeouts {
    let request_ms = raw.request_timeout_ms.and_then(|ms| seconds(ms / 1000.0));
    let timeout = raw.timeout.and_then(seconds);
    let request = request_ms
        .or(timeout)
        .or(settings.request_timeout)
        .unwrap_or(Timeouts::DEFAULT_REQUEST);
    let startup = raw
        .startup_timeout
        .and_then(seconds)
        .or(request_ms)
        .or(timeout)
        .unwrap_or(Timeouts::DEFAULT_STARTUP);
    let tool = raw.tool_timeout.and_then(seconds).unwrap_or(request);
    let idle = match lifecycle {
        Lifecycle::KeepAlive | Lifecycle::LazyKeepAlive => None,
        Lifecycle::Eager => raw.idle_timeout.and_then(minutes),
        Lifecycle::Lazy => match raw.idle_timeout {
            Some(value) => minutes(value),
            None => settings.idle_timeout,
        },
    };
    Timeouts {
        startup,
        request,
        tool,
        idle,
    }
}

fn direct_tools(raw: &RawDirectTools) -> DirectTools {
    match raw {
        RawDirectTools::Flag(true) => DirectTools::All,
        RawDirectTools::Flag(false) | RawDirectTools::Mode(_) => DirectTools::Off,
        RawDirectTools::Tools(tools) => DirectTools::Listed(tools.clone()),
    }
}

fn approve_tools(raw: &RawApproveTools) -> ApproveTools {
    match raw {
        RawApproveTools::Flag(true) => ApproveTools::All,
        RawApproveTools::Flag(false) => ApproveTools::Off,
        RawApproveTools::Globs(globs) => ApproveTools::Globs(globs.clone()),
    }
}

/// `scriptMode` and `MCP_SCRIPT_MODE=0`: the `mcpScript` limits, or `None` when it is off. Limits out of range are
/// clamped (timeout 1 s to 10 min, memory 8 MiB to 1 GiB, calls 1 to 1000).
fn script_limits(raw: Option<crate::raw::RawScriptMode>, env: &EnvMap) -> Option<crate::model::ScriptLimits> {
    use crate::model::ScriptLimits;
    use crate::raw::RawScriptMode;
    if env.get("MCP_SCRIPT_MODE").map(str::trim) == Some("0") {
        return None;
    }
    let limits = match raw {
        Some(RawScriptMode::Flag(false)) => return None,
        Some(RawScriptMode::Flag(true)) | None => return Some(ScriptLimits::DEFAULT),
        Some(RawScriptMode::Limits(limits)) => limits,
    };
    let number = |v: Option<f64>, min: f64, max: f64| v.filter(|v| v.is_finite()).map(|v| v.clamp(min, max));
    let d = ScriptLimits::DEFAULT;
    Some(ScriptLimits {
        timeout: number(limits.timeout_ms, 1_000.0, 600_000.0).map_or(d.timeout, |ms| Duration::from_millis(ms as u64)),
        memory_bytes: number(limits.memory_mb, 8.0, 1024.0).map_or(d.memory_bytes, |mb| (mb as usize) << 20),
        max_calls: number(limits.max_calls, 1.0, 1000.0).map_or(d.max_calls, |n| n as u32),
        max_in_flight: d.max_in_flight,
    })
}

/// Typed settings from the merged settings map and the environment switches (`MCP_OUTPUT_GUARD=0`).
pub(crate) fn build_settings(
    values: &Map<String, Value>,
    env: &EnvMap,
    home: &Path,
    project_dir: &Path,
    sink: &mut Sink<'_>,
) -> Settings {
    let raw: RawSettings = match serde_json::from_value(Value::Object(values.clone())) {
        Ok(raw) => raw,
        Err(_) => {
            sink.error(
                None,
                Some("settings"),
                "the merged settings are not valid; defaults are used",
            );
            RawSettings::default()
        }
    };
    let defaults = Settings::default();
    let output_guard = match raw.output_guard {
        Some(RawOutputGuard::Flag(false)) => None,
        Some(RawOutputGuard::Limits(limits)) => Some(OutputGuard {
            max_bytes: limits.max_bytes.unwrap_or(OutputGuard::DEFAULT.max_bytes),
            max_lines: limits.max_lines.unwrap_or(OutputGuard::DEFAULT.max_lines),
        }),
        Some(RawOutputGuard::Flag(true)) | None => Some(OutputGuard::DEFAULT),
    };
    let output_guard = if env.get("MCP_OUTPUT_GUARD").map(str::trim) == Some("0") {
        None
    } else {
        output_guard
    };
    let trace = match raw.trace {
        Some(RawTrace::Flag(enabled)) => TraceSettings {
            enabled,
            ..TraceSettings::default()
        },
        Some(RawTrace::Settings(t)) => TraceSettings {
            enabled: t.enabled.unwrap_or(true),
            file: t.file.as_deref().map(|f| absolute(&expand_tilde(f, home), project_dir)),
            max_bytes: t.max_bytes,
        },
        None => TraceSettings::default(),
    };
    Settings {
        tool_prefix: raw.tool_prefix.unwrap_or(defaults.tool_prefix),
        idle_timeout: match raw.idle_timeout {
            Some(value) => minutes(value),
            None => defaults.idle_timeout,
        },
        request_timeout: raw.request_timeout_ms.and_then(|ms| seconds(ms / 1000.0)),
        direct_tools: raw
            .direct_tools
            .as_ref()
            .map(direct_tools)
            .unwrap_or(defaults.direct_tools),
        freeze_direct_tools: raw.freeze_direct_tools.unwrap_or(false),
        disable_proxy_tool: raw.disable_proxy_tool.unwrap_or(false),
        approve_tools: raw
            .approve_tools
            .as_ref()
            .map(approve_tools)
            .unwrap_or(defaults.approve_tools),
        output_guard,
        trace,
        host_config_discovery: raw.host_config_discovery.unwrap_or_default(),
        agent_plugin_paths: raw
            .agent_plugin_paths
            .iter()
            .flatten()
            .map(|p| absolute(&expand_tilde(p, home), project_dir))
            .collect::<Vec<PathBuf>>(),
        token_store: raw.token_store.unwrap_or_default(),
        oauth_dir: raw
            .oauth_dir
            .as_deref()
            .filter(|d| !d.is_empty())
            .map(|d| absolute(&expand_tilde(d, home), project_dir)),
        auto_auth: raw.auto_auth.unwrap_or(false),
        sampling: raw.sampling,
        sampling_auto_approve: raw.sampling_auto_approve.unwrap_or(false),
        elicitation: raw.elicitation,
        warm_cache: raw.warm_cache.unwrap_or(false),
        health_interval: raw
            .health_interval
            .and_then(seconds)
            .unwrap_or(defaults.health_interval),
        discovery_timeout: match raw.discovery_timeout {
            Some(v) if v.is_finite() && v >= 0.0 => Duration::from_secs_f64(v.min(600.0)),
            _ => defaults.discovery_timeout,
        },
        max_message_bytes: match raw.max_message_bytes {
            Some(v) if v.is_finite() && v >= 0.0 => (v as usize).max(Settings::MIN_MAX_MESSAGE_BYTES),
            _ => defaults.max_message_bytes,
        },
        script: script_limits(raw.script_mode, env),
    }
}

/// `MCP_DIRECT_TOOLS` (`server`, `server/tool`, `__none__`, comma-separated): when set, it replaces every server's
/// `directTools` (servers not listed get none) and the global default.
pub(crate) fn apply_direct_tools_env(servers: &mut [ServerConfig], settings: &mut Settings, env: &EnvMap) {
    let Some(spec) = env.get("MCP_DIRECT_TOOLS") else {
        return;
    };
    let mut wanted: BTreeMap<String, DirectTools> = BTreeMap::new();
    for token in spec.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if token == "__none__" {
            wanted.clear();
            break;
        }
        match token.split_once('/') {
            Some((server, tool)) => match wanted
                .entry(server.to_string())
                .or_insert(DirectTools::Listed(Vec::new()))
            {
                DirectTools::Listed(tools) => tools.push(tool.to_string()),
                DirectTools::All | DirectTools::Off => {}
            },
            None => {
                wanted.insert(token.to_string(), DirectTools::All);
            }
        }
    }
    settings.direct_tools = DirectTools::Off;
    for server in servers {
        server.direct_tools = Some(wanted.remove(&server.name).unwrap_or(DirectTools::Off));
    }
}
