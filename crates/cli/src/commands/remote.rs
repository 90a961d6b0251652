//! `pimcp-run status --attach URL [--json] [--watch]`: the status of a running `pimcp-run serve --http` instance,
//! read from its `GET /status` (`pimcp/serve-status/v1`) instead of starting servers here. Once: a line about the
//! instance (host sessions, calls in flight, draining, the operator notice) and the server table, or with `--json`
//! the instance's JSON as it came. With `--watch` the endpoint is polled every [`POLL_EVERY`] and followed like the
//! in-process watch: redrawn on a terminal, one line per change otherwise, one JSON object per change with `--json`.
//! An instance that stops answering is reported once per outage and polled on; Ctrl-C ends the watch (exit 130).
//! The token (`PIMCP_AUTH_TOKEN` or `--attach-token-file`) is sent as `Authorization: Bearer` and never printed.

use std::io::IsTerminal as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use pimcp_actors::StatusSnapshot;
use pimcp_proxy::{AuthToken, MCP_PATH, STATUS_PATH, STATUS_SCHEMA};
use serde_json::Value;

use super::session::{EXIT_INTERRUPTED, block_on};
use super::status::render;
use super::watch::{clock, emit, epoch_ms, state_line, timestamp};
use super::{Exit, usage};
use crate::output::{Colour, Style, one_line, print_json};
use crate::{EXIT_FAILED, EXIT_OK};

/// How often a watched instance is asked for its status.
pub(crate) const POLL_EVERY: Duration = Duration::from_secs(1);
/// How long one `/status` request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// One `/status` answer.
#[derive(Debug, Clone, PartialEq)]
struct Instance {
    sessions: u64,
    in_flight: u64,
    draining: bool,
    notice: Option<String>,
    status: StatusSnapshot,
    /// The answer as it came (what `--json` prints).
    raw: Value,
}

impl Instance {
    fn parse(raw: Value) -> anyhow::Result<Instance> {
        if raw["schema"] != STATUS_SCHEMA {
            anyhow::bail!(
                "not a pimcp-run status answer (schema {}, expected {STATUS_SCHEMA})",
                raw["schema"]
            );
        }
        let status: StatusSnapshot = serde_json::from_value(raw["status"].clone())?;
        Ok(Instance {
            sessions: raw["sessions"].as_u64().unwrap_or(0),
            in_flight: raw["inFlight"].as_u64().unwrap_or(0),
            draining: raw["draining"].as_bool().unwrap_or(false),
            notice: raw["notice"].as_str().map(str::to_owned),
            status,
            raw,
        })
    }

    /// What the instance line says (compared to decide whether to print it again).
    fn summary(&self) -> (u64, u64, bool, Option<&str>) {
        (self.sessions, self.in_flight, self.draining, self.notice.as_deref())
    }
}

/// The `/status` endpoint of an instance and how to ask it.
struct Remote {
    client: reqwest::Client,
    url: String,
    token: Option<AuthToken>,
}

impl Remote {
    async fn fetch(&self) -> anyhow::Result<Instance> {
        let mut request = self.client.get(&self.url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        let response = request
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot reach {}: {}", self.url, reqwest_reason(&e)))?;
        let code = response.status();
        if code == reqwest::StatusCode::UNAUTHORIZED {
            anyhow::bail!(
                "{} answered 401: a token is needed (PIMCP_AUTH_TOKEN or --attach-token-file) or it is wrong",
                self.url
            );
        }
        if !code.is_success() {
            anyhow::bail!("{} answered HTTP {code}", self.url);
        }
        let raw: Value = response
            .json()
            .await
            .map_err(|e| anyhow::anyhow!("{} sent no JSON: {}", self.url, reqwest_reason(&e)))?;
        Instance::parse(raw)
    }
}

/// The innermost cause of a reqwest error (its own message repeats the URL).
fn reqwest_reason(e: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = e;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

/// `/status` of the instance whose MCP endpoint (or base URL, or status URL) is `url`.
pub(crate) fn status_url(url: &str) -> anyhow::Result<String> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(usage(format!(
            "--attach needs the http(s) URL of a pimcp-run serve instance, got `{url}`"
        )));
    }
    let base = url
        .strip_suffix(MCP_PATH)
        .or_else(|| url.strip_suffix(STATUS_PATH))
        .unwrap_or(url);
    Ok(format!("{base}{STATUS_PATH}"))
}

/// `status --attach URL` with or without `--watch`.
pub(crate) fn run(url: &str, token_file: Option<&Path>, json: bool, watch: bool) -> anyhow::Result<u8> {
    let inline = std::env::var(super::serve::TOKEN_ENV).ok();
    let token = super::serve::token(inline.as_deref(), token_file)?;
    let url = status_url(url)?;
    block_on(async move {
        let remote = Remote {
            client: reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build()?,
            url,
            token,
        };
        if !watch {
            let instance = remote.fetch().await.map_err(|e| Exit {
                code: EXIT_FAILED,
                message: e.to_string(),
            })?;
            if json {
                print_json(&instance.raw)?;
            } else {
                let now = SystemTime::now();
                let text = format!(
                    "{}\n{}",
                    instance_text(&instance),
                    render(&instance.status, Style::stdout(), now)
                );
                emit(&mut std::io::stdout(), &text)?;
            }
            return Ok(EXIT_OK);
        }
        let view = if json {
            View::Json
        } else if std::io::stdout().is_terminal() {
            View::Screen
        } else {
            View::Lines
        };
        tokio::select! {
            shown = follow(&remote, view) => shown,
            _ = tokio::signal::ctrl_c() => Err(Exit { code: EXIT_INTERRUPTED, message: "interrupted".into() }.into()),
        }
    })
}

/// How changes are shown (as in the in-process watch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Screen,
    Lines,
    Json,
}

/// Polls the instance and shows what changed until stdout goes away.
async fn follow(remote: &Remote, view: View) -> anyhow::Result<u8> {
    let style = Style::stdout();
    let mut out = std::io::stdout();
    let mut last: Option<Instance> = None;
    let mut unreachable = false;
    loop {
        let now = SystemTime::now();
        let text = match remote.fetch().await {
            Ok(instance) => {
                let text = match view {
                    View::Screen => screen(&remote.url, Ok(&instance), style, now),
                    View::Lines => changes(last.as_ref(), &instance, unreachable, now),
                    View::Json => json_change(last.as_ref(), &instance, unreachable, now)?,
                };
                unreachable = false;
                last = Some(instance);
                text
            }
            Err(e) => {
                let text = match view {
                    View::Screen => screen(&remote.url, Err(&e.to_string()), style, now),
                    _ if unreachable => String::new(),
                    View::Lines => format!(
                        "{} instance unreachable — {}\n",
                        timestamp(now),
                        one_line(&e.to_string(), 200)
                    ),
                    View::Json => format!(
                        "{}\n",
                        serde_json::json!({ "event": "unreachable", "error": e.to_string(), "atMs": epoch_ms(now) })
                    ),
                };
                unreachable = true;
                text
            }
        };
        if !text.is_empty() && emit(&mut out, &text).is_err() {
            return Ok(EXIT_OK);
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// `instance: 2 sessions, 1 call in flight[, draining][ — notice]`.
fn instance_text(instance: &Instance) -> String {
    let plural = |n: u64, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let mut line = format!(
        "instance: {}, {} in flight",
        plural(instance.sessions, "session"),
        plural(instance.in_flight, "call")
    );
    if instance.draining {
        line.push_str(", draining");
    }
    if let Some(notice) = &instance.notice {
        line.push_str(" — ");
        line.push_str(&one_line(notice, 200));
    }
    line
}

/// The line view: everything the first time (and after an outage), then only what changed.
fn changes(previous: Option<&Instance>, next: &Instance, after_outage: bool, now: SystemTime) -> String {
    let previous = previous.filter(|_| !after_outage);
    let mut out = String::new();
    if previous.is_none_or(|p| p.summary() != next.summary()) {
        out.push_str(&format!("{} {}\n", timestamp(now), instance_text(next)));
    }
    for s in &next.status.servers {
        let same = previous
            .and_then(|p| p.status.server(&s.name))
            .is_some_and(|p| p.state == s.state && p.reason == s.reason && p.tool_count == s.tool_count);
        if !same {
            out.push_str(&state_line(
                now,
                &s.name,
                &s.state,
                s.reason.as_deref(),
                Some(s.tool_count),
            ));
        }
    }
    if let Some(p) = previous {
        for gone in p
            .status
            .servers
            .iter()
            .filter(|s| next.status.server(&s.name).is_none())
        {
            out.push_str(&format!("{} {} removed\n", timestamp(now), gone.name));
        }
    }
    out
}

/// The JSON view: the instance's answer whenever anything but its timestamp changed, with `atMs`.
fn json_change(
    previous: Option<&Instance>,
    next: &Instance,
    after_outage: bool,
    now: SystemTime,
) -> anyhow::Result<String> {
    let unchanged = !after_outage
        && previous.is_some_and(|p| p.summary() == next.summary() && steady(&p.status) == steady(&next.status));
    if unchanged {
        return Ok(String::new());
    }
    let mut value = next.raw.clone();
    value["atMs"] = serde_json::json!(epoch_ms(now));
    Ok(format!("{}\n", serde_json::to_string(&value)?))
}

/// The servers without what moves by itself (uptimes).
fn steady(status: &StatusSnapshot) -> Vec<pimcp_actors::ServerStatus> {
    let mut servers = status.servers.clone();
    for s in &mut servers {
        s.uptime_ms = None;
    }
    servers
}

/// One terminal frame.
fn screen(url: &str, instance: Result<&Instance, &str>, style: Style, now: SystemTime) -> String {
    let header = format!("pimcp-run status --watch · {url} · {} UTC · Ctrl-C to stop", clock(now));
    let body = match instance {
        Ok(instance) => format!(
            "{}\n\n{}",
            instance_text(instance),
            render(&instance.status, style, now)
        ),
        Err(e) => style.paint(
            &format!("instance unreachable — {}\n", one_line(e, 200)),
            Some(Colour::Red),
        ),
    };
    format!("\x1b[H\x1b[2J{}\n\n{body}", style.paint(&header, Some(Colour::Dim)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::UNIX_EPOCH;

    use super::*;

    fn instance(sessions: u64, state: &str) -> Instance {
        let raw = serde_json::json!({
            "schema": STATUS_SCHEMA,
            "sessions": sessions,
            "inFlight": 0,
            "draining": false,
            "notice": null,
            "status": {
                "schema": StatusSnapshot::SCHEMA,
                "takenAtMs": 5,
                "servers": [],
            },
        });
        let mut instance = Instance::parse(raw).unwrap();
        let status: pimcp_actors::ServerStatus = serde_json::from_value(serde_json::json!({
            "name": "fx", "state": state, "toolCount": 3, "resourceCount": 0, "promptCount": 0,
            "failures": 0, "sinceMs": 0, "inFlight": 0, "lifecycle": "lazy",
        }))
        .unwrap();
        instance.status.servers = vec![status];
        instance
    }

    #[test]
    fn status_urls_come_from_the_mcp_url_the_base_or_the_status_url() {
        for url in [
            "http://127.0.0.1:8765/mcp",
            "http://127.0.0.1:8765/",
            "http://127.0.0.1:8765/status",
            " http://127.0.0.1:8765 ",
        ] {
            assert_eq!(status_url(url).unwrap(), "http://127.0.0.1:8765/status", "{url}");
        }
        assert!(status_url("127.0.0.1:8765").is_err());
    }

    #[test]
    fn the_line_view_prints_only_what_changed() {
        let at = UNIX_EPOCH + Duration::from_secs(60);
        let first = instance(0, "cached");
        let text = changes(None, &first, false, at);
        assert_eq!(
            text,
            "1970-01-01T00:01:00Z instance: 0 sessions, 0 calls in flight\n1970-01-01T00:01:00Z fx cached\n"
        );
        assert_eq!(changes(Some(&first), &first, false, at), "");
        let ready = instance(1, "ready");
        assert_eq!(
            changes(Some(&first), &ready, false, at),
            "1970-01-01T00:01:00Z instance: 1 session, 0 calls in flight\n1970-01-01T00:01:00Z fx ready (3 tools)\n"
        );
        // After an outage everything is shown again.
        assert_eq!(changes(Some(&ready), &ready, true, at).lines().count(), 2);
        let mut empty = ready.clone();
        empty.status.servers.clear();
        assert!(changes(Some(&ready), &empty, false, at).ends_with("fx removed\n"));
    }

    #[test]
    fn the_json_view_skips_answers_that_differ_only_in_time() {
        let at = UNIX_EPOCH + Duration::from_secs(1);
        let a = instance(0, "cached");
        let mut b = a.clone();
        b.status.taken_at_ms = 99;
        b.status.servers[0].uptime_ms = Some(1_000);
        assert_eq!(json_change(Some(&a), &b, false, at).unwrap(), "");
        let line = json_change(None, &a, false, at).unwrap();
        let value: Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(
            (value["schema"].as_str(), value["atMs"].as_u64()),
            (Some(STATUS_SCHEMA), Some(1000))
        );
        assert!(
            !json_change(Some(&a), &instance(1, "cached"), false, at)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_foreign_answer_is_refused() {
        assert!(Instance::parse(serde_json::json!({ "schema": "something/else" })).is_err());
    }
}
