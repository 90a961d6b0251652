//! Redaction of free text pimcp logs or shows (errors from HTTP stacks, upstream error texts, stderr lines): the
//! secret values resolved in this process, the query values and user-info passwords of every URL in the text, and
//! the credentials after `Bearer`/`Basic`.
//!
//! Secret values are remembered process-wide ([`remember_secret`]) because the places that learn them (a connect
//! resolving `!command` headers, an OAuth login) are not the places that print (the stderr log writer, which sees
//! every line any crate logs, rmcp's and reqwest's included).

use std::borrow::Cow;
use std::sync::RwLock;

use crate::explain::{REDACTED, redact_url};

/// Values shorter than this are not remembered: redacting `1` or `on` would mangle every message.
const MIN_SECRET_LEN: usize = 3;
/// At most this many values are remembered; the oldest go first (a long session refreshes OAuth tokens).
const MAX_REMEMBERED: usize = 1024;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers a secret value so that [`redact_text`] hides it wherever it appears.
pub fn remember_secret(value: &str) {
    if value.len() < MIN_SECRET_LEN || value.contains(REDACTED) {
        return;
    }
    let mut secrets = match SECRETS.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if secrets.iter().any(|v| v == value) {
        return;
    }
    if secrets.len() >= MAX_REMEMBERED {
        secrets.remove(0);
    }
    secrets.push(value.to_owned());
    // Longest first, so a value that contains another is hidden whole.
    secrets.sort_by_key(|v| std::cmp::Reverse(v.len()));
}

/// Remembers the user-info password and the query values that look like credentials (a key name such as
/// `api_key`, `token`, `sig`, or a value of 16 characters or more) of a configured URL. A URL in a logged text loses
/// all its query values anyway; this also hides them where an error quotes them on their own.
pub fn remember_url_secrets(url: &str) {
    let Ok(parsed) = url::Url::parse(url) else {
        return;
    };
    if let Some(password) = parsed.password() {
        remember_secret(password);
    }
    let credential = |key: &str| {
        let key = key.to_ascii_lowercase();
        [
            "key", "token", "secret", "auth", "pass", "sig", "code", "session", "cred",
        ]
        .iter()
        .any(|k| key.contains(k))
    };
    if let Some(query) = parsed.query() {
        for (key, value) in query.split('&').filter_map(|pair| pair.split_once('=')) {
            if credential(key) || value.len() >= 16 {
                remember_secret(value);
            }
        }
    }
    for (key, value) in parsed.query_pairs() {
        if credential(&key) || value.len() >= 16 {
            remember_secret(&value);
        }
    }
}

/// `text` with every remembered secret replaced by `<redacted>`, and nothing else changed: for pimcp's own messages,
/// which may carry a URL the user must open whole (an OAuth authorization URL with its `state`).
pub fn redact_known_secrets(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    let secrets = match SECRETS.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = Cow::Owned(out.replace(secret.as_str(), REDACTED));
        }
    }
    out
}

/// `text` with every remembered secret, every URL's query values and password, and every `Bearer`/`Basic`
/// credential replaced by `<redacted>`: for log lines and error texts that quote third-party output.
pub fn redact_text(text: &str) -> Cow<'_, str> {
    let mut out = redact_known_secrets(text);
    if out.contains("://") {
        out = Cow::Owned(redact_urls(&out));
    }
    if out.contains("Bearer ") || out.contains("Basic ") || out.contains("bearer ") {
        out = Cow::Owned(redact_credentials(&out));
    }
    out
}

/// Characters that end a URL in running text.
fn ends_url(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\'' | '<' | '>' | '(' | ')' | '[' | ']' | '{' | '}' | '`' | ',' | '\\'
        )
}

fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme: the letters right before `://`.
        let start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let end = rest[at..].find(ends_url).map_or(rest.len(), |i| at + i);
        out.push_str(&rest[..start]);
        let url = &rest[start..end];
        if start < at && (url.contains('?') || url.contains('@')) {
            out.push_str(&redact_url(url));
        } else {
            out.push_str(url);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A token68 character (RFC 9110 11.2), the alphabet of `Bearer`/`Basic` credentials.
fn token68(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '+' | '/')
}

/// Replaces the credential after `Bearer ` / `Basic ` (any case); an auth-param (`Bearer realm="x"`,
/// `Bearer error=invalid_token`) is a challenge, not a credential, and stays.
fn redact_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < text.len() {
        let scheme = ["Bearer ", "Basic ", "bearer ", "basic ", "BEARER ", "BASIC "]
            .into_iter()
            .find(|s| text[i..].starts_with(s) && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()));
        let Some(scheme) = scheme else {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
            continue;
        };
        out.push_str(scheme);
        i += scheme.len();
        let token_len = text[i..].find(|c: char| !token68(c)).unwrap_or(text.len() - i);
        let after = &text[i + token_len..];
        let padding = after.len() - after.trim_start_matches('=').len();
        let next = after[padding..].chars().next();
        let is_param = padding > 0 && (next == Some('"') || next.is_some_and(token68));
        // A credential is long; a short word after "bearer " in prose ("a bearer token") is left alone.
        if token_len >= 8 && !is_param {
            out.push_str(REDACTED);
            i += token_len + padding;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn remembered_values_are_hidden_longest_first() {
        remember_secret("r3m3mbered-secret");
        remember_secret("r3m3mbered");
        remember_secret("ab");
        assert_eq!(
            redact_text("got r3m3mbered-secret and r3m3mbered, ab"),
            "got <redacted> and <redacted>, ab"
        );
    }

    #[test]
    fn urls_lose_query_values_and_passwords() {
        assert_eq!(
            redact_text("error sending request for url (http://127.0.0.1:9/mcp?api_key=k3y&v=1): refused"),
            "error sending request for url (http://127.0.0.1:9/mcp?api_key=<redacted>&v=<redacted>): refused"
        );
        assert_eq!(
            redact_text("connect https://me:pw@h.example/mcp failed"),
            "connect https://me:<redacted>@h.example/mcp failed"
        );
        assert_eq!(
            redact_text("see https://h.example/docs."),
            "see https://h.example/docs."
        );
        assert_eq!(redact_text("no url here"), "no url here");
    }

    #[test]
    fn bearer_and_basic_credentials_are_hidden_but_challenges_stay() {
        assert_eq!(
            redact_text(r#"{"authorization": "Bearer eyJhbGciOi.J9.sig"}"#),
            r#"{"authorization": "<redacted>"}"#.replace("<redacted>", "Bearer <redacted>")
        );
        assert_eq!(
            redact_text("Authorization: Basic dXNlcjpwYXNz"),
            "Authorization: Basic <redacted>"
        );
        assert_eq!(
            redact_text(r#"WWW-Authenticate: Bearer realm="x", error="invalid_token""#),
            r#"WWW-Authenticate: Bearer realm="x", error="invalid_token""#
        );
        assert_eq!(
            redact_text("Bearer error=insufficient_scope"),
            "Bearer error=insufficient_scope"
        );
        assert_eq!(redact_text("needs a bearer token"), "needs a bearer token");
        assert_eq!(redact_text("Bearer abc123456789=="), "Bearer <redacted>");
    }

    #[test]
    fn configured_url_secrets_are_remembered() {
        remember_url_secrets(
            "https://u:p%40ssw0rd@h.example/mcp?api_key=url%2Bk3y&format=json&x=a-long-opaque-value-0",
        );
        let text = redact_text("p%40ssw0rd url%2Bk3y url+k3y json a-long-opaque-value-0");
        assert_eq!(text, "<redacted> <redacted> <redacted> json <redacted>");
    }
}
