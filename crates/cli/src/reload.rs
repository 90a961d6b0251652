//! Hot reload of the configuration for both MCP entry points of `pimcp-run` (stdio and `serve --http`).
//! The files the loader reported in `Config::sources` (present or not, so creating one counts) are fingerprinted
//! every second, and SIGHUP forces a reload. The new configuration is validated first: an error that the running
//! setup did not already have refuses it, the running setup stays, and the refusal is logged and shown at the top
//! of `mcp({})` and in `GET /status` until a later reload succeeds. An accepted one goes through
//! `Proxy::reconfigure`: the runtime restarts only changed servers, stops removed ones and keeps unchanged ones
//! with their calls in flight; hosts get `list_changed` when the surface they see changes.
//!
//! Polling rather than the `notify` crate: editors replace files by rename, config files live in directories
//! that may not exist yet, and a one-second poll of a handful of small files costs nothing measurable.

use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::time::Duration;

use pimcp_config::{Config, LoadOptions};
use pimcp_proxy::Proxy;
use tokio::task::JoinHandle;

/// How often the config files are checked for changes.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// What a config file looked like: `None` when absent or unreadable, else a hash of its bytes.
type Fingerprint = Vec<(PathBuf, Option<u64>)>;

fn fingerprint(paths: &[PathBuf]) -> Fingerprint {
    paths
        .iter()
        .map(|p| {
            let seen = pimcp_config::read_bounded(p, pimcp_config::CONFIG_FILE_LIMIT)
                .ok()
                .map(|bytes| {
                    let mut h = DefaultHasher::new();
                    bytes.hash(&mut h);
                    h.finish()
                });
            (p.clone(), seen)
        })
        .collect()
}

/// Every file the loader looked at, in its order.
pub(crate) fn watched_paths(config: &Config) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    config
        .sources
        .iter()
        .filter_map(|s| s.origin.path())
        .filter(|p| seen.insert(p.to_path_buf()))
        .map(std::path::Path::to_path_buf)
        .collect()
}

/// The error-level problems of `config`, as text without values (config problems never carry values).
fn errors(config: &Config) -> Vec<String> {
    config
        .problems
        .iter()
        .filter(|p| p.is_error())
        .map(ToString::to_string)
        .collect()
}

/// What to do with a freshly loaded configuration.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Same servers and settings: nothing to apply.
    Unchanged,
    /// Apply it; the names are the servers added, removed or changed.
    Apply(Vec<String>),
    /// Keep the running setup; these are the new errors.
    Refuse(Vec<String>),
}

/// Decides about `next` given the `running` configuration: errors the running setup did not have refuse it (so a
/// typo never takes servers down), anything else that differs is applied.
pub(crate) fn judge(running: &Config, next: &Config) -> Verdict {
    let old = errors(running);
    let new: Vec<String> = errors(next).into_iter().filter(|e| !old.contains(e)).collect();
    if !new.is_empty() {
        return Verdict::Refuse(new);
    }
    let mut changed: Vec<String> = next
        .servers
        .iter()
        .filter(|s| running.server(&s.name) != Some(*s))
        .map(|s| s.name.clone())
        .collect();
    changed.extend(
        running
            .servers
            .iter()
            .filter(|s| next.server(&s.name).is_none())
            .map(|s| s.name.clone()),
    );
    changed.sort();
    if changed.is_empty() && running.settings == next.settings {
        Verdict::Unchanged
    } else {
        Verdict::Apply(changed)
    }
}

/// Watches the config files of `running` (and SIGHUP) and applies valid changes to `proxy` until aborted.
pub(crate) fn spawn(opts: LoadOptions, proxy: Proxy, running: Config) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut hup = match pimcp_proxy::reload_signal() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::debug!(error = %e, "no reload signal; config files are still watched");
                None
            }
        };
        let mut running = running;
        let mut paths = watched_paths(&running);
        let mut last = fingerprint(&paths);
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let trigger = tokio::select! {
                _ = tick.tick() => {
                    let now = {
                        let paths = paths.clone();
                        tokio::task::spawn_blocking(move || fingerprint(&paths)).await.unwrap_or_default()
                    };
                    if now == last {
                        continue;
                    }
                    "a config file changed"
                }
                Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => "SIGHUP",
            };
            let next = {
                let opts = opts.clone();
                match tokio::task::spawn_blocking(move || pimcp_config::load(&opts)).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(error = %e, "loading the configuration failed");
                        continue;
                    }
                }
            };
            paths = watched_paths(&next);
            last = {
                let paths = paths.clone();
                tokio::task::spawn_blocking(move || fingerprint(&paths))
                    .await
                    .unwrap_or_default()
            };
            match judge(&running, &next) {
                Verdict::Unchanged => {
                    tracing::debug!(trigger, "configuration unchanged");
                    proxy.set_notice(None);
                }
                Verdict::Refuse(problems) => {
                    let notice = refused_notice(&problems);
                    tracing::error!(trigger, "{notice}");
                    proxy.set_notice(Some(notice));
                }
                Verdict::Apply(changed) => match proxy.reconfigure(next.clone()).await {
                    Ok(()) => {
                        tracing::info!(
                            trigger,
                            servers = next.servers.len(),
                            changed = %changed.join(", "),
                            "configuration reloaded"
                        );
                        proxy.set_notice(None);
                        running = next;
                    }
                    Err(e) => {
                        let notice = format!(
                            "Configuration reload failed: {}. The previous setup is still running.",
                            e.text()
                        );
                        tracing::error!(trigger, "{notice}");
                        proxy.set_notice(Some(notice));
                    }
                },
            }
        }
    })
}

/// The operator notice for a refused reload.
pub(crate) fn refused_notice(problems: &[String]) -> String {
    format!(
        "Configuration reload refused, keeping the running setup: {}. Fix the file (`pimcp-run config \
         check`); it is applied as soon as it is valid.",
        problems.join("; ")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn load(dir: &std::path::Path, value: &serde_json::Value) -> Config {
        let file = dir.join("mcp.json");
        std::fs::write(&file, value.to_string()).unwrap();
        load_file(dir)
    }

    fn load_file(dir: &std::path::Path) -> Config {
        let mut opts = LoadOptions::new(dir.join("home"), dir);
        opts.config_path = Some(dir.join("mcp.json"));
        opts.env.insert("PIMCP_CONFIG_MODE", "exclusive");
        pimcp_config::load(&opts)
    }

    #[test]
    fn only_changed_servers_are_named_and_new_errors_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let a = load(
            dir.path(),
            &json!({ "mcpServers": { "a": { "command": "x" }, "b": { "command": "y" } } }),
        );
        assert_eq!(judge(&a, &a), Verdict::Unchanged);
        let b = load(
            dir.path(),
            &json!({ "mcpServers": { "a": { "command": "x", "args": ["1"] }, "b": { "command": "y" }, "c": { "command": "z" } } }),
        );
        assert_eq!(judge(&a, &b), Verdict::Apply(vec!["a".into(), "c".into()]));
        let c = load(dir.path(), &json!({ "mcpServers": { "b": { "command": "y" } } }));
        assert_eq!(judge(&a, &c), Verdict::Apply(vec!["a".into()]));

        std::fs::write(dir.path().join("mcp.json"), "{ \"mcpServers\": { \"a\": ").unwrap();
        let broken = load_file(dir.path());
        let Verdict::Refuse(problems) = judge(&a, &broken) else {
            panic!("a syntax error must be refused");
        };
        assert!(problems.iter().any(|p| p.contains("mcp.json")), "{problems:?}");
        // Once running with that error (it was there at start), other edits still apply.
        assert_eq!(judge(&broken, &broken), Verdict::Unchanged);
    }

    #[test]
    fn a_file_appearing_or_changing_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.json");
        let paths = vec![path.clone()];
        let before = fingerprint(&paths);
        std::fs::write(&path, "{}").unwrap();
        let created = fingerprint(&paths);
        assert_ne!(before, created);
        std::fs::write(&path, "{ }").unwrap();
        assert_ne!(created, fingerprint(&paths));
        assert_eq!(fingerprint(&paths), fingerprint(&paths));
    }
}
