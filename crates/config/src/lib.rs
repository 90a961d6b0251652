//! pimcp configuration: the typed model, JSONC parsing, and (in sibling modules) discovery, merge, interpolation,
//! `!command` secrets, host imports, project trust, Agent Plugins and the JSON Schema.

pub mod imports;
mod jsonc;
mod model;

pub use jsonc::{JsoncError, parse as parse_jsonc, strip as strip_jsonc};
pub use model::{
    ApproveTools, AuthConfig, Availability, Config, ConfigProblem, DirectTools, HostConfigDiscovery, HttpTransport,
    Lifecycle, OAuthConfig, OAuthGrant, Origin, OutputGuard, ProtocolMode, Secret, SecretValue, ServerConfig, Settings,
    Severity, SocketTransport, SourceFile, SourceKind, StdioTransport, Timeouts, TokenStoreKind, ToolPrefix,
    TraceSettings, Transport,
};
