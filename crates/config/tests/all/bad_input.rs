//! Every kind of bad input is reported (file, position or server and field, never the value) and never stops the
//! other servers from loading.

use pimcp_config::{Availability, Severity};

use crate::support::{Sandbox, all_text, problems_of, server};

/// A global file with one good server plus `bad`, and a second good file.
fn with_bad_server(bad: &str) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        &format!(r#"{{"mcpServers": {{"good": {{"command": "ok"}}, "bad": {bad}}}}}"#),
    );
    sb.write(
        sb.home.join(".agents/mcp.json"),
        r#"{"mcpServers": {"other": {"url": "https://other.example/mcp"}}}"#,
    );
    sb
}

fn assert_bad_server_skipped(sb: &Sandbox, field: Option<&str>, secret: &str) -> String {
    let config = sb.load();
    assert!(config.server("bad").is_none(), "bad server was listed");
    server(&config, "good");
    server(&config, "other");
    let problems = problems_of(&config, "bad");
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let problem = problems[0];
    assert_eq!(problem.severity, Severity::Error);
    assert_eq!(problem.field.as_deref(), field);
    assert_eq!(problem.path.as_deref(), Some(sb.global().as_path()));
    let text = problem.to_string();
    assert!(!all_text(&config).contains(secret), "value leaked: {text}");
    text
}

#[test]
fn invalid_json_names_file_line_and_column_and_other_files_load() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        "{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\" }\n    \"b\": {}\n  }\n}\n",
    );
    sb.write(
        sb.home.join(".agents/mcp.json"),
        r#"{"mcpServers": {"other": {"command": "ok"}}}"#,
    );
    let config = sb.load();
    server(&config, "other");
    assert!(config.server("a").is_none());
    let problem = config
        .problems
        .iter()
        .find(|p| p.position.is_some())
        .expect("a positioned problem");
    assert_eq!(problem.path.as_deref(), Some(sb.global().as_path()));
    assert_eq!(problem.position, Some((4, 5)));
    assert_eq!(problem.severity, Severity::Error);
    let text = problem.to_string();
    assert!(
        text.starts_with(&format!("{}:4:5: not valid JSON", sb.global().display())),
        "{text}"
    );
    let source = config
        .sources
        .iter()
        .find(|s| s.origin.path() == Some(sb.global().as_path()))
        .unwrap();
    assert!(source.exists && !source.loaded);
}

#[test]
fn server_that_is_not_an_object() {
    let sb = with_bad_server(r#""npx some-secret-server""#);
    let text = assert_bad_server_skipped(&sb, None, "some-secret-server");
    assert!(text.contains("server `bad`: the entry is not an object"), "{text}");
}

#[test]
fn field_of_wrong_type() {
    let sb = with_bad_server(r#"{"command": "x", "env": {"TOKEN": 12345678}}"#);
    let text = assert_bad_server_skipped(&sb, Some("env"), "12345678");
    assert!(
        text.contains("`env`: expected an object whose values are strings"),
        "{text}"
    );
    let sb = with_bad_server(r#"{"command": "x", "disabled": "sekrit-yes"}"#);
    assert_bad_server_skipped(&sb, Some("disabled"), "sekrit-yes");
}

#[test]
fn both_command_and_url() {
    let sb = with_bad_server(r#"{"command": "x", "url": "https://token-in-url.example/mcp"}"#);
    let text = assert_bad_server_skipped(&sb, Some("url"), "token-in-url");
    assert!(text.contains("`command` and `url` are both set"), "{text}");
}

#[test]
fn unknown_type() {
    let sb = with_bad_server(r#"{"url": "https://h.example/mcp", "type": "websocket-secret"}"#);
    let text = assert_bad_server_skipped(&sb, Some("type"), "websocket-secret");
    assert!(
        text.contains("expected one of `stdio`, `http`, `streamable-http`, `sse`"),
        "{text}"
    );
}

#[test]
fn type_conflicting_with_fields() {
    let sb = with_bad_server(r#"{"command": "x", "type": "http"}"#);
    assert_bad_server_skipped(&sb, Some("type"), "\"x\"");
}

#[test]
fn lifecycle_not_one_of_four() {
    let sb = with_bad_server(r#"{"command": "x", "lifecycle": "always-on-secret"}"#);
    let text = assert_bad_server_skipped(&sb, Some("lifecycle"), "always-on-secret");
    assert!(
        text.contains("`lazy`, `eager`, `keep-alive`, `lazy-keep-alive`"),
        "{text}"
    );
}

#[test]
fn no_transport_after_merge() {
    let sb = with_bad_server(r#"{"description": "only an overlay", "disabled": true}"#);
    let text = assert_bad_server_skipped(&sb, None, "only an overlay");
    assert!(text.contains("has no `command`, `url` or `socket`"), "{text}");
}

#[test]
fn missing_variable_lists_the_server_with_a_config_error() {
    let mut sb = Sandbox::new();
    sb.env.insert("PRESENT", "present-value-1234");
    sb.write(
        sb.global(),
        r#"{"mcpServers": {
            "gh": {"command": "gh-mcp", "args": ["--user", "${PRESENT}"], "env": {"API_KEY": "${GITHUB_TOKEN}"}},
            "defaulted": {"command": "x", "env": {"A": "${NOPE:-fallback}", "B": "${NOPE:-}"}},
            "good": {"command": "ok"}
        }}"#,
    );
    let config = sb.load();
    let gh = server(&config, "gh");
    let Availability::ConfigError { message } = &gh.availability else {
        panic!("{:?}", gh.availability)
    };
    assert_eq!(message, "`env.API_KEY` uses ${GITHUB_TOKEN}, which is not set");
    let problem = problems_of(&config, "gh")[0];
    assert_eq!(problem.severity, Severity::Error);
    let problems: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
    assert!(!problems.join("\n").contains("present-value-1234"), "{problems:?}");
    assert_eq!(server(&config, "defaulted").availability, Availability::Available);
    assert_eq!(server(&config, "good").availability, Availability::Available);
}

#[test]
fn unreadable_file_is_skipped_and_others_load() {
    // Tests may run as root, which reads any file whatever its mode: a directory where the file should be fails
    // for everyone.
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.home.join(".agents/mcp.json")).unwrap();
    sb.write(sb.global(), r#"{"mcpServers": {"good": {"command": "ok"}}}"#);
    let config = sb.load();
    server(&config, "good");
    let problem = config
        .problems
        .iter()
        .find(|p| p.path.as_deref() == Some(sb.home.join(".agents/mcp.json").as_path()));
    let problem = problem.expect("a problem for the unreadable file");
    assert_eq!(problem.severity, Severity::Error);
    assert!(problem.message.contains("directory"), "{problem}");
}

#[test]
fn toml_import_syntax_error_is_positioned_and_others_load() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".codex/config.toml"),
        "[mcp_servers.x]\ncommand = \"x\"\nargs = [\"unterminated\n",
    );
    sb.write(
        sb.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"from-cursor": {"command": "c"}}}"#,
    );
    sb.write(
        sb.global(),
        r#"{"imports": ["codex", "cursor"], "mcpServers": {"good": {"command": "ok"}}}"#,
    );
    let config = sb.load();
    server(&config, "good");
    server(&config, "from-cursor");
    let path = sb.home.join(".codex/config.toml");
    let problem = config
        .problems
        .iter()
        .find(|p| p.path.as_deref() == Some(path.as_path()))
        .expect("toml problem");
    assert_eq!(problem.severity, Severity::Error);
    let (line, column) = problem.position.expect("a position");
    assert!(line >= 3 && column >= 1, "{problem}");
    assert!(problem.message.contains("not valid TOML"), "{problem}");
}

#[test]
fn invalid_override_keeps_the_server_listed_but_not_connectable() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".config/mcp/mcp.json"),
        r#"{"mcpServers": {"gh": {"command": "gh"}}}"#,
    );
    sb.write(sb.global(), r#"{"mcpServers": {"gh": {"excludeTools": "delete_*"}}}"#);
    let config = sb.load();
    let gh = server(&config, "gh");
    let Availability::ConfigError { message } = &gh.availability else {
        panic!("{:?}", gh.availability)
    };
    assert!(message.contains("is invalid (`excludeTools`)"), "{message}");
}

#[test]
fn wrong_root_shapes_fail_the_file() {
    let sb = Sandbox::new();
    sb.write(sb.global(), r#"{"mcpServers": ["a"]}"#);
    sb.write(
        sb.home.join(".agents/mcp.json"),
        r#"{"mcpServers": {"ok": {"command": "x"}}, "settings": {"idleTimeout": "x", "toolPrefix": "none"}}"#,
    );
    let config = sb.load();
    server(&config, "ok");
    assert!(
        config
            .problems
            .iter()
            .any(|p| p.field.as_deref() == Some("mcpServers") && p.is_error())
    );
    assert!(
        config
            .problems
            .iter()
            .any(|p| p.field.as_deref() == Some("settings.idleTimeout"))
    );
    assert_eq!(
        config.settings.tool_prefix,
        pimcp_config::ToolPrefix::None,
        "the other settings still apply"
    );
}

#[test]
fn empty_and_comment_only_files_are_fine() {
    let sb = Sandbox::new();
    sb.write(sb.global(), "// nothing yet\n");
    sb.write(sb.home.join(".agents/mcp.json"), "");
    let config = sb.load();
    assert!(config.problems.is_empty(), "{:?}", config.problems);
}
