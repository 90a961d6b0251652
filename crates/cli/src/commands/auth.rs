//! `pimcp-run auth login|complete|logout|status` (docs/auth.md): OAuth logins of HTTP servers. `login` starts the
//! flow in an in-process runtime, shows the authorization URL (and opens the browser), then waits for the browser's
//! redirect to the loopback listener or for the redirect URL / code pasted on stdin. `complete`, run in another
//! shell, finishes that login itself: the runtime of `login` persisted the pending PKCE verifier and `state`
//! (0600, 10 minutes, bound to the server URL), `complete` adopts it, exchanges the code and stores the tokens, and
//! the waiting `login` sees the stored token and exits 0. Without a persisted login, a loopback redirect URL is
//! handed to the waiting login's listener as the browser would have done.
//! `logout` forgets the stored tokens; `status` shows how every server authenticates (`--json`:
//! `pimcp/auth-status/v1`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand};
use pimcp_actors::{AuthMode, AuthStatus, ErrorCategory, ServerAuthStatus};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use super::connect::check_server;
use super::session::{SessionOptions, block_on, with_session};
use super::{Ctx, usage};
use crate::output::{Colour, Style, Table, cell, one_line, print_json};
use crate::{EXIT_FAILED, EXIT_OK};

/// How long `auth login` waits for the redirect.
const LOGIN_WAIT: Duration = Duration::from_secs(5 * 60);
/// How long `auth complete` waits for the waiting login's listener to answer.
const DELIVER_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Subcommand)]
pub(crate) enum AuthCommand {
    /// Log in to an OAuth server: open the printed URL, then wait for the redirect (or paste it here).
    Login(ServerArgs),
    /// Finish a `pimcp-run auth login` waiting on this machine with the redirect URL (or bare code) from the browser.
    Complete(CompleteArgs),
    /// Forget a server's stored tokens and registered client.
    Logout(ServerArgs),
    /// Show how every server authenticates and whether a login is stored.
    Status(StatusArgs),
}

impl AuthCommand {
    pub(crate) fn json(&self) -> bool {
        match self {
            AuthCommand::Status(a) => a.json,
            AuthCommand::Login(_) | AuthCommand::Complete(_) | AuthCommand::Logout(_) => false,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// The server's name in the configuration.
    pub server: String,
}

#[derive(Debug, Args)]
pub(crate) struct CompleteArgs {
    /// The server's name in the configuration.
    pub server: String,
    /// The full URL the browser was redirected to (`http://127.0.0.1:19847/callback?code=…&state=…`), or the bare
    /// authorization code.
    pub redirect_url: String,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Machine-readable output (`pimcp/auth-status/v1`).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(ctx: &Ctx, command: AuthCommand) -> anyhow::Result<u8> {
    match command {
        AuthCommand::Login(args) => login(ctx, args),
        AuthCommand::Complete(args) => complete(ctx, args),
        AuthCommand::Logout(args) => logout(ctx, args),
        AuthCommand::Status(args) => status(ctx, args),
    }
}

fn login(ctx: &Ctx, args: ServerArgs) -> anyhow::Result<u8> {
    block_on(with_session(ctx, SessionOptions::default(), async |session| {
        check_server(session, &args.server)?;
        let handle = session.handle();
        let server = args.server.as_str();
        let start = handle.auth_start(server).await?;
        errln!("Open this URL to authorize `{server}`:\n\n  {}\n", start.url);
        errln!(
            "Waiting for the browser's redirect (up to {} min). If the browser runs on another machine, it is sent to \
             a page that does not load: copy that page's URL and paste it here (then Enter), or run\n  pimcp-run auth \
             complete {server} 'URL'",
            LOGIN_WAIT.as_secs() / 60
        );
        let listener = handle.auth_wait(server, LOGIN_WAIT);
        let pasted = async {
            let mut lines = BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                match handle.auth_complete(server, line).await {
                    Ok(()) => return Ok(()),
                    // Stored, but the reconnect failed: the login itself worked.
                    Err(e) if e.category() != ErrorCategory::NeedsAuth => return Err(e),
                    Err(e) => errln!("not accepted: {e}"),
                }
            }
            // stdin closed: only the browser can finish it now.
            std::future::pending::<pimcp_actors::Result<()>>().await
        };
        tokio::select! {
            done = listener => done?,
            done = pasted => {
                if let Err(e) = done {
                    errln!("logged in, but connecting failed: {e}");
                }
            }
        }
        let status = handle.auth_status().await?;
        let line = status.server(server).map(describe_login).unwrap_or_default();
        outln!("logged in to {server}{line}");
        Ok(EXIT_OK)
    }))
}

fn describe_login(s: &ServerAuthStatus) -> String {
    match s.expires_at {
        Some(at) => format!(" (token valid for {})", until(at, now_secs())),
        None => String::new(),
    }
}

/// Finishes the login another process started (persisted by its runtime) in this process; without one, hands a
/// loopback redirect to the waiting login's listener.
fn complete(ctx: &Ctx, args: CompleteArgs) -> anyhow::Result<u8> {
    let input = args.redirect_url.trim().to_owned();
    let adopted = block_on(with_session(ctx, SessionOptions::default(), async |session| {
        check_server(session, &args.server)?;
        let server = args.server.as_str();
        match session.handle().auth_complete(server, &input).await {
            Ok(()) => Ok(Some(Ok(()))),
            // The tokens are stored; only the reconnect failed.
            Err(e) if e.category() != ErrorCategory::NeedsAuth => Ok(Some(Err(e.to_string()))),
            Err(e) => {
                tracing::debug!(server, error = %e, "no persisted login took this redirect");
                Ok(None)
            }
        }
    }))?;
    match adopted {
        Some(Ok(())) => {
            outln!("logged in to {}", args.server);
            return Ok(EXIT_OK);
        }
        Some(Err(connect)) => {
            errln!("logged in, but connecting failed: {connect}");
            outln!("logged in to {}", args.server);
            return Ok(EXIT_OK);
        }
        None => {}
    }
    let target = loopback_target(&input).ok_or_else(|| {
        usage(format!(
            "no login of `{}` is pending on this machine that `{}` completes; start one with `pimcp-run auth login {}`",
            args.server,
            redact_query(&input),
            args.server
        ))
    })?;
    deliver_to_listener(&args.server, target)
}

/// Hands a loopback redirect to the listener named in it (a `login` waiting on this machine).
fn deliver_to_listener(server: &str, target: Target) -> anyhow::Result<u8> {
    let server = server.to_owned();
    block_on(async move {
        let status = tokio::time::timeout(DELIVER_TIMEOUT, deliver(&target))
            .await
            .map_err(|_| anyhow::anyhow!("the login listener on port {} did not answer", target.port))?;
        match status {
            Ok(200) => {
                outln!("handed to the waiting login of {server}");
                Ok(EXIT_OK)
            }
            Ok(code) => Err(anyhow::anyhow!(
                "the login listener on port {} refused the redirect (HTTP {code})",
                target.port
            )),
            Err(e) => Err(anyhow::anyhow!(
                "no login is waiting on port {} ({e}); start one with `pimcp-run auth login {server}`",
                target.port,
            )),
        }
    })
}

/// A loopback redirect: where to connect and what to request.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    port: u16,
    host_header: String,
    path_and_query: String,
}

fn loopback_target(url: &str) -> Option<Target> {
    let rest = url.trim().strip_prefix("http://")?;
    let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let (host, port) = authority.rsplit_once(':')?;
    if !matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
        return None;
    }
    let port: u16 = port.parse().ok()?;
    let path_and_query = format!("/{path}");
    let query = path_and_query.split_once('?').map(|(_, q)| q)?;
    if !(query.contains("code=") || query.contains("error=")) || path_and_query.contains(['\r', '\n', ' ']) {
        return None;
    }
    Some(Target {
        port,
        host_header: authority.to_owned(),
        path_and_query,
    })
}

/// One plain HTTP/1.1 GET to 127.0.0.1; returns the status code.
async fn deliver(target: &Target) -> std::io::Result<u16> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", target.port)).await?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        target.path_and_query, target.host_header
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = vec![0u8; 64];
    let n = stream.read(&mut head).await?;
    let text = String::from_utf8_lossy(&head[..n]);
    text.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other("not an HTTP response"))
}

/// A URL without its query (codes and `state` are never echoed).
fn redact_query(url: &str) -> String {
    url.split_once('?').map_or(url, |(base, _)| base).to_owned()
}

fn logout(ctx: &Ctx, args: ServerArgs) -> anyhow::Result<u8> {
    block_on(with_session(ctx, SessionOptions::default(), async |session| {
        check_server(session, &args.server)?;
        session.handle().auth_logout(&args.server).await?;
        outln!("forgot the stored tokens of {}", args.server);
        Ok(EXIT_OK)
    }))
}

fn status(ctx: &Ctx, args: StatusArgs) -> anyhow::Result<u8> {
    block_on(with_session(ctx, SessionOptions::default(), async |session| {
        let status = session.handle().auth_status().await?;
        if args.json {
            print_json(&status_json(&status))?;
        } else {
            out!("{}", render(&status, Style::stdout(), now_secs()));
        }
        let broken = status.servers.iter().any(|s| s.error.is_some() && !s.logged_in);
        Ok(if broken { EXIT_FAILED } else { EXIT_OK })
    }))
}

/// `pimcp/auth-status/v1`.
fn status_json(status: &AuthStatus) -> serde_json::Value {
    json!({"schema": "pimcp/auth-status/v1", "servers": status.servers})
}

fn render(status: &AuthStatus, style: Style, now: u64) -> String {
    let mut table = Table::new(&["SERVER", "AUTH", "LOGIN", "DETAIL"]);
    for s in &status.servers {
        let (login, colour) = match (s.mode, s.logged_in, &s.pending) {
            (AuthMode::None | AuthMode::Headers | AuthMode::Bearer, _, _) => ("-", None),
            (_, _, Some(_)) => ("pending", Some(Colour::Yellow)),
            (_, true, _) => ("logged in", Some(Colour::Green)),
            (AuthMode::Auto, false, _) if !s.detected => ("-", None),
            (_, false, _) => ("needed", Some(Colour::Red)),
        };
        let mode = match (s.mode, s.detected) {
            (AuthMode::None, _) => "none",
            (AuthMode::Headers, _) => "headers",
            (AuthMode::Bearer, _) => "bearer",
            (AuthMode::Oauth, _) => "oauth",
            (AuthMode::Auto, true) => "oauth (detected)",
            (AuthMode::Auto, false) => "auto",
        };
        let mut detail = Vec::new();
        if let Some(grant) = s.grant.as_deref().filter(|g| *g == "client_credentials") {
            detail.push(grant.to_owned());
        }
        if s.logged_in {
            if let Some(at) = s.expires_at {
                detail.push(if at > now {
                    format!("expires in {}", until(at, now))
                } else {
                    "expired".to_owned()
                });
            }
            if s.has_refresh_token {
                detail.push("refreshable".to_owned());
            }
        }
        if let Some(pending) = &s.pending {
            detail.push(format!("open {}", pending.url));
        }
        if let Some(error) = &s.error {
            detail.push(one_line(error, 120));
        }
        table.row(vec![
            s.name.as_str().into(),
            mode.into(),
            cell(login, colour),
            detail.join("; ").into(),
        ]);
    }
    if table.is_empty() {
        return "no servers are configured\n".to_owned();
    }
    table.render(style)
}

fn until(at: u64, now: u64) -> String {
    let secs = at.saturating_sub(now);
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn only_loopback_redirects_with_a_code_are_delivered() {
        let t = loopback_target("http://127.0.0.1:19847/callback?code=abc&state=s").unwrap();
        assert_eq!(t.port, 19847);
        assert_eq!(t.path_and_query, "/callback?code=abc&state=s");
        assert_eq!(t.host_header, "127.0.0.1:19847");
        assert!(loopback_target("http://localhost:8765/oauth/done?error=access_denied&state=s").is_some());
        assert!(loopback_target("https://127.0.0.1:1/cb?code=a").is_none());
        assert!(loopback_target("http://evil.example:80/cb?code=a").is_none());
        assert!(loopback_target("http://127.0.0.1:19847/callback").is_none());
        assert!(loopback_target("abc123").is_none());
        assert_eq!(
            redact_query("http://127.0.0.1:1/cb?code=secret"),
            "http://127.0.0.1:1/cb"
        );
    }

    #[test]
    fn status_table_says_how_each_server_authenticates() {
        let mut oauth = ServerAuthStatus::new("linear", AuthMode::Oauth);
        oauth.logged_in = true;
        oauth.expires_at = Some(1_000 + 3_600);
        oauth.has_refresh_token = true;
        let mut auto = ServerAuthStatus::new("notion", AuthMode::Auto);
        auto.detected = true;
        auto.error = Some("server `notion` needs authentication (not logged in)".into());
        let local = ServerAuthStatus::new("files", AuthMode::None);
        let status = AuthStatus {
            servers: vec![oauth, auto, local],
        };
        let text = render(&status, Style { colour: false }, 1_000);
        assert!(text.contains("linear  oauth"), "{text}");
        assert!(text.contains("logged in  expires in 60m; refreshable"), "{text}");
        assert!(text.contains("oauth (detected)  needed"), "{text}");
        assert!(text.contains("files   none"), "{text}");
        let json = status_json(&status);
        assert_eq!(json["schema"], "pimcp/auth-status/v1");
        assert_eq!(json["servers"][0]["loggedIn"], true);
    }
}
