//! A planted secret — in the environment (referenced by `${VAR}`), literally in headers and env values, and as the
//! output a `!command` would print — appears in no output of any config or runtime command, human or `--json`, in
//! no log line (at trace level) and in no error message.

use crate::support::Sandbox;

const SECRET: &str = "pl4nted-s3cret-value";

fn planted() -> Sandbox {
    let sb = Sandbox::new()
        .env("PLANTED_TOKEN", SECRET)
        .env("PIMCP_LOG", "trace")
        .env("RUST_BACKTRACE", "1");
    sb.write(
        sb.global(),
        &format!(
            r#"{{
  "mcpServers": {{
    "http": {{
      "url": "https://api.example/mcp?key={SECRET}",
      "headers": {{ "Authorization": "Bearer ${{PLANTED_TOKEN}}", "X-Literal": "{SECRET}", "X-Cmd": "!printf {SECRET}" }},
      "bearerToken": "{SECRET}",
      "oauth": {{ "clientId": "c", "clientSecret": "{SECRET}" }}
    }},
    "stdio": {{
      "command": "server",
      "env": {{ "TOKEN": "${{PLANTED_TOKEN}}", "LITERAL": "{SECRET}", "CMD": "!printf {SECRET}", "MISSING": "${{NOT_SET_VAR}}" }}
    }},
    "broken": {{ "command": "x", "env": {{ "T": 1 }}, "headers": "{SECRET}" }}
  }}
}}"#
        ),
    );
    sb.write(
        sb.project.join(".mcp.json"),
        &format!(r#"{{"mcpServers": {{"proj": {{"command": "p", "env": {{"K": "{SECRET}"}}}}}}}}"#),
    );
    sb
}

#[test]
fn planted_secret_never_appears_in_any_output() {
    let sb = planted();
    let runs: Vec<(Vec<&str>, crate::support::Run)> = [
        vec!["config", "show"],
        vec!["config", "show", "--json"],
        vec!["config", "check"],
        vec!["config", "check", "--json"],
        vec!["config", "import"],
        vec!["config", "import", "--json"],
        vec![],
        vec!["add", "http", "--url", "https://x.example/mcp"],
        vec!["enable", "missing-server"],
        vec!["disable", "stdio"],
        vec!["config", "show", "--json"],
        vec!["status"],
        vec!["status", "--json"],
        vec!["enable", "stdio"],
        vec!["connect", "stdio", "--json"],
        vec!["connect", "proj"],
        vec!["search", "anything", "--json"],
        vec!["call", "stdio_tool", "{}", "--json"],
        vec!["prompts", "--json"],
    ]
    .into_iter()
    .map(|args| {
        let run = sb.run(&args);
        (args, run)
    })
    .collect();
    for (args, run) in &runs {
        assert!(!run.stdout.contains(SECRET), "{args:?} leaked on stdout:\n{run:?}");
        assert!(!run.stderr.contains(SECRET), "{args:?} leaked on stderr:\n{run:?}");
    }
    // The commands did run and say something.
    let show = &runs[0].1;
    assert_eq!(show.code, 0, "{show:?}");
    assert!(
        show.stdout.contains("<redacted>") && show.stdout.contains("Authorization"),
        "{show:?}"
    );
    assert!(show.stdout.contains("${PLANTED_TOKEN}") || show.stdout.contains("<redacted>"));
    let check = &runs[2].1;
    assert_eq!(check.code, 2, "{check:?}");
    assert!(check.stdout.contains("`env.MISSING` uses ${NOT_SET_VAR}"), "{check:?}");
    assert!(check.stdout.contains("server `broken`"), "{check:?}");
    let json = runs[1].1.json();
    let http = json["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "http")
        .unwrap();
    assert_eq!(http["fields"]["bearerToken"]["value"], "<redacted>");
    assert_eq!(http["fields"]["headers"]["value"]["X-Cmd"], "<redacted>");
    assert_eq!(http["fields"]["oauth"]["value"]["clientSecret"], "<redacted>");
    assert_eq!(http["fields"]["url"]["value"], "https://api.example/mcp?key=<redacted>");
    assert_eq!(runs[7].1.code, 1, "adding an existing server fails: {:?}", runs[7].1);
    assert_eq!(runs[8].1.code, 2, "unknown server is a usage error: {:?}", runs[8].1);
    assert_eq!(runs[9].1.code, 0, "{:?}", runs[9].1);
    let connect = &runs[14].1;
    assert_eq!(
        connect.code, 2,
        "a missing variable is a configuration error: {connect:?}"
    );
    assert!(connect.stdout.contains("NOT_SET_VAR"), "{connect:?}");
    assert_eq!(
        runs[15].1.code, 2,
        "an untrusted server does not start: {:?}",
        runs[15].1
    );
    let disabled = std::fs::read_to_string(sb.project.join(".pi/mcp.json")).unwrap();
    assert!(!disabled.contains(SECRET), "disable copied a credential: {disabled}");
}

/// A loopback HTTP server that answers every request `401` with a `WWW-Authenticate` header echoing the
/// `Authorization` header it received, as a careless (or hostile) server might. Returns its URL.
fn echoing_401_server() -> String {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut auth = String::new();
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        match name.to_ascii_lowercase().as_str() {
                            "authorization" => auth = value.trim().to_owned(),
                            "content-length" => length = value.trim().parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                }
                let mut body = vec![0; length];
                let _ = std::io::Read::read_exact(&mut reader, &mut body);
                let echoed = format!("token {auth} rejected");
                let answer = format!(
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"{echoed}\", error=\"invalid_token\", \
                     error_description=\"{echoed}\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{echoed}",
                    echoed.len()
                );
                let mut stream = stream;
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    url
}

#[test]
fn secrets_in_urls_and_echoed_auth_headers_never_reach_stderr_or_stdout() {
    // A port nothing listens on: the connect is refused and reqwest's error names the URL, query included.
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let echo = echoing_401_server();
    for level in [None, Some("trace")] {
        let mut sb = Sandbox::new().env("PLANTED_TOKEN", SECRET);
        if let Some(level) = level {
            sb = sb.env("PIMCP_LOG", level);
        }
        sb.write(
            sb.global(),
            &format!(
                r#"{{"mcpServers": {{
  "refused": {{ "url": "http://user:{SECRET}@127.0.0.1:{refused}/mcp?api_key={SECRET}&v=1", "lifecycle": "eager" }},
  "echo": {{ "url": "{echo}?k={SECRET}", "bearerToken": "${{PLANTED_TOKEN}}" }},
  "echo-header": {{ "url": "{echo}", "headers": {{ "X-Api-Key": "{SECRET}", "Authorization": "Token ${{PLANTED_TOKEN}}" }} }}
}}}}"#
            ),
        );
        for args in [
            vec!["connect", "refused"],
            vec!["connect", "refused", "--json"],
            vec!["connect", "echo"],
            vec!["connect", "echo", "--json"],
            vec!["connect", "echo-header"],
            vec!["call", "echo_tool", "{}"],
            vec!["status", "--json"],
        ] {
            let run = sb.run(&args);
            assert!(
                !run.stdout.contains(SECRET),
                "{level:?} {args:?} leaked on stdout:\n{run:?}"
            );
            assert!(
                !run.stderr.contains(SECRET),
                "{level:?} {args:?} leaked on stderr:\n{run:?}"
            );
            if args[0] != "status" {
                assert_ne!(run.code, 0, "{args:?} cannot succeed: {run:?}");
            }
        }
    }
}
