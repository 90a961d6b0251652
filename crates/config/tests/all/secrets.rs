//! `!command` values: classified at load (never run), resolved on demand with every failure named by context.

use std::time::Duration;

use pimcp_config::{AuthConfig, ResolveOptions, SecretError, SecretValue, Transport};

use crate::support::{Sandbox, server};

#[test]
fn commands_are_never_run_at_load() {
    let sb = Sandbox::new();
    let marker = sb.root.path().join("ran");
    sb.write(
        sb.global(),
        &format!(
            r#"{{"mcpServers": {{
                "h": {{"url": "https://h.example/mcp", "headers": {{"Authorization": "!touch '{m}'"}}, "bearerToken": "!touch '{m}'"}},
                "s": {{"command": "x", "env": {{"A": "!touch '{m}'", "B": "!!literal", "C": "$!also-literal"}}}}
            }}}}"#,
            m = marker.display()
        ),
    );
    let config = sb.load();
    let _ = pimcp_config::explain(&sb.opts());
    assert!(!marker.exists(), "a !command ran during load");
    let Transport::Stdio(stdio) = &server(&config, "s").transport else {
        panic!()
    };
    assert!(stdio.env["A"].is_command());
    assert_eq!(
        stdio.env["B"],
        SecretValue::Plain(pimcp_config::Secret::new("!literal"))
    );
    assert_eq!(
        stdio.env["C"],
        SecretValue::Plain(pimcp_config::Secret::new("!also-literal"))
    );
    let h = server(&config, "h");
    let Transport::Http(http) = &h.transport else { panic!() };
    assert!(http.headers["Authorization"].is_command());
    assert!(matches!(
        &h.auth,
        AuthConfig::Bearer {
            token: Some(SecretValue::Command(_)),
            ..
        }
    ));
    // Debug never shows a command or value.
    assert!(!format!("{config:?}").contains("touch"));
}

fn env_secret(command: &str) -> SecretValue {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        &serde_json::json!({"mcpServers": {"s": {"command": "x", "env": {"TOKEN": format!("!{command}")}}}})
            .to_string(),
    );
    let config = sb.load();
    let Transport::Stdio(stdio) = &server(&config, "s").transport else {
        panic!()
    };
    stdio.env["TOKEN"].clone()
}

#[test]
fn resolve_returns_trimmed_output() {
    assert_eq!(
        env_secret("printf '  s3cr3t\\n\\n'")
            .resolve("env.TOKEN")
            .unwrap()
            .expose(),
        "s3cr3t"
    );
}

#[test]
fn command_that_times_out() {
    let options = ResolveOptions {
        timeout: Duration::from_millis(300),
        ..ResolveOptions::default()
    };
    let err = env_secret("sleep 30").resolve_with("env.TOKEN", &options).unwrap_err();
    assert!(
        matches!(err, SecretError::Timeout { ref context, .. } if context == "env.TOKEN"),
        "{err}"
    );
}

#[test]
fn command_that_exits_non_zero() {
    let err = env_secret("echo planted-output; exit 7")
        .resolve("env.TOKEN")
        .unwrap_err();
    assert_eq!(err.to_string(), "`env.TOKEN` command exited with code 7");
}

#[test]
fn command_that_prints_nothing() {
    let err = env_secret("true").resolve("env.TOKEN").unwrap_err();
    assert_eq!(err.to_string(), "`env.TOKEN` command returned empty output");
}

#[test]
fn command_that_prints_too_much() {
    let err = env_secret("yes planted-output | head -c 100000")
        .resolve("env.TOKEN")
        .unwrap_err();
    assert_eq!(err.to_string(), "`env.TOKEN` command output exceeded 64 KiB");
    assert!(!format!("{err:?}").contains("planted-output"));
}
