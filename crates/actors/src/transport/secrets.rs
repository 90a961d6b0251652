//! Connect-time secret resolution (`!command` env/header values, bearer tokens) and the redactor that keeps every
//! resolved value out of errors and stderr tails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use pimcp_config::{ResolveOptions, SecretValue};

use super::ConnectError;
use crate::process::ProcessOptions;

/// Values that must never appear in text we show; applied to stderr tails and error messages.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    /// Remembers a secret value (very short values are ignored: redacting `1` would mangle every message).
    pub(super) fn add(&mut self, value: &str) {
        if value.len() >= 3 && !self.values.iter().any(|v| v == value) {
            self.values.push(value.to_owned());
            // The stderr log writer redacts with the process-wide set: whatever rmcp or reqwest logs about this
            // connection is covered too.
            pimcp_config::remember_secret(value);
        }
    }

    pub(super) fn values(&self) -> Vec<String> {
        self.values.clone()
    }

    /// `text` without any of these values (every one [`Redactor::add`] took is remembered process-wide), URL query
    /// values and passwords, or `Bearer`/`Basic` credentials.
    pub(super) fn apply(&self, text: &str) -> String {
        pimcp_config::redact_text(text).into_owned()
    }
}

/// Resolves one secret-capable value; `!command`s run on a blocking thread (they may take up to 10 s) with their
/// process group watched by the runtime's guardian when there is one, so they never outlive pimcp. Dropping the future (the connect was cancelled or
/// timed out, the runtime shuts down) kills the command's process group at once.
/// `context` names the field in errors (`env.API_KEY`, `headers.Authorization`); a command runs in `cwd` (the
/// server's working directory: its `cwd`, else the project directory).
pub(crate) async fn resolve(
    server: &str,
    context: String,
    value: &SecretValue,
    process: &ProcessOptions,
    cwd: &std::path::Path,
) -> Result<String, ConnectError> {
    match value {
        SecretValue::Plain(secret) => Ok(secret.expose().to_owned()),
        SecretValue::Command(_) => {
            let value = value.clone();
            let ctx = context.clone();
            let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
            let process = process.clone();
            let mut options = ResolveOptions {
                cancel: Some(cancel.0.clone()),
                cwd: Some(cwd.to_path_buf()),
                ..ResolveOptions::default()
            };
            let joined = tokio::task::spawn_blocking(move || {
                options.guardian = secret_guardian(&process)?;
                value.resolve_with(&ctx, &options)
            })
            .await;
            drop(cancel);
            match joined {
                Ok(Ok(secret)) => Ok(secret.expose().to_owned()),
                Ok(Err(e)) => Err(ConnectError::Secret {
                    server: server.to_owned(),
                    message: e.to_string(),
                    source: Some(e),
                }),
                Err(_) => Err(ConnectError::Secret {
                    server: server.to_owned(),
                    message: format!("resolving `{context}` was interrupted"),
                    source: None,
                }),
            }
        }
    }
}

/// The runtime's guardian, started if needed, to watch `!command` secrets (`None` without one). Blocking: it may
/// wait for the guardian process to start.
pub(crate) fn secret_guardian(
    process: &ProcessOptions,
) -> Result<Option<Arc<dyn pimcp_config::GroupWatch>>, pimcp_config::SecretError> {
    let Some(exe) = process.guardian_executable() else {
        return Ok(None);
    };
    process
        .guardian_process
        .ensure(&exe)
        .map_err(|e| pimcp_config::SecretError::Spawn {
            context: "the guardian".into(),
            reason: e.to_string(),
        })?;
    Ok(Some(Arc::new(process.guardian_process.clone())))
}

/// Stops a running `!command` when its resolution is dropped.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Whether a plain env value should be treated as secret for redaction: anything named like a credential, and any
/// value long enough to be one.
pub(crate) fn env_value_is_sensitive(key: &str, value: &str) -> bool {
    const HINTS: [&str; 7] = ["TOKEN", "KEY", "SECRET", "PASS", "AUTH", "CREDENTIAL", "COOKIE"];
    let upper = key.to_ascii_uppercase();
    HINTS.iter().any(|h| upper.contains(h)) || value.len() >= 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_longest_first() {
        let mut r = Redactor::default();
        r.add("abc");
        r.add("abcdef");
        r.add("x");
        assert_eq!(r.apply("v=abcdef w=abc x"), "v=<redacted> w=<redacted> x");
    }
}
