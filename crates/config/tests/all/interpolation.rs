//! Interpolation in the fields docs/configuration.md (section 7) lists, `~` in path fields, and what stays literal.

use std::path::PathBuf;

use pimcp_config::{Availability, Secret, SecretValue, Transport};

use crate::support::{Sandbox, server};

#[test]
fn fields_are_interpolated() {
    let mut sb = Sandbox::new();
    sb.env
        .insert("HOST", "h.example")
        .insert("TOKEN", "t0k")
        .insert("BIN", "srv");
    sb.write(
        sb.global(),
        r#"{"mcpServers": {
            "http": {"url": "https://${HOST}/mcp?x=$env:TOKEN", "headers": {"Authorization": "Bearer $TOKEN", "X": "{env:HOST}", "Y": "$$TOKEN"}},
            "stdio": {"command": "~/bin/${BIN}", "args": ["$TOKEN", "${TOKEN}", "~/not-expanded"], "cwd": "~/work", "env": {"A": "pre-$TOKEN"}},
            "sock": {"socket": "~/run/${BIN}.sock"},
            "rel": {"command": "x", "cwd": "sub/dir"}
        }}"#,
    );
    let config = sb.load();
    let Transport::Http(http) = &server(&config, "http").transport else {
        panic!()
    };
    assert_eq!(http.url, "https://h.example/mcp?x=t0k");
    assert_eq!(
        http.headers["Authorization"],
        SecretValue::Plain(Secret::new("Bearer t0k"))
    );
    assert_eq!(http.headers["X"], SecretValue::Plain(Secret::new("h.example")));
    assert_eq!(http.headers["Y"], SecretValue::Plain(Secret::new("$TOKEN")));
    let Transport::Stdio(stdio) = &server(&config, "stdio").transport else {
        panic!()
    };
    assert_eq!(stdio.command, sb.home.join("bin/srv").to_string_lossy());
    assert_eq!(
        stdio.args,
        ["$TOKEN", "t0k", "~/not-expanded"],
        "bare $VAR only in headers/env; no ~ in args"
    );
    assert_eq!(stdio.cwd, Some(sb.home.join("work")));
    assert_eq!(stdio.env["A"], SecretValue::Plain(Secret::new("pre-t0k")));
    let Transport::Socket(socket) = &server(&config, "sock").transport else {
        panic!()
    };
    assert_eq!(socket.path, sb.home.join("run/srv.sock"));
    let Transport::Stdio(rel) = &server(&config, "rel").transport else {
        panic!()
    };
    assert_eq!(
        rel.cwd,
        Some(sb.project.join("sub/dir")),
        "relative cwd resolves against the project"
    );
}

#[test]
fn missing_variable_in_url_names_field_and_variable() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"h": {"url": "https://${API_HOST}/mcp"}, "j": {"url": "ftp://nope"}}}"#,
    );
    let config = sb.load();
    assert_eq!(
        server(&config, "h").availability,
        Availability::ConfigError {
            message: "`url` uses ${API_HOST}, which is not set".into()
        }
    );
    assert!(
        matches!(&server(&config, "j").availability, Availability::ConfigError { message } if message.contains("http"))
    );
}

#[test]
fn disabled_server_with_missing_variable_is_a_warning() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"h": {"url": "https://${API_HOST}/mcp", "disabled": true}}}"#,
    );
    let config = sb.load();
    assert_eq!(server(&config, "h").availability, Availability::Disabled);
    assert!(config.problems.iter().all(|p| !p.is_error()), "{:?}", config.problems);
}

#[test]
fn settings_paths_expand() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"settings": {"agentPluginPaths": ["~/plugins/a", "rel/b", "/abs/c"], "trace": {"file": "~/t.jsonl"}}}"#,
    );
    let config = sb.load();
    assert_eq!(
        config.settings.agent_plugin_paths,
        [
            sb.home.join("plugins/a"),
            sb.project.join("rel/b"),
            PathBuf::from("/abs/c")
        ]
    );
    assert_eq!(config.settings.trace.file, Some(sb.home.join("t.jsonl")));
}
