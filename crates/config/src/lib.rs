//! pimcp configuration: discovery of the config sources, JSONC parsing, the typed model, per-field merge with
//! provenance, interpolation, `!command` secrets (resolved only on demand), host imports, project trust, Agent
//! Plugins, the JSON Schema, and minimal atomic edits for the CLI.
//!
//! ```no_run
//! use pimcp_config::{LoadOptions, load};
//!
//! let config = load(&LoadOptions::from_process(".", None));
//! for problem in &config.problems {
//!     eprintln!("{problem}");
//! }
//! for server in &config.servers {
//!     println!("{} ({:?})", server.name, server.availability);
//! }
//! ```

mod atomic;
mod build;
mod edit;
mod entries;
mod error;
mod explain;
mod identity;
pub mod imports;
mod interpolate;
mod jsonc;
mod load;
mod merge;
mod model;
mod options;
mod paths;
mod plugins;
mod preview;
pub mod private_fs;
mod problems;
mod raw;
mod read;
mod redact;
mod schema;
mod secret;
mod spans;
mod sys;
mod trust;

pub use edit::{
    AddServer, EditOutcome, EditScope, ServerSpec, add_imports, add_server, remove_server, scope_file, set_disabled,
};
pub use error::{Error, Result, SecretError};
pub use explain::{ConfigView, FieldView, REDACTED, ServerView, SourceView, explain, redact_field, redact_url};
pub use identity::identity_hash;
pub use jsonc::{JsoncError, parse as parse_jsonc, strip as strip_jsonc};
pub use load::{is_pimcp_command, load, load_in_memory};
pub use model::{
    ApproveTools, AuthConfig, Availability, Config, DirectTools, HostConfigDiscovery, HttpTransport,
    IdentityAssertionConfig, Lifecycle, OAuthConfig, OAuthGrant, Origin, OutputGuard, ProtocolMode, ScriptLimits,
    ServerConfig, Settings, SocketTransport, SourceFile, SourceKind, StdioTransport, Timeouts, TokenStoreKind,
    ToolPrefix, TraceSettings, Transport,
};
pub use options::LoadOptions;
pub use paths::{EnvMap, agent_dir, data_dir, expand_tilde, source_path};
pub use preview::{HostPreview, ImportFilePreview, ImportServerPreview, preview_imports};
pub use problems::{ConfigProblem, Severity};
pub use raw::{RawFile, RawServer, RawSettings};
pub use read::{CONFIG_FILE_LIMIT, open_regular, read_bounded, read_capped, read_text_bounded};
pub use redact::{redact_known_secrets, redact_text, remember_secret, remember_url_secrets};
pub use schema::json_schema;
pub use secret::{
    CONTROL_ENV_PREFIX, GroupWatch, ResolveOptions, SECRET_COMMAND_MAX_OUTPUT, SECRET_COMMAND_TIMEOUT, Secret,
    SecretValue, is_control_env,
};
pub use trust::{
    PROJECT_CONFIG_FILES, TRUST_FILE, TrustedProject, is_trusted, trust_command, trust_project, untrust_project,
};
