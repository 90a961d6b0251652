//! `!command` secret processes and pimcp's own variables: a secret command (and whatever it starts) never outlives a
//! SIGKILLed pimcp or a cancelled connect, and no child (a server, a secret command) inherits a `PIMCP_*` variable.

use std::path::Path;
use std::time::Duration;

use pimcp_actors::ConnectError;
use pimcp_config::{SecretValue, Transport};

use super::support::*;

/// Starts `pimcp-spawn-probe` with `--env` entries and extra environment, connecting `program args`.
fn probe(
    guardian: &str,
    env: &[(&str, String)],
    extra_env: &[(&str, &str)],
    program: &str,
    args: &[&str],
) -> std::process::Child {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pimcp-spawn-probe"));
    cmd.arg(guardian);
    for (key, value) in env {
        cmd.arg("--env").arg(format!("{key}={value}"));
    }
    cmd.arg(program)
        .args(args)
        .envs(extra_env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// A secret command that writes its shell's pid and its child's, then waits for the child (`sleep 605`).
fn pid_writing_command(dir: &Path) -> (String, std::path::PathBuf, std::path::PathBuf) {
    let (sh, child) = (dir.join("sh.pid"), dir.join("child.pid"));
    let command = format!(
        "!echo $$ > '{}'; sleep 605 & echo $! > '{}'; wait",
        sh.display(),
        child.display()
    );
    (command, sh, child)
}

#[tokio::test]
async fn a_secret_command_and_its_child_die_with_a_sigkilled_pimcp() {
    let dir = tempfile::tempdir().unwrap();
    let (command, sh_file, child_file) = pid_writing_command(dir.path());
    let mut pimcp = probe(guardian().to_str().unwrap(), &[("TOK", command)], &[], &fixture(), &[]);
    let (sh, child) = (read_pid(&sh_file).await, read_pid(&child_file).await);
    assert!(!is_dead(sh) && !is_dead(child));
    pimcp.kill().unwrap(); // SIGKILL, while the connect waits for the secret
    pimcp.wait().unwrap();
    let gone = eventually(Duration::from_secs(5), || is_dead(sh) && is_dead(child)).await;
    if !gone {
        kill_pid(sh);
        kill_pid(child);
    }
    assert!(
        gone,
        "secret command {sh} or its child {child} survived pimcp's SIGKILL"
    );
}

#[tokio::test]
async fn a_cancelled_connect_ends_its_secret_command_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (command, sh_file, child_file) = pid_writing_command(dir.path());
    let mut t = stdio_transport(&[]);
    t.env
        .insert("TOK".into(), SecretValue::Command(command[1..].to_owned()));
    let spec = spec(server("cancelled", Transport::Stdio(t)), dir.path());
    let cancel = spec.cancel.clone();
    let connect = tokio::spawn(pimcp_actors::connect(spec, ()));
    let (sh, child) = (read_pid(&sh_file).await, read_pid(&child_file).await);
    cancel.cancel();
    let err = tokio::time::timeout(Duration::from_secs(5), connect)
        .await
        .expect("the cancelled connect did not return")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ConnectError::Cancelled { .. }), "{err}");
    // Far below the command's 10 s limit.
    let gone = eventually(Duration::from_secs(5), || is_dead(sh) && is_dead(child)).await;
    if !gone {
        kill_pid(sh);
        kill_pid(child);
    }
    assert!(
        gone,
        "secret command {sh} or its child {child} outlived the cancelled connect"
    );
}

/// The environment a process started with (`/proc/<pid>/environ`).
fn environ(pid: u32) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    raw.split(|b| *b == 0)
        .filter_map(|entry| {
            let entry = String::from_utf8_lossy(entry);
            let (k, v) = entry.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

#[tokio::test]
async fn pimcp_control_variables_never_reach_a_server_or_a_secret_command() {
    for guardian_mode in [guardian().to_string_lossy().into_owned(), "none".to_owned()] {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("server.pid");
        let mut pimcp = probe(
            &guardian_mode,
            &[
                ("OWN_VAR", "own-value".to_owned()),
                // What the secret command saw of pimcp's token becomes the server's variable.
                ("SEEN_BY_SECRET", "!printf %s \"${PIMCP_AUTH_TOKEN-unset}\"".to_owned()),
            ],
            &[("PIMCP_AUTH_TOKEN", "planted-serve-token"), ("PIMCP_LOG", "warn")],
            &fixture(),
            &["--pid-file", pid_file.to_str().unwrap()],
        );
        let server = read_pid(&pid_file).await;
        let env = environ(server);
        let _ = pimcp.kill();
        let _ = pimcp.wait();
        let get = |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        assert_eq!(get("OWN_VAR"), Some("own-value"), "{guardian_mode}");
        assert_eq!(get("SEEN_BY_SECRET"), Some("unset"), "{guardian_mode}");
        // The one variable of pimcp's a server sees is the nesting depth pimcp gives it.
        assert_eq!(get(pimcp_actors::NESTING_ENV), Some("1"), "{guardian_mode}");
        let control = |k: &str| k.starts_with("PIMCP_") && k != pimcp_actors::NESTING_ENV;
        assert!(
            !env.iter().any(|(k, _)| control(k)),
            "{guardian_mode}: the server inherited {:?}",
            env.iter()
                .filter(|(k, _)| control(k))
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
        );
        assert!(
            !env.iter().any(|(_, v)| v.contains("planted-serve-token")),
            "{guardian_mode}"
        );
        // Everything else is inherited.
        assert!(get("PATH").is_some(), "{guardian_mode}");
    }
}
