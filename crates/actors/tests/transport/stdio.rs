//! stdio: protocol eras, cwd, env inheritance, secrets, npx resolution and startup failures.

use std::time::Duration;

use pimcp_actors::{ConnectError, Era, TransportKind};
use pimcp_config::{ProtocolMode, SecretValue, Transport};

use super::support::*;

#[tokio::test]
async fn legacy_protocol_uses_initialize() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = stdio_server("legacy", &[]);
    server.protocol = ProtocolMode::Legacy;
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
    assert_eq!(conn.era, Era::Legacy);
    assert_eq!(conn.transport, TransportKind::Stdio);
    assert_eq!(conn.server_info.as_ref().map(|i| i.name.as_str()), Some("mcp-fixture"));
    assert!(conn.instructions.as_deref().unwrap_or("").contains("mcp-fixture"));
    assert!(conn.guarded);
    let me = whoami(&conn, None).await;
    assert_eq!(me["protocolVersion"], conn.protocol_version.as_str());
    assert_ne!(conn.protocol_version, "2026-07-28");
    // The server is our direct child.
    assert_eq!(me["ppid"].as_u64(), Some(u64::from(std::process::id())));
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn auto_protocol_negotiates_the_stateless_era() {
    let dir = tempfile::tempdir().unwrap();
    let conn = pimcp_actors::connect(spec(stdio_server("auto", &[]), dir.path()), ())
        .await
        .unwrap();
    assert_eq!(conn.era, Era::Stateless);
    assert_eq!(conn.protocol_version, "2026-07-28");
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn auto_protocol_falls_back_to_initialize_for_legacy_servers() {
    let dir = tempfile::tempdir().unwrap();
    let conn = pimcp_actors::connect(spec(stdio_server("auto-legacy", &["--legacy-only"]), dir.path()), ())
        .await
        .unwrap();
    assert_eq!(conn.era, Era::Legacy);
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_remembered_legacy_era_skips_discover() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.jsonl");
    let mut s = spec(
        stdio_server("hinted", &["--event-log", log.to_str().unwrap()]),
        dir.path(),
    );
    s.era_hint = Some(Era::Legacy);
    let conn = pimcp_actors::connect(s, ()).await.unwrap();
    assert_eq!(conn.era, Era::Legacy);
    conn.close(Duration::from_secs(2)).await;
    let events = std::fs::read_to_string(&log).unwrap();
    assert!(events.contains(r#""event":"initialize""#), "{events}");
    assert!(!events.contains(r#""event":"discover""#), "{events}");
}

#[tokio::test]
async fn pinned_2026_fails_against_a_legacy_only_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = stdio_server("pinned", &["--legacy-only"]);
    server.protocol = ProtocolMode::Stateless20260728;
    let err = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap_err();
    assert!(matches!(err, ConnectError::Protocol { .. }), "{err}");
    assert!(err.to_string().starts_with("server `pinned`"), "{err}");
    assert!(err.to_string().contains("2026-07-28"), "{err}");
}

#[tokio::test]
async fn pinned_2026_connects_to_a_modern_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = stdio_server("pinned-ok", &[]);
    server.protocol = ProtocolMode::Stateless20260728;
    let conn = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap();
    assert_eq!(conn.era, Era::Stateless);
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn cwd_defaults_to_the_project_dir_and_can_be_set() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().canonicalize().unwrap();
    let conn = pimcp_actors::connect(spec(stdio_server("cwd", &[]), &project), ())
        .await
        .unwrap();
    assert_eq!(whoami(&conn, None).await["cwd"], project.to_str().unwrap());
    conn.close(Duration::from_secs(2)).await;

    let sub = project.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut t = stdio_transport(&[]);
    t.cwd = Some(sub.clone());
    let conn = pimcp_actors::connect(spec(server("cwd2", Transport::Stdio(t)), &project), ())
        .await
        .unwrap();
    assert_eq!(whoami(&conn, None).await["cwd"], sub.to_str().unwrap());
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_secret_command_runs_in_the_servers_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().canonicalize().unwrap();
    let sub = project.join("server-dir");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("token.txt"), "from-the-server-dir").unwrap();
    std::fs::write(project.join("token.txt"), "from-the-project-dir").unwrap();
    // A relative path in the command: it reads the file of the directory it runs in.
    let mut t = stdio_transport(&[]);
    t.env.insert("TOK".into(), SecretValue::Command("cat token.txt".into()));
    t.cwd = Some(sub);
    let conn = pimcp_actors::connect(spec(server("in-cwd", Transport::Stdio(t)), &project), ())
        .await
        .unwrap();
    // The fixture reports a variable's length, never its value: 19 and 20 bytes tell the two files apart.
    assert_eq!(
        whoami(&conn, Some("TOK")).await["env"]["length"],
        "from-the-server-dir".len()
    );
    conn.close(Duration::from_secs(2)).await;

    // Without `cwd`, the project directory.
    let mut t = stdio_transport(&[]);
    t.env.insert("TOK".into(), SecretValue::Command("cat token.txt".into()));
    let conn = pimcp_actors::connect(spec(server("in-project", Transport::Stdio(t)), &project), ())
        .await
        .unwrap();
    assert_eq!(
        whoami(&conn, Some("TOK")).await["env"]["length"],
        "from-the-project-dir".len()
    );
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_missing_cwd_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = stdio_transport(&[]);
    t.cwd = Some(dir.path().join("nope"));
    let err = pimcp_actors::connect(spec(server("nocwd", Transport::Stdio(t)), dir.path()), ())
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::Config { .. }), "{err}");
    assert!(err.to_string().contains("nope"), "{err}");
    assert!(!err.is_transient());
}

#[tokio::test]
async fn an_unknown_command_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = stdio_transport(&[]);
    t.command = "pimcp-no-such-program".into();
    let err = pimcp_actors::connect(spec(server("nocmd", Transport::Stdio(t)), dir.path()), ())
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("pimcp-no-such-program"), "{err}");
}

#[tokio::test]
async fn env_overlay_and_inheritance() {
    let dir = tempfile::tempdir().unwrap();
    // cargo sets CARGO_MANIFEST_DIR for test runs, so our environment has it.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let mut t = stdio_transport(&[]);
    t.env.insert("PIMCP_TEST_VAR".into(), plain("12345"));
    let conn = pimcp_actors::connect(spec(server("env", Transport::Stdio(t.clone())), dir.path()), ())
        .await
        .unwrap();
    let me = whoami(&conn, Some("PIMCP_TEST_VAR")).await;
    assert_eq!(
        (me["env"]["set"].as_bool(), me["env"]["length"].as_u64()),
        (Some(true), Some(5))
    );
    assert_eq!(whoami(&conn, Some("CARGO_MANIFEST_DIR")).await["env"]["set"], true);
    conn.close(Duration::from_secs(2)).await;

    t.inherit_env = false;
    let conn = pimcp_actors::connect(spec(server("env-min", Transport::Stdio(t)), dir.path()), ())
        .await
        .unwrap();
    assert_eq!(whoami(&conn, Some("CARGO_MANIFEST_DIR")).await["env"]["set"], false);
    assert_eq!(whoami(&conn, Some("PATH")).await["env"]["set"], true);
    assert_eq!(whoami(&conn, Some("PIMCP_TEST_VAR")).await["env"]["set"], true);
    conn.close(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn command_secrets_resolve_at_connect_and_stay_out_of_errors() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cr3t-from-command-4242";
    let mut t = stdio_transport(&[]);
    t.env
        .insert("API_TOKEN".into(), SecretValue::Command(format!("printf {secret}")));
    let conn = pimcp_actors::connect(spec(server("sec", Transport::Stdio(t)), dir.path()), ())
        .await
        .unwrap();
    let me = whoami(&conn, Some("API_TOKEN")).await;
    assert_eq!(me["env"]["length"].as_u64(), Some(secret.len() as u64));
    conn.close(Duration::from_secs(2)).await;

    // A server that prints its secret to stderr and dies: the error shows the tail, redacted.
    let mut t = pimcp_config::StdioTransport::new(
        "sh",
        vec!["-c".into(), "echo \"token is $API_TOKEN\" >&2; exit 4".into()],
    );
    t.env = [("API_TOKEN".to_owned(), SecretValue::Command(format!("printf {secret}")))]
        .into_iter()
        .collect();
    let err = pimcp_actors::connect(spec(server("leaky", Transport::Stdio(t)), dir.path()), ())
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(
        matches!(err, ConnectError::ExitedAtStart { code: Some(4), .. }),
        "{text}"
    );
    assert!(text.contains("token is <redacted>"), "{text}");
    assert!(!text.contains(secret), "{text}");

    // A failing secret command is a secret error naming the field, not the command's output.
    let mut t = stdio_transport(&[]);
    t.env.insert(
        "API_TOKEN".into(),
        SecretValue::Command("echo nope-output; exit 3".into()),
    );
    let err = pimcp_actors::connect(spec(server("badsec", Transport::Stdio(t)), dir.path()), ())
        .await
        .unwrap_err();
    assert!(matches!(err, ConnectError::Secret { .. }), "{err}");
    assert!(err.to_string().contains("env.API_TOKEN"), "{err}");
    assert!(!err.to_string().contains("nope-output"), "{err}");
}

#[tokio::test]
async fn exit_at_start_reports_code_and_stderr_tail() {
    let dir = tempfile::tempdir().unwrap();
    let err = pimcp_actors::connect(spec(stdio_server("dies", &["--exit-at-start"]), dir.path()), ())
        .await
        .unwrap_err();
    match &err {
        ConnectError::ExitedAtStart { code, stderr, .. } => {
            assert_eq!(*code, Some(2));
            assert!(!stderr.trim().is_empty(), "no stderr tail");
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.is_transient());
}

#[tokio::test]
async fn hang_at_start_times_out_and_the_child_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut server = stdio_server("hangs", &["--hang-at-start", "--pid-file", pid_file.to_str().unwrap()]);
    server.timeouts.startup = Duration::from_secs(2);
    let err = pimcp_actors::connect(spec(server, dir.path()), ()).await.unwrap_err();
    assert!(
        matches!(err, ConnectError::StartupTimeout { after, .. } if after == Duration::from_secs(2)),
        "{err}"
    );
    let pid = read_pid(&pid_file).await;
    assert!(
        eventually(Duration::from_secs(5), || is_dead(pid)).await,
        "server {pid} still alive"
    );
}

#[tokio::test]
async fn cancel_aborts_a_hanging_connect_and_kills_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let s = spec(
        stdio_server(
            "cancelled",
            &["--hang-at-start", "--pid-file", pid_file.to_str().unwrap()],
        ),
        dir.path(),
    );
    let cancel = s.cancel.clone();
    let task = tokio::spawn(pimcp_actors::connect(s, ()));
    let pid = read_pid(&pid_file).await;
    cancel.cancel();
    let err = task.await.unwrap().unwrap_err();
    assert!(matches!(err, ConnectError::Cancelled { .. }), "{err}");
    assert!(
        eventually(Duration::from_secs(5), || is_dead(pid)).await,
        "server {pid} still alive"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn npx_commands_run_the_installed_package_binary() {
    let dir = tempfile::tempdir().unwrap();
    let npm_cache = dir.path().join("npm-cache");
    let pkg = npm_cache.join("_npx/0123abcd/node_modules/@acme/fixture-mcp");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"@acme/fixture-mcp","version":"1.2.3","bin":{"fixture-mcp":"bin/run"}}"#,
    )
    .unwrap();
    let script = pkg.join("bin/run");
    std::fs::write(&script, format!("#!/bin/sh\nexec '{}' \"$@\"\n", fixture())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let mut t = pimcp_config::StdioTransport::new(
        "npx",
        vec![
            "-y".into(),
            "@acme/fixture-mcp@1.2.3".into(),
            "--name".into(),
            "resolved-by-pimcp".into(),
        ],
    );
    t.env = [("NPM_CONFIG_CACHE".to_owned(), plain(npm_cache.to_str().unwrap()))]
        .into_iter()
        .collect();
    let mut s = spec(server("npx", Transport::Stdio(t)), dir.path());
    let cache_file = dir.path().join("npx-cache.json");
    s.process.npx_cache = Some(cache_file.clone());
    let conn = pimcp_actors::connect(s, ()).await.unwrap();
    assert_eq!(
        conn.server_info.as_ref().map(|i| i.name.as_str()),
        Some("resolved-by-pimcp")
    );
    conn.close(Duration::from_secs(2)).await;
    let cached = std::fs::read_to_string(&cache_file).unwrap();
    assert!(cached.contains("bin/run"), "{cached}");
}

#[tokio::test]
async fn a_missing_guardian_is_a_clear_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(stdio_server("unguarded", &[]), dir.path());
    s.process.guardian = pimcp_actors::GuardianMode::Path(dir.path().join("no-such-guardian"));
    let err = pimcp_actors::connect(s, ()).await.unwrap_err();
    assert!(matches!(err, ConnectError::Spawn { .. }), "{err}");
    assert!(err.to_string().contains("cannot start the guardian"), "{err}");
}
