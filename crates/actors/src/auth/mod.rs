//! OAuth in the runtime: the AuthActor and the per-server auth state it hands out, the bearer-token
//! hook HTTP connections use (refresh before expiry, one refresh + one retry on 401, step-up on 403
//! `insufficient_scope`, logins with `settings.autoAuth`), the library API on `RuntimeHandle`
//! (`auth_start` / `auth_complete` / `auth_logout` / `auth_status`) and its options and status types.
//!
//! Knows `pimcp-auth` (flows, stores, refresh) and the runtime's actors; the transport only sees [`TokenSource`].

mod actor;
mod api;
mod options;
mod server_auth;
mod source;
mod status;

#[cfg(test)]
pub(crate) use actor::AuthMsg;
pub(crate) use actor::{AuthActor, AuthHandle};
pub use options::{AUTO_AUTH_WAIT, AuthOptions};
pub use source::TokenSource;
pub(crate) use source::send_with_bearer;
pub use status::{AuthMode, AuthStatus, PendingLogin, ServerAuthStatus};
