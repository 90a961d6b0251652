//! The crate's one error type: every failure of discovery, flows, stores and locks, with messages that name the
//! server, endpoint or store involved and never a secret (no token, code, verifier, client secret or header value).

use std::fmt;

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of `pimcp-auth`. Messages are lowercase, name the thing involved, and never contain a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server needs a (new) interactive login: no usable token, a rejected refresh token, or a revoked grant.
    /// The previous token record, if any, is kept in the store.
    #[error("server `{server}` needs authorization: {reason}")]
    NeedsAuth {
        /// The server's name.
        server: String,
        /// Why a login is needed.
        reason: String,
    },

    /// Metadata discovery could not find or read what the MCP authorization spec requires.
    #[error("oauth discovery for `{url}` failed: {reason}")]
    Discovery {
        /// The URL discovery started from.
        url: String,
        /// What was missing or unreadable.
        reason: String,
    },

    /// RFC 8414 / RFC 9207: an issuer did not match the one expected.
    #[error("authorization server issuer mismatch: expected `{expected}`, got `{received}`")]
    IssuerMismatch {
        /// The issuer that was expected.
        expected: String,
        /// The issuer that came.
        received: String,
    },

    /// RFC 8414 metadata or an RFC 9207 callback lacks the required `issuer` / `iss`.
    #[error("authorization server response lacks the required issuer (expected `{expected}`)")]
    IssuerMissing {
        /// The issuer that was expected.
        expected: String,
    },

    /// RFC 9728: protected-resource metadata names another resource than the configured server URL.
    #[error("protected resource metadata at `{metadata_url}` is for `{resource}`, not for server URL `{server_url}`")]
    ResourceMismatch {
        /// Where the protected-resource metadata came from.
        metadata_url: String,
        /// The resource it names.
        resource: String,
        /// The server URL of the configuration.
        server_url: String,
    },

    /// The CSRF `state` of a redirect matches no pending authorization.
    #[error("authorization redirect rejected: {reason}")]
    StateMismatch {
        /// Why the redirect matches nothing.
        reason: String,
    },

    /// The authorization server answered the authorization request with an error.
    #[error("authorization server refused the authorization: {error}{}", describe(.description))]
    AuthorizationDenied {
        /// The OAuth `error` code.
        error: String,
        /// Its `error_description`, when given.
        description: Option<String>,
    },

    /// The token endpoint answered with an OAuth error.
    #[error("token endpoint `{endpoint}` refused the {grant} request: {error}{}", describe(.description))]
    TokenRefused {
        /// The token endpoint.
        endpoint: String,
        /// The grant of the request (`authorization_code`, `refresh_token`, …).
        grant: &'static str,
        /// The OAuth `error` code.
        error: String,
        /// Its `error_description`, when given.
        description: Option<String>,
    },

    /// Dynamic client registration (RFC 7591) failed.
    #[error("client registration at `{endpoint}` failed: {reason}")]
    Registration {
        /// The registration endpoint.
        endpoint: String,
        /// Why it failed.
        reason: String,
    },

    /// An HTTP exchange failed (connection, timeout, malformed or oversized response).
    #[error("{what} at `{url}` failed: {reason}")]
    Http {
        /// What the exchange was for (`token request`, `metadata`, …).
        what: &'static str,
        /// The URL (query left out).
        url: String,
        /// Why it failed.
        reason: String,
        /// The HTTP client's error under this one (its URL left out), when there is one.
        #[source]
        source: Option<reqwest::Error>,
    },

    /// 403 `insufficient_scope` kept coming back after the maximum number of step-up authorizations.
    #[error("server `{server}` still reports insufficient scope after {attempts} step-up authorizations")]
    StepUpExhausted {
        /// The server's name.
        server: String,
        /// How many step-ups were tried.
        attempts: u32,
    },

    /// A `!command` secret of the `oauth` section failed (exit code, timeout, empty output); retried on the next
    /// connect, like a failed connect. Names the field, never the value.
    #[error("server `{server}`: {reason}")]
    Secret {
        /// The server's name.
        server: String,
        /// Which field's command failed and how.
        reason: String,
        /// The `!command` error under this one, when a secret command failed.
        #[source]
        source: Option<pimcp_config::SecretError>,
    },

    /// The configuration asks for something this client cannot do, or is inconsistent.
    #[error("oauth configuration of server `{server}`: {reason}")]
    Config {
        /// The server's name.
        server: String,
        /// What is asked for that cannot be done.
        reason: String,
    },

    /// The input to `complete` is neither a redirect URL, a query string nor a bare code.
    #[error("cannot read the authorization response: {reason}")]
    InvalidInput {
        /// What the input was expected to be.
        reason: String,
    },

    /// A token store failed.
    #[error("token store `{store}` failed: {reason}")]
    Store {
        /// Which store (`keyring`, `file`, `memory`).
        store: &'static str,
        /// Why it failed.
        reason: String,
    },

    /// No usable credential store and no opt-in file store: we fail closed.
    #[error(
        "no usable credential store for oauth tokens ({reason}); set `settings.tokenStore: \"file\"` to keep them in \
         0600 files under the data directory instead"
    )]
    NoTokenStore {
        /// Why the OS credential store cannot be used.
        reason: String,
    },

    /// The loopback callback listener could not start or the flow timed out waiting for it.
    #[error("oauth callback listener: {reason}")]
    Callback {
        /// What went wrong.
        reason: String,
    },

    /// Waiting for the per-server refresh lock or a flow took too long.
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        seconds: u64,
    },

    /// A header or credential value cannot be used (names the field, never the value).
    #[error("credential `{field}` of server `{server}` is unusable: {reason}")]
    Credential {
        /// The server's name.
        server: String,
        /// The field (`headers.Authorization`, `bearerToken`, …).
        field: String,
        /// Why it is unusable.
        reason: String,
        /// The `!command` error under this one, when a secret command failed.
        #[source]
        source: Option<pimcp_config::SecretError>,
    },

    /// A private key for `private_key_jwt` could not be read or used.
    #[error("private key for client assertion: {reason}")]
    PrivateKey {
        /// What went wrong.
        reason: String,
    },

    /// A local I/O failure (lock files, data directory).
    #[error("{what} `{path}`: {source}")]
    Io {
        /// What was being done (`locking`, `creating`, …).
        what: &'static str,
        /// The file or directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },

    /// A spawned task died (panic or runtime shutdown).
    #[error("internal task failed: {reason}")]
    Task {
        /// How it died.
        reason: String,
    },
}

impl Error {
    /// True when only a new login (not a retry) can fix this.
    pub fn is_needs_auth(&self) -> bool {
        matches!(self, Error::NeedsAuth { .. } | Error::StepUpExhausted { .. })
    }
}

fn describe(description: &Option<String>) -> DescriptionSuffix<'_> {
    DescriptionSuffix(description.as_deref())
}

struct DescriptionSuffix<'a>(Option<&'a str>);

impl fmt::Display for DescriptionSuffix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(text) if !text.is_empty() => write!(f, " ({text})"),
            _ => Ok(()),
        }
    }
}

/// Text from a remote party (an `error_description`) made safe to show: control characters dropped, length capped.
pub(crate) fn remote_text(text: &str) -> String {
    const MAX_CHARS: usize = 300;
    let cleaned: String = text.chars().filter(|c| !c.is_control()).take(MAX_CHARS).collect();
    if text.chars().count() > MAX_CHARS {
        format!("{cleaned}…")
    } else {
        cleaned
    }
}

/// A URL as it may appear in a message: no user info, no query, no fragment.
pub(crate) fn display_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "<invalid url>".to_string(),
    }
}

/// A reqwest error without its URL (we print our own, sanitized) and without any body.
pub(crate) fn http_reason(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        "timed out".to_string()
    } else if err.is_connect() {
        "cannot connect".to_string()
    } else if err.is_redirect() {
        "unexpected redirect".to_string()
    } else if err.is_body() || err.is_decode() {
        "cannot read the response body".to_string()
    } else {
        // reqwest's own Display names the URL; describe the kind and the cause chain instead.
        let mut text = String::from(if err.is_request() {
            "request failed"
        } else {
            "http error"
        });
        let mut source = std::error::Error::source(err);
        while let Some(inner) = source {
            text.push_str(": ");
            text.push_str(&inner.to_string());
            source = inner.source();
        }
        remote_text(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_url_drops_credentials_and_query() {
        assert_eq!(
            display_url("https://u:p@example.com/mcp?token=x#f"),
            "https://example.com/mcp"
        );
        assert_eq!(display_url("not a url"), "<invalid url>");
    }

    #[test]
    fn remote_text_is_capped_and_clean() {
        assert_eq!(remote_text("a\nb\u{7}c"), "abc");
        assert!(remote_text(&"x".repeat(1000)).ends_with('…'));
    }

    #[test]
    fn no_store_error_names_the_setting() {
        let text = Error::NoTokenStore {
            reason: "keyutils refused".into(),
        }
        .to_string();
        assert!(text.contains("settings.tokenStore: \"file\""), "{text}");
    }
}
