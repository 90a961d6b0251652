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
