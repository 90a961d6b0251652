//! pimcp-auth: OAuth 2.1 for MCP servers (discovery, registration, PKCE, refresh, client credentials), token stores
//! (OS credential store, opt-in 0600 files, memory) with cross-process single-flight refresh, the loopback callback
//! listener and browser opener of the interactive flow, and static header / bearer credentials.
//!
//! Knows HTTP and OAuth; knows nothing of actors or of the proxy tool. Prints nothing to stdout.

mod browser;
mod callback;
mod client;
mod discovery;
mod error;
mod http;
mod jwt;
mod login;
mod pending;
mod record;
mod refresh;
mod static_auth;
mod store;

pub use browser::{BrowserOpener, SystemBrowser, open_browser};
pub use callback::{CALLBACK_PATH, CALLBACK_PORT_ENV, CallbackListener, CallbackPort, DEFAULT_CALLBACK_PORT};
pub use client::{
    AuthorizationRequest, AuthorizationStart, DEFAULT_CLIENT_NAME, JWT_BEARER_GRANT, MAX_AUTHORIZATION_ATTEMPTS,
    OAuthClient, OAuthClientOptions, PENDING_FLOW_TTL, TOKEN_EXCHANGE_GRANT, TOKEN_TYPE_ID_JAG,
};
pub use discovery::{
    AuthServerMetadata, Challenge, Discovered, DiscoveryOptions, MetadataSource, ProtectedResourceMetadata, discover,
};
pub use error::{Error, Result};
pub use http::{MAX_OAUTH_BODY_BYTES, OAUTH_HTTP_TIMEOUT, OAuthHttp};
pub use jwt::{CLIENT_ASSERTION_TYPE, client_assertion};
pub use login::{LOGIN_TIMEOUT, LoginNotice, LoginOptions, login};
pub use pending::{PendingLogin, PendingLogins};
pub use record::{ClientRegistration, StoreKey, TokenEndpointAuthMethod, TokenRecord};
pub use refresh::{HostTokens, REFRESH_LOCK_WAIT, REFRESH_SKEW, TokenManager};
pub use static_auth::{StaticCredentials, same_origin_redirects};
pub use store::{FileStore, KEYRING_SERVICE, KeyringStore, MemoryStore, TokenStore, import_legacy, open_store};
