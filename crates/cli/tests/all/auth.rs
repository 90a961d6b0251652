//! `pimcp-run auth …` against a real `mcp-fixture --http --oauth` (its authorization server approves at once), with
//! `settings.tokenStore: "file"` in the sandbox's data dir: status before and after, a login finished by pasting the
//! redirect on stdin, a login finished by `auth complete` from a second process (with the redirect URL, and with a
//! bare code the first process never sees: the second process adopts the persisted pending login), a later command
//! using the stored token, and logout.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Sandbox, poll_until};

struct Fixture(Child);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn oauth_fixture(sb: &Sandbox) -> (Fixture, String) {
    let port_file = sb.root.path().join("fixture.port");
    let child = Command::new(mcp_fixture::bin_path())
        .args(["--http", "127.0.0.1:0", "--oauth", "--port-file"])
        .arg(&port_file)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let fixture = Fixture(child);
    assert!(
        poll_until(Duration::from_secs(20), || std::fs::read_to_string(&port_file)
            .is_ok_and(|p| p.trim().parse::<u16>().is_ok())),
        "the fixture never wrote its port"
    );
    let port = std::fs::read_to_string(&port_file).unwrap().trim().to_owned();
    (fixture, format!("http://127.0.0.1:{port}/mcp"))
}

/// One HTTP/1.1 GET without following redirects: status and `Location`.
fn get(url: &str) -> (u16, Option<String>) {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut stream = TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
    let location = response
        .lines()
        .find_map(|l| l.strip_prefix("location: ").or_else(|| l.strip_prefix("Location: ")))
        .map(|l| l.trim().to_owned());
    (status, location)
}

/// `pimcp-run auth login web` with stdin and stderr piped; returns the child once it printed the URL.
fn start_login(sb: &Sandbox) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pimcp-run"))
        .args(["auth", "login", "web"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &sb.home)
        .env("PIMCP_DATA_DIR", &sb.data)
        .env("BROWSER", "true")
        .current_dir(&sb.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut url = None;
    let mut seen = String::new();
    for _ in 0..50 {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
        if let Some(found) = line.trim().strip_prefix("http://").map(|u| format!("http://{u}")) {
            url = Some(found);
            break;
        }
    }
    let url = url.unwrap_or_else(|| panic!("no authorization URL printed:\n{seen}"));
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, url)
}

fn finish(child: Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn web_status(sb: &Sandbox) -> Value {
    let run = sb.run(&["auth", "status", "--json"]);
    let json = run.json();
    assert_eq!(json["schema"], "pimcp/auth-status/v1", "{run:?}");
    json["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "web")
        .cloned()
        .unwrap()
}

#[test]
fn login_by_paste_and_by_auth_complete_then_a_call_then_logout() {
    let sb = Sandbox::new();
    let (_fixture, url) = oauth_fixture(&sb);
    let config = json!({"settings": {"tokenStore": "file"}, "mcpServers": {
        "web": {"url": url, "protocol": "legacy"},
        "local": {"command": mcp_fixture::bin_path()},
    }});
    sb.write(sb.global(), &config.to_string());

    let before = web_status(&sb);
    assert_eq!(before["mode"], "auto");
    assert_eq!(before["loggedIn"], false);
    let table = sb.run(&["auth", "status"]);
    assert!(
        table.stdout.contains("local") && table.stdout.contains("none"),
        "{table:?}"
    );

    // Headless: paste the URL the browser was sent to.
    let (mut child, authorize) = start_login(&sb);
    let (status, location) = get(&authorize);
    assert_eq!(status, 302);
    let location = location.unwrap();
    writeln!(child.stdin.as_mut().unwrap(), "{location}").unwrap();
    let (code, stdout) = finish(child);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("logged in to web"), "{stdout}");
    let after = web_status(&sb);
    assert_eq!(after["loggedIn"], true);
    assert_eq!(after["hasRefreshToken"], true);
    assert!(
        !after
            .to_string()
            .contains(location.split("code=").nth(1).unwrap().split('&').next().unwrap())
    );

    // A later process uses the stored token.
    let call = sb.run(&["call", "web_echo", r#"{"text": "with a stored token"}"#]);
    assert_eq!(call.code, 0, "{call:?}");
    assert!(call.stdout.contains("with a stored token"), "{call:?}");

    // Browser elsewhere, second shell here: `auth complete` finishes the login the first process started.
    let (child, authorize) = start_login(&sb);
    let location = get(&authorize).1.unwrap();
    let complete = sb.run(&["auth", "complete", "web", &location]);
    assert_eq!(complete.code, 0, "{complete:?}");
    assert!(complete.stdout.contains("logged in to web"), "{complete:?}");
    let (code, stdout) = finish(child);
    assert_eq!(code, 0, "{stdout}");

    let nobody = sb.run(&["auth", "complete", "web", "http://127.0.0.1:9/callback?code=c&state=s"]);
    assert_ne!(nobody.code, 0, "{nobody:?}");
    assert!(nobody.stderr.contains("no login is waiting"), "{nobody:?}");
    assert!(!nobody.stderr.contains("code=c"), "the code is not echoed: {nobody:?}");
    let not_loopback = sb.run(&["auth", "complete", "web", "https://example.com/cb?code=c"]);
    assert_eq!(not_loopback.code, 2, "{not_loopback:?}");
    assert!(
        not_loopback.stderr.contains("no login of `web` is pending"),
        "{not_loopback:?}"
    );

    let logout = sb.run(&["auth", "logout", "web"]);
    assert_eq!(logout.code, 0, "{logout:?}");
    assert_eq!(web_status(&sb)["loggedIn"], false);
    let refused = sb.run(&["auth", "login", "local"]);
    assert_ne!(refused.code, 0, "a stdio server has no login: {refused:?}");
}

/// One query parameter of a URL (the fake's codes and states need no percent-decoding).
fn query_param(url: &str, name: &str) -> String {
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no `{name}` in the URL"))
        .to_owned()
}

/// The files of persisted pending logins in the sandbox's data dir.
fn pending_files(sb: &Sandbox) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(sb.data.join("mcp-oauth").join("pending")) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_bare_code_completes_from_another_process_and_the_waiting_login_exits_0() {
    let sb = Sandbox::new();
    let (_fixture, url) = oauth_fixture(&sb);
    let config = json!({"settings": {"tokenStore": "file"}, "mcpServers": {
        "web": {"url": url, "protocol": "legacy", "auth": "oauth"},
    }});
    sb.write(sb.global(), &config.to_string());

    let (mut child, authorize) = start_login(&sb);
    // The login is persisted for other processes: one private file, no secret on any output.
    let files = pending_files(&sb);
    assert_eq!(files.len(), 1, "{files:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let state = query_param(&authorize, "state");
    let stored = std::fs::read_to_string(&files[0]).unwrap();
    assert!(stored.contains(&state), "the state is bound to the persisted login");

    // The browser ran elsewhere; the user copies only the code. The first process never receives it.
    let location = get(&authorize).1.unwrap();
    let code = query_param(&location, "code");
    let complete = sb.run(&["auth", "complete", "web", &code]);
    assert_eq!(complete.code, 0, "{complete:?}");
    assert!(complete.stdout.contains("logged in to web"), "{complete:?}");
    for text in [&complete.stdout, &complete.stderr] {
        assert!(!text.contains(&code) && !text.contains(&state), "{complete:?}");
    }

    // The waiting login notices the stored token and exits 0 by itself.
    let exited = poll_until(Duration::from_secs(30), || child.try_wait().unwrap().is_some());
    if !exited {
        let _ = child.kill();
    }
    assert!(exited, "the waiting login did not notice the login completed elsewhere");
    let (status, stdout) = finish(child);
    assert_eq!(status, 0, "{stdout}");
    assert!(stdout.contains("logged in to web"), "{stdout}");
    assert!(
        pending_files(&sb).is_empty(),
        "the completed login is no longer persisted"
    );
    assert_eq!(web_status(&sb)["loggedIn"], true);

    // The same code again: nothing pending any more.
    let again = sb.run(&["auth", "complete", "web", &code]);
    assert_ne!(again.code, 0, "{again:?}");
    let call = sb.run(&["call", "web_echo", r#"{"text": "after a two-process login"}"#]);
    assert_eq!(call.code, 0, "{call:?}");
}
