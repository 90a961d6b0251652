//! The typed, merged configuration that the runtime consumes: servers, transports, auth, settings, provenance.
//!
//! Values here are already interpolated (`${VAR}` expanded, `~` expanded) but `!command` secrets are kept
//! unexecuted as [`SecretValue::Command`]: they run only when a server connects ([`SecretValue::resolve`]).
//! Every type that can hold a secret redacts it in `Debug`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::problems::ConfigProblem;
use crate::secret::SecretValue;

/// Where a server's transport lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process over stdin/stdout (`command`).
    Stdio(StdioTransport),
    /// A Streamable HTTP endpoint, or legacy HTTP+SSE (`url`).
    Http(HttpTransport),
    /// A Unix socket speaking line-delimited JSON-RPC (`socket`).
    Socket(SocketTransport),
}

/// `command`, `args`, `env`, `cwd`, `inheritEnv`: a server pimcp starts as a child process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdioTransport {
    /// The program to run (`npx`-style commands resolve to the installed package's binary when they can).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Overlay on the child's environment; values may be `!command` secrets.
    pub env: BTreeMap<String, SecretValue>,
    /// Working directory; `None` means the project directory.
    pub cwd: Option<PathBuf>,
    /// Default true: the child inherits our environment. False: only HOME, LOGNAME, PATH, SHELL, TERM, USER plus `env`.
    pub inherit_env: bool,
}

impl StdioTransport {
    /// `command` with `args`, inheriting pimcp's environment, in the project directory.
    pub fn new(command: impl Into<String>, args: Vec<String>) -> StdioTransport {
        StdioTransport {
            command: command.into(),
            args,
            env: BTreeMap::new(),
            cwd: None,
            inherit_env: true,
        }
    }
}

/// `url`, `headers`, `type`: a server pimcp reaches over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpTransport {
    /// The endpoint (`https://`, or `http://` on loopback).
    pub url: String,
    /// Values may be `!command` secrets. Sent only to the server's origin.
    pub headers: BTreeMap<String, SecretValue>,
    /// `type: "sse"`: the legacy HTTP+SSE transport is allowed as a fallback (on 404/405/406/415 only).
    pub allow_legacy_sse: bool,
}

impl HttpTransport {
    /// `url` with no headers and no legacy SSE fallback.
    pub fn new(url: impl Into<String>) -> HttpTransport {
        HttpTransport {
            url: url.into(),
            headers: BTreeMap::new(),
            allow_legacy_sse: false,
        }
    }
}

/// `socket`: a server already listening on a Unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketTransport {
    /// rmcp-mux Unix socket path (`~` expanded).
    pub path: PathBuf,
}

impl SocketTransport {
    /// The socket at `path`.
    pub fn new(path: impl Into<PathBuf>) -> SocketTransport {
        SocketTransport { path: path.into() }
    }
}

/// How an HTTP server authenticates.
// One value per configured server, built once at load: the size of the `OAuth` variant costs nothing that matters,
// and boxing it would change every `AuthConfig::OAuth(oauth)` match across the workspace.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AuthConfig {
    /// Not configured: OAuth is auto-detected from a 401 with `WWW-Authenticate`, unless explicit headers are set.
    #[default]
    Auto,
    /// `auth: false` or `oauth: false`: never authenticate.
    Disabled,
    /// `auth: "bearer"` with `bearerToken` (may be a `!command`) or `bearerTokenEnv` (a variable name read at connect).
    Bearer {
        /// The token itself (`bearerToken`; may be a `!command`).
        token: Option<SecretValue>,
        /// The name of an environment variable holding the token (`bearerTokenEnv`), read at connect.
        token_env: Option<String>,
    },
    /// `auth: "oauth"` (or an `oauth` object).
    OAuth(OAuthConfig),
}

/// The `oauth` object of a server (docs/configuration.md lists each key).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct OAuthConfig {
    /// `authorization_code` (default) or `client_credentials`.
    pub grant_type: OAuthGrant,
    /// `clientId`: a pre-registered client ID (no dynamic registration then).
    pub client_id: Option<String>,
    /// `clientSecret`: the client's secret, for confidential clients (may be a `!command`).
    pub client_secret: Option<SecretValue>,
    /// `clientMetadataUrl`: a URL-based client ID (Client ID Metadata Document).
    pub client_metadata_url: Option<String>,
    /// `scope`: the scopes to ask for (default: what the server's metadata names).
    pub scope: Option<String>,
    /// `redirectUri`: a fixed redirect URI for the loopback callback.
    pub redirect_uri: Option<String>,
    /// `callbackPort`: a fixed port for the loopback callback listener.
    pub callback_port: Option<u16>,
    /// `authorizationParams`: extra query parameters of the authorization request.
    pub authorization_params: BTreeMap<String, String>,
    /// `clientName`: the name dynamic registration gives the client.
    pub client_name: Option<String>,
    /// `clientUri`: the client's home page, for dynamic registration.
    pub client_uri: Option<String>,
    /// `logoUri`: the client's logo, for dynamic registration.
    pub logo_uri: Option<String>,
    /// `authServerMetadataUrl`: where the authorization server's metadata is, when discovery cannot find it.
    pub auth_server_metadata_url: Option<String>,
    /// `skipIssuerMetadataValidation`: accept metadata whose `issuer` differs from the URL it came from.
    pub skip_issuer_metadata_validation: bool,
    /// `dpop`: DPoP-bound tokens (not implemented: a server that sets it is refused).
    pub dpop: bool,
    /// `oauth.clientPrivateKey`: PEM (PKCS#8, P-256) key for `private_key_jwt` client authentication.
    pub client_private_key: Option<SecretValue>,
    /// `oauth.identityAssertion`: the enterprise IdP of the `identity_assertion` grant (SEP-990).
    pub identity_assertion: Option<IdentityAssertionConfig>,
}

/// SEP-990 enterprise-managed authorization: where and how an ID token is exchanged for an ID-JAG (RFC 8693).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IdentityAssertionConfig {
    /// The IdP's issuer; its OpenID metadata gives the token endpoint when `idp_token_endpoint` is not set.
    pub idp_issuer: Option<String>,
    /// The IdP's token endpoint, when its metadata should not be looked up.
    pub idp_token_endpoint: Option<String>,
    /// The client ID pimcp has at the IdP.
    pub idp_client_id: Option<String>,
    /// The client secret pimcp has at the IdP (may be a `!command`).
    pub idp_client_secret: Option<SecretValue>,
    /// The user's OpenID Connect ID token (usually a `!command` that prints a fresh one).
    pub id_token: Option<SecretValue>,
}

/// `oauth.grantType`: how pimcp gets a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    /// `authorization_code` with PKCE: the user logs in in a browser.
    #[default]
    AuthorizationCode,
    /// `client_credentials`: the client authenticates itself (secret or `private_key_jwt`), no user.
    ClientCredentials,
    /// SEP-990: an ID-JAG from the enterprise IdP, exchanged with the `jwt-bearer` grant (`oauth.identityAssertion`).
    IdentityAssertion,
}

/// `lifecycle`: when a server connects and whether it is kept alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Lifecycle {
    /// Connect on the first call that needs the server; close when idle.
    #[default]
    Lazy,
    /// Connect at start; close when idle only if `idleTimeout` is set.
    Eager,
    /// Connect at start, never close when idle, reconnect after death or backoff; health-checked.
    KeepAlive,
    /// Connect on first need; from then on as `keep-alive` (never closed when idle, reconnected in the background).
    LazyKeepAlive,
}

/// `protocolVersion`: which protocol era to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ProtocolMode {
    /// `initialize` only (≤ 2025-11-25).
    #[serde(rename = "legacy")]
    Legacy,
    /// Try `server/discover`, fall back to `initialize`; remembered in the metadata cache.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Pin the stateless 2026-07-28 revision.
    #[serde(rename = "2026-07-28")]
    Stateless20260728,
}

/// `toolPrefix`: how upstream tool names become proxy names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ToolPrefix {
    /// `<server>_<tool>`.
    #[default]
    Server,
    /// Like `server` with a trailing `-mcp` stripped from the server name.
    Short,
    /// The tool's own name (collisions are reported).
    None,
    /// `mcp__<server>_<tool>`.
    Mcp,
}

/// `directTools`: which upstream tools are exposed beside `mcp`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DirectTools {
    /// No direct tools (`false`).
    #[default]
    Off,
    /// Every tool of the server (`true`).
    All,
    /// Original tool names (or `read_<resource>` names).
    Listed(Vec<String>),
}

/// `approveTools`: which calls need approval.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ApproveTools {
    /// No call needs approval.
    #[default]
    Off,
    /// Every call of the server needs approval.
    All,
    /// Glob patterns (`*`, `?`) over original or prefixed tool names.
    Globs(Vec<String>),
}

/// Resolved timeouts; the more specific key wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// Connect + initialize (default 30 s).
    pub startup: Duration,
    /// Any request except tools/call (default 60 s).
    pub request: Duration,
    /// tools/call (default: `request`).
    pub tool: Duration,
    /// Idle disconnect; `None` = never.
    pub idle: Option<Duration>,
}

impl Timeouts {
    /// `timeouts.startup` when not set.
    pub const DEFAULT_STARTUP: Duration = Duration::from_secs(30);
    /// `timeouts.request` when not set.
    pub const DEFAULT_REQUEST: Duration = Duration::from_secs(60);
    /// `idleTimeout` when not set (10 minutes).
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(10 * 60);
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            startup: Timeouts::DEFAULT_STARTUP,
            request: Timeouts::DEFAULT_REQUEST,
            tool: Timeouts::DEFAULT_REQUEST,
            idle: Some(Timeouts::DEFAULT_IDLE),
        }
    }
}

/// Why a configured server cannot start (it is still listed in status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// The server can start.
    Available,
    /// `enabled: false` / `disabled: true`.
    Disabled,
    /// Defined (in whole or part) by a project file that is not trusted.
    Untrusted {
        /// The project directory whose trust is missing.
        project_dir: PathBuf,
        /// The command that trusts it.
        trust_command: String,
    },
    /// A configuration error that only bites at connect (e.g. a missing variable): names field and variable, never a value.
    ConfigError {
        /// What is wrong and where (field and variable names, never a value).
        message: String,
    },
}

/// Where a server or field came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    /// One of the six config files or `--config PATH`.
    File {
        /// Which of the six sources.
        source: SourceKind,
        /// The file.
        path: PathBuf,
    },
    /// A host config listed in `imports`.
    Import {
        /// The host whose config it is (`claude-code`, `cursor`, …).
        host: String,
        /// The file.
        path: PathBuf,
    },
    /// An Agent Plugin's `mcp.json`.
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// The plugin's `mcp.json`.
        path: PathBuf,
    },
    /// A config passed in memory by a library host.
    InMemory,
}

impl Origin {
    /// The file this origin refers to (none for in-memory config).
    pub fn path(&self) -> Option<&Path> {
        match self {
            Origin::File { path, .. } | Origin::Import { path, .. } | Origin::Plugin { path, .. } => Some(path),
            Origin::InMemory => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, .. } => write!(f, "{}", path.display()),
            Origin::Import { host, path } => write!(f, "{} (import {host})", path.display()),
            Origin::Plugin { plugin, path } => write!(f, "{} (plugin {plugin})", path.display()),
            Origin::InMemory => f.write_str("in-memory config"),
        }
    }
}

/// The six config sources (docs/configuration.md, section 1), lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// `~/.config/mcp/mcp.json`.
    SharedGlobal,
    /// `~/.agents/mcp.json`.
    AgentsGlobal,
    /// `~/.agents/mcp/mcp.json`.
    AgentsNestedGlobal,
    /// Pi's global `mcp.json` (or `--config PATH`).
    PiGlobal,
    /// `<project>/.mcp.json` (needs trust).
    SharedProject,
    /// `<project>/.pi/mcp.json` (needs trust).
    PiProject,
}

impl SourceKind {
    /// Project files need project trust.
    pub fn is_project(self) -> bool {
        matches!(self, SourceKind::SharedProject | SourceKind::PiProject)
    }
}

/// One server, merged across all sources, typed and interpolated.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The key in `mcpServers` (for plugins: `<plugin>__<server>`).
    pub name: String,
    /// How to reach it: a command (stdio), a URL (HTTP) or a Unix socket.
    pub transport: Transport,
    /// Headers, bearer token or OAuth for HTTP servers.
    pub auth: AuthConfig,
    /// `lifecycle`: when it starts and whether it idles out.
    pub lifecycle: Lifecycle,
    /// Startup, request, tool and idle timeouts.
    pub timeouts: Timeouts,
    /// `protocolVersion`: which protocol era to speak.
    pub protocol: ProtocolMode,
    /// Whether it may run: available, disabled, untrusted or misconfigured.
    pub availability: Availability,
    /// `description`: what the server offers, for the model's server directory.
    pub description: Option<String>,
    /// `exposeResources` (default `true`): resources become `read_<name>` tools.
    pub expose_resources: bool,
    /// `directTools`: tools exposed beside `mcp` (overrides the setting).
    pub direct_tools: Option<DirectTools>,
    /// `toolPrefix` (overrides the setting).
    pub tool_prefix: Option<ToolPrefix>,
    /// Globs; exclude applies after include. `allowedTools` is an alias of include.
    pub include_tools: Vec<String>,
    /// `excludeTools`: globs, applied after `includeTools`.
    pub exclude_tools: Vec<String>,
    /// `hidden` exposure: proxy-only even if directTools says otherwise.
    pub hidden: bool,
    /// `toolExposure` as a map, in file order: (original tool name or pattern with `*`, lower-cased mode). A tool's
    /// entry (its exact name, else the first matching pattern) decides whether it is `hidden`; tools without one
    /// follow `hidden`.
    pub tool_exposure: Vec<(String, String)>,
    /// `{ "<tool|prefixed|glob>": ["keyword", …] }`: boosts search only.
    pub search_keywords: BTreeMap<String, Vec<String>>,
    /// `approveTools`: calls needing the host's approval (overrides the setting).
    pub approve_tools: Option<ApproveTools>,
    /// Show server stderr live.
    pub debug: bool,
    /// `trace`: this server's protocol trace on or off (`None`: as `settings.trace` says).
    pub trace: Option<bool>,
    /// Which source defined the server last.
    pub origin: Origin,
    /// JSON field name (as written, e.g. `command`, `headers.Authorization`) → the source that set it.
    pub provenance: BTreeMap<String, Origin>,
}

impl ServerConfig {
    /// A server as loading gives one with nothing but its name and transport set: automatic auth, `lazy`, the default
    /// timeouts and protocol, available, resources exposed, no filters, defined in memory. Set other fields after.
    pub fn new(name: impl Into<String>, transport: Transport) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            transport,
            auth: AuthConfig::Auto,
            lifecycle: Lifecycle::default(),
            timeouts: Timeouts::default(),
            protocol: ProtocolMode::default(),
            availability: Availability::Available,
            description: None,
            expose_resources: true,
            direct_tools: None,
            tool_prefix: None,
            include_tools: Vec::new(),
            exclude_tools: Vec::new(),
            hidden: false,
            tool_exposure: Vec::new(),
            search_keywords: BTreeMap::new(),
            approve_tools: None,
            debug: false,
            trace: None,
            origin: Origin::InMemory,
            provenance: BTreeMap::new(),
        }
    }
}

/// `outputGuard`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutputGuard {
    /// `maxBytes`: the most bytes of text a result keeps inline.
    pub max_bytes: usize,
    /// `maxLines`: the most lines of text a result keeps inline.
    pub max_lines: usize,
}

impl OutputGuard {
    /// At most `max_bytes` and `max_lines` of text inline.
    pub const fn new(max_bytes: usize, max_lines: usize) -> OutputGuard {
        OutputGuard { max_bytes, max_lines }
    }

    /// 50 KiB and 2,000 lines.
    pub const DEFAULT: OutputGuard = OutputGuard {
        max_bytes: 50 * 1024,
        max_lines: 2000,
    };
}

/// `scriptMode`: the limits of one `mcpScript` run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptLimits {
    /// Wall time, from start to result, tool calls included.
    pub timeout: Duration,
    /// The JavaScript heap.
    pub memory_bytes: usize,
    /// Tool calls (`tools.call`) per script.
    pub max_calls: u32,
    /// Tool calls in flight at once (`Promise.all`).
    pub max_in_flight: usize,
}

impl ScriptLimits {
    /// 30 s, 64 MiB of heap, 50 calls, 8 in flight.
    pub const DEFAULT: ScriptLimits = ScriptLimits {
        timeout: Duration::from_secs(30),
        memory_bytes: 64 * 1024 * 1024,
        max_calls: 50,
        max_in_flight: 8,
    };

    /// These limits with another wall time.
    pub const fn with_timeout(self, timeout: Duration) -> ScriptLimits {
        ScriptLimits { timeout, ..self }
    }

    /// These limits with another heap size.
    pub const fn with_memory_bytes(self, memory_bytes: usize) -> ScriptLimits {
        ScriptLimits { memory_bytes, ..self }
    }

    /// These limits with another number of tool calls per script.
    pub const fn with_max_calls(self, max_calls: u32) -> ScriptLimits {
        ScriptLimits { max_calls, ..self }
    }

    /// These limits with another number of tool calls in flight at once.
    pub const fn with_max_in_flight(self, max_in_flight: usize) -> ScriptLimits {
        ScriptLimits { max_in_flight, ..self }
    }
}

/// `settings.trace`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TraceSettings {
    /// Whether tracing is on for every server (a server's own `trace` overrides it).
    pub enabled: bool,
    /// The JSONL file (default: `trace.jsonl` in the data directory).
    pub file: Option<PathBuf>,
    /// The size at which the file is rotated.
    pub max_bytes: Option<u64>,
}

/// `settings.hostConfigDiscovery`: whether host configs not listed in `imports` are looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HostConfigDiscovery {
    /// Not looked for.
    #[default]
    Off,
    /// Looked for and reported as warnings, not imported.
    Prompt,
    /// Looked for and imported.
    On,
}

/// `settings.tokenStore`: where OAuth tokens are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TokenStoreKind {
    /// The OS credential store.
    #[default]
    Keyring,
    /// 0600 files in the data directory (opt-in).
    File,
}

/// Global `settings`, merged shallowly per key (later file wins per key).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Settings {
    /// `toolPrefix`: how exposed tool names are prefixed (default `server`).
    pub tool_prefix: ToolPrefix,
    /// `idleTimeout`: when lazy servers close after their last use (default 10 min).
    pub idle_timeout: Option<Duration>,
    /// `requestTimeoutMs` for every server that does not set its own.
    pub request_timeout: Option<Duration>,
    /// `directTools`: tools exposed beside `mcp`.
    pub direct_tools: DirectTools,
    /// `freezeDirectTools`: keep the direct-tool surface fixed across reconnects and `list_changed`.
    pub freeze_direct_tools: bool,
    /// `disableProxyTool`: only direct tools, no `mcp` tool.
    pub disable_proxy_tool: bool,
    /// `approveTools`: `true` or globs over prefixed tool names whose calls need approval.
    pub approve_tools: ApproveTools,
    /// `None` = disabled (`outputGuard: false` or `MCP_OUTPUT_GUARD=0`).
    pub output_guard: Option<OutputGuard>,
    /// `trace`: the JSONL protocol trace.
    pub trace: TraceSettings,
    /// `hostConfigDiscovery`: whether other hosts' MCP configs are detected or imported.
    pub host_config_discovery: HostConfigDiscovery,
    /// `agentPluginPaths`: Agent Plugin directories to load servers from.
    pub agent_plugin_paths: Vec<PathBuf>,
    /// `tokenStore`: where OAuth tokens live (`keyring` or `file`).
    pub token_store: TokenStoreKind,
    /// `oauthDir`: where legacy plaintext token files are imported from (`MCP_OAUTH_DIR` wins).
    pub oauth_dir: Option<PathBuf>,
    /// `autoAuth`: start OAuth on `needs-auth` and retry once.
    pub auto_auth: bool,
    /// `sampling`: `Some(false)` refuses servers' sampling requests; `None`: on when the host handles them.
    pub sampling: Option<bool>,
    /// `samplingAutoApprove`: sampling requests reach the host's model without asking for approval.
    pub sampling_auto_approve: bool,
    /// `elicitation`: `Some(false)` refuses servers' elicitation requests; `None`: on when the host handles them.
    pub elicitation: Option<bool>,
    /// `warmCache`: connect every enabled server once at startup.
    pub warm_cache: bool,
    /// Health-check interval for keep-alive modes (default 30 s).
    pub health_interval: Duration,
    /// How long a model's search waits for servers nothing is known of to connect (default 10 s; zero: no cold
    /// discovery).
    pub discovery_timeout: Duration,
    /// `maxMessageBytes`: the largest JSON-RPC message pimcp reads from a line-framed connection (a stdio or
    /// Unix-socket server's answers, a host's requests on stdio); default [`Settings::DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
    /// `scriptMode`: the `mcpScript` tool and its limits; `None` = off (`scriptMode: false` or `MCP_SCRIPT_MODE=0`).
    pub script: Option<ScriptLimits>,
}

impl Settings {
    /// 16 MiB: the size rmcp's Streamable HTTP client also accepts for one event.
    pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
    /// The smallest `maxMessageBytes` taken (smaller values are raised to it): 64 KiB.
    pub const MIN_MAX_MESSAGE_BYTES: usize = 64 * 1024;
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tool_prefix: ToolPrefix::Server,
            idle_timeout: Some(Timeouts::DEFAULT_IDLE),
            request_timeout: None,
            direct_tools: DirectTools::Off,
            freeze_direct_tools: false,
            disable_proxy_tool: false,
            approve_tools: ApproveTools::Off,
            output_guard: Some(OutputGuard::DEFAULT),
            trace: TraceSettings::default(),
            host_config_discovery: HostConfigDiscovery::Off,
            agent_plugin_paths: Vec::new(),
            token_store: TokenStoreKind::Keyring,
            oauth_dir: None,
            auto_auth: false,
            sampling: None,
            sampling_auto_approve: false,
            elicitation: None,
            warm_cache: false,
            health_interval: Duration::from_secs(30),
            discovery_timeout: Duration::from_secs(10),
            max_message_bytes: Settings::DEFAULT_MAX_MESSAGE_BYTES,
            script: Some(ScriptLimits::DEFAULT),
        }
    }
}

/// A config file that was considered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SourceFile {
    /// Which source it is.
    pub origin: Origin,
    /// Whether the file exists.
    pub exists: bool,
    /// Whether it was read and merged (an untrusted project file exists but is not loaded).
    pub loaded: bool,
}

/// The result of loading: every usable server, the settings, and every problem met on the way.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Config {
    /// Sorted by name.
    pub servers: Vec<ServerConfig>,
    /// The merged `settings`.
    pub settings: Settings,
    /// Every problem met while loading.
    pub problems: Vec<ConfigProblem>,
    /// Every config file that was considered, in precedence order.
    pub sources: Vec<SourceFile>,
    /// The project directory the config was loaded for.
    pub project_dir: PathBuf,
}

impl Config {
    /// The server named `name`: a binary search over the name-sorted `servers` (the loader sorts them), with a
    /// linear scan after a miss for a configuration built out of order.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        match self.servers.binary_search_by(|s| s.name.as_str().cmp(name)) {
            Ok(i) => Some(&self.servers[i]),
            Err(_) => self.servers.iter().find(|s| s.name == name),
        }
    }
}
