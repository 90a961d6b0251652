//! The on-disk shape of a pimcp config file (`mcp.json`), as serde types with doc comments: the single source of the
//! JSON Schema (`pimcp-run config schema`) and of the per-field type checks the loader runs on every entry.
//!
//! Every field is optional here; which combinations are valid (one transport, `type` agreeing with it, …) is decided
//! by the loader after merging, because a later file may override only part of a server.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::{HostConfigDiscovery, Lifecycle, OAuthGrant, ProtocolMode, TokenStoreKind, ToolPrefix};

/// A pimcp configuration file: JSON with `//` and `/* */` comments and trailing commas allowed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(title = "pimcp configuration file")]
pub struct RawFile {
    /// Optional URL of this schema, for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// The MCP servers, by name. Entries merge field by field across files; later files win.
    #[serde(rename = "mcpServers", default, skip_serializing_if = "Option::is_none")]
    pub mcp_servers: Option<BTreeMap<String, RawServer>>,
    /// Legacy spelling of `mcpServers` (when both are present, `mcpServers` wins per server).
    #[serde(rename = "mcp-servers", default, skip_serializing_if = "Option::is_none")]
    pub legacy_mcp_servers: Option<BTreeMap<String, RawServer>>,
    /// Global settings; merged shallowly per key across files (later files win per key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<RawSettings>,
    /// Host configs to import read-only, below every pimcp file (see docs/imports.md). The first listed host wins
    /// among imports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imports: Option<Vec<RawImport>>,
}

/// A host whose MCP config can be imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RawImport {
    #[serde(rename = "cursor")]
    Cursor,
    #[serde(rename = "claude-code")]
    ClaudeCode,
    #[serde(rename = "claude-desktop")]
    ClaudeDesktop,
    #[serde(rename = "opencode")]
    OpenCode,
    #[serde(rename = "vscode")]
    VsCode,
    #[serde(rename = "windsurf")]
    Windsurf,
    #[serde(rename = "codex")]
    Codex,
}

/// One MCP server. Exactly one of `command` (stdio), `url` (HTTP) or `socket` (rmcp-mux Unix socket) must be set
/// once all files are merged, even when the server is disabled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawServer {
    /// Transport type; inferred from `command` / `url` / `socket` when omitted. `sse` means HTTP with the legacy
    /// HTTP+SSE transport allowed as a fallback. A type that contradicts the fields is rejected.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<RawType>,

    /// Executable of a stdio server (no shell). Interpolated; `~` expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Arguments of a stdio server. Interpolated (no `~` expansion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Environment overlay of a stdio server. Values are interpolated (also bare `$VAR`); a value starting with `!`
    /// is a shell command run at connect time whose output becomes the value (`!!` escapes a literal `!`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory of a stdio server (default: the project directory; relative paths resolve there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `true` (default): the child inherits pimcp's environment. `false`: only HOME, LOGNAME, PATH, SHELL, TERM, USER
    /// plus `env`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherit_env: Option<bool>,

    /// Streamable HTTP endpoint. Interpolated; a later file that changes it drops inherited `headers`,
    /// `bearerToken`, `bearerTokenEnv` and `oauth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent to the server's origin. Values interpolated (also bare `$VAR`); `!command` allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Path of an rmcp-mux Unix socket. Interpolated; `~` expanded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,

    /// HTTP authentication: `"oauth"`, `"bearer"`, or `false` for none. Unset: OAuth is auto-detected from a 401
    /// unless `headers` are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<RawAuth>,
    /// Static bearer token for `auth: "bearer"`. Interpolated; `!command` allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token: Option<String>,
    /// Name of an environment variable holding the bearer token, read at connect time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    /// OAuth 2.1 client settings, or `false` to disable OAuth auto-detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<RawOAuthField>,

    /// When the server connects: `lazy` (default), `eager`, `keep-alive`, `lazy-keep-alive`. The legacy form
    /// `{ "mode": "…" }` is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<RawLifecycle>,
    /// Minutes without use before a `lazy` server disconnects (fractional allowed; `0` = never). Overrides
    /// `settings.idleTimeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<f64>,
    /// Per-request timeout in milliseconds (wins over `timeout`; `<= 0` means the default, 60 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout_ms: Option<f64>,
    /// Per-request timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Connect + initialize timeout in seconds (default: `requestTimeoutMs`, else `timeout`, else 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout: Option<f64>,
    /// `tools/call` timeout in seconds (default: the request timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout: Option<f64>,
    /// Protocol era: `auto` (default: try `server/discover`, fall back to `initialize`, remembered per server),
    /// `legacy`, or `2026-07-28`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<ProtocolMode>,
    /// Alias of `protocolVersion` (which wins when both are set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolMode>,

    /// `false` disables the server (same as `disabled: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `true` disables the server: it stays listed but never connects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// Short description of what the server offers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Expose resources as `read_<name>` tools (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expose_resources: Option<bool>,
    /// Expose tools beside `mcp`: `true` (all), a list of tool names, or `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_tools: Option<RawDirectTools>,
    /// Per-server override of `settings.toolPrefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_prefix: Option<ToolPrefix>,
    /// Only tools matching one of these globs (`*`, `?`) are visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_tools: Option<Vec<String>>,
    /// Tools matching one of these globs are hidden (applied after `includeTools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_tools: Option<Vec<String>>,
    /// Alias of `includeTools` (which wins when both are set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Exposure per tool: `{ "<original name or pattern>": "<mode>" }`; a tool whose mode is `hidden` is
    /// proxy-only. A string is read like `exposure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_exposure: Option<RawToolExposure>,
    /// Pi exposure mode; only `hidden` has an effect (the server's tools are proxy-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposure: Option<String>,
    /// Extra search keywords: `{ "<tool name or glob>": ["keyword", …] }`. Boosts search only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_keywords: Option<BTreeMap<String, Vec<String>>>,
    /// Calls needing approval: `true` (all), globs, or `false`. Overrides `settings.approveTools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_tools: Option<RawApproveTools>,
    /// Show the server's stderr live (default: kept, last 8 KiB appended to connect errors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<bool>,
    /// Metadata-only JSONL protocol trace for this server (overrides `settings.trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<bool>,
}

/// Transport type of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RawType {
    #[serde(rename = "stdio")]
    Stdio,
    #[serde(rename = "http")]
    Http,
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    /// HTTP, with the legacy HTTP+SSE transport allowed as a fallback.
    #[serde(rename = "sse")]
    Sse,
}

/// `auth`: `"oauth"`, `"bearer"` or `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawAuth {
    Kind(RawAuthKind),
    /// `false`: never authenticate. (`true` means auto-detect, like leaving it unset.)
    Flag(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RawAuthKind {
    Oauth,
    Bearer,
}

/// `oauth`: client settings, or `false` to disable OAuth.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawOAuthField {
    Flag(bool),
    Settings(Box<RawOAuth>),
}

/// OAuth 2.1 client settings (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawOAuth {
    /// `authorization_code` (default) or `client_credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_type: Option<OAuthGrant>,
    /// Pre-registered client id (else a client metadata document or dynamic registration is used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Client secret of a confidential client. `!command` allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// URL of a client ID metadata document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// Space-separated scopes to request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Exact loopback redirect URI for pre-registered clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// Loopback callback port (default 19847, or `MCP_OAUTH_CALLBACK_PORT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_port: Option<u16>,
    /// Extra authorization-URL parameters (flow-owned ones cannot be overridden).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_params: Option<BTreeMap<String, String>>,
    /// `client_name` for dynamic registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// `client_uri` for dynamic registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_uri: Option<String>,
    /// `logo_uri` for dynamic registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_uri: Option<String>,
    /// Authorization-server metadata URL, when discovery cannot find it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_server_metadata_url: Option<String>,
    /// Skip the RFC 8414 issuer check (weakens mix-up protection; only for a known-misconfigured server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_issuer_metadata_validation: Option<bool>,
    /// Use DPoP-bound tokens (RFC 9449); log in again after enabling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop: Option<bool>,
    /// PEM (PKCS#8, P-256) private key for `private_key_jwt` client authentication. `!command` and `${VAR}` allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_private_key: Option<String>,
    /// Enterprise IdP for `grantType: "identity_assertion"` (SEP-990).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_assertion: Option<RawIdentityAssertion>,
}

/// `oauth.identityAssertion`: the enterprise IdP that exchanges an ID token for an ID-JAG (RFC 8693).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawIdentityAssertion {
    /// The IdP's issuer URL (its OpenID metadata names the token endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp_issuer: Option<String>,
    /// The IdP's token endpoint (instead of discovering it from `idpIssuer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp_token_endpoint: Option<String>,
    /// pimcp's client ID at the IdP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp_client_id: Option<String>,
    /// pimcp's client secret at the IdP, when it is a confidential client there. `!command` allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idp_client_secret: Option<String>,
    /// The user's ID token from the IdP; usually `!command` printing a fresh one. `${VAR}` allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_token: Option<String>,
}

/// `lifecycle`: a mode, or the legacy `{ "mode": … }` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawLifecycle {
    Mode(Lifecycle),
    Legacy { mode: Lifecycle },
}

impl RawLifecycle {
    pub(crate) fn mode(self) -> Lifecycle {
        match self {
            RawLifecycle::Mode(mode) | RawLifecycle::Legacy { mode } => mode,
        }
    }
}

/// `directTools`: `true`, `false`, or a list of tool names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawDirectTools {
    Flag(bool),
    Tools(Vec<String>),
    /// pi-mcp-adapter's `"search"` mode: accepted and treated as `false`, with a warning.
    Mode(RawDirectToolsMode),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RawDirectToolsMode {
    Search,
}

/// `approveTools`: `true`, `false`, or globs over tool names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawApproveTools {
    Flag(bool),
    Globs(Vec<String>),
}

/// `toolExposure`: an exposure mode, or a map from tool name/pattern to mode, in file order (among patterns the
/// first match wins).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawToolExposure {
    Mode(String),
    PerTool(serde_json::Map<String, serde_json::Value>),
}

/// Global settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawSettings {
    /// How proxy tool names are formed: `server` (default, `<server>_<tool>`), `short` (strips a `-mcp` suffix),
    /// `none`, `mcp` (`mcp__<server>_<tool>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_prefix: Option<ToolPrefix>,
    /// Minutes before an idle `lazy` server disconnects (default 10; `0` = never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<f64>,
    /// Default per-request timeout in milliseconds (default 60000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_timeout_ms: Option<f64>,
    /// Default for servers' `directTools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_tools: Option<RawDirectTools>,
    /// Keep the direct-tool surface fixed after startup (prompt-cache stability).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_direct_tools: Option<bool>,
    /// Expose only direct tools, no `mcp` tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_proxy_tool: Option<bool>,
    /// Calls needing approval: `true`, `false`, or globs over (prefixed) tool names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approve_tools: Option<RawApproveTools>,
    /// Output guard limits, or `false` to disable (also `MCP_OUTPUT_GUARD=0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_guard: Option<RawOutputGuard>,
    /// Metadata-only JSONL protocol trace: `true`/`false` or `{ enabled, file, maxBytes }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<RawTrace>,
    /// Host configs: `off` (default), `prompt` (detect only), `on` (import every detected host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_config_discovery: Option<HostConfigDiscovery>,
    /// Agent Plugins 1.0 package directories (`~` expanded; relative paths resolve against the project directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_plugin_paths: Option<Vec<String>>,
    /// Where OAuth tokens live: `keyring` (default, OS credential store) or `file` (0600 files under the data dir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_store: Option<TokenStoreKind>,
    /// Legacy plaintext token files (`<dir>/sha256-<server-hash>/tokens.json`) imported into the token store the
    /// first time a server has no record (`MCP_OAUTH_DIR` wins; `~` expanded, relative to the project directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_dir: Option<String>,
    /// On `needs-auth`, start OAuth and retry once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_auth: Option<bool>,
    /// Allow servers to request sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<bool>,
    /// Approve sampling requests without asking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_auto_approve: Option<bool>,
    /// Allow servers to elicit input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<bool>,
    /// Connect every enabled server once at startup to fill the metadata cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_cache: Option<bool>,
    /// Seconds between health checks of `keep-alive` servers (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_interval: Option<f64>,
    /// Seconds a model's search waits for servers nothing is known of to connect (default 10; `0` = search only
    /// what is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery_timeout: Option<f64>,
    /// The largest JSON-RPC message read from a stdio or socket server, or from the host on stdio, in bytes
    /// (default 16777216, 16 MiB; at least 65536). A larger answer fails its request at once, naming its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<f64>,
    /// The `mcpScript` tool: `true` (default), `false`, or limits `{ timeoutMs, memoryMb, maxCalls }`.
    /// `MCP_SCRIPT_MODE=0` turns it off for one host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script_mode: Option<RawScriptMode>,
}

/// `scriptMode`: `true`/`false`, or limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawScriptMode {
    Flag(bool),
    Limits(RawScriptLimits),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawScriptLimits {
    /// Wall time of one script in milliseconds (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<f64>,
    /// Memory of one script's JavaScript heap in MiB (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<f64>,
    /// Tool calls one script may make (default 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<f64>,
}

/// `outputGuard`: `true`/`false`, or limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawOutputGuard {
    Flag(bool),
    Limits(RawOutputLimits),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawOutputLimits {
    /// Inline text limit in bytes (default 51200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// Inline text limit in lines (default 2000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lines: Option<usize>,
}

/// `trace`: `true`/`false`, or settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawTrace {
    Flag(bool),
    Settings(RawTraceSettings),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawTraceSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Trace file (`~` expanded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Rotate after this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}
