//! `pimcp-spawn-probe`: a test helper that connects one stdio server through pimcp's transport layer, prints
//! `ready <server-pid> <guardian-pid>` on stdout (0 without a guardian) and then waits forever, so a test can SIGKILL
//! it and check that the server and its grandchildren die with it. Usage: `pimcp-spawn-probe <guardian-path|none>
//! [--env KEY=VALUE]... <program> [args...]`; a value starting with `!` is a `!command` secret, resolved at connect as
//! the runtime does. The probe is its own guardian executable too (`pimcp-spawn-probe __pimcp_guardian__`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use pimcp_actors::ConnectSpec;
use pimcp_actors::{GuardianMode, ProcessOptions};
use pimcp_config::{ProtocolMode, Secret, SecretValue, ServerConfig, StdioTransport, Transport};

fn server(command: String, args: Vec<String>, env: BTreeMap<String, SecretValue>) -> ServerConfig {
    let mut stdio = StdioTransport::new(command, args);
    stdio.env = env;
    let mut server = ServerConfig::new("probe", Transport::Stdio(stdio));
    server.protocol = ProtocolMode::Legacy;
    server
}

fn main() {
    pimcp_actors::guardian_main_if_requested();
    let mut args = std::env::args().skip(1);
    let usage = || -> ! {
        eprintln!("usage: pimcp-spawn-probe <guardian-path|none> [--env KEY=VALUE]... <program> [args...]");
        std::process::exit(2);
    };
    let Some(guardian) = args.next() else { usage() };
    let mut env = BTreeMap::new();
    let program = loop {
        match args.next() {
            Some(flag) if flag == "--env" => {
                let Some((key, value)) = args
                    .next()
                    .and_then(|e| e.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
                else {
                    usage()
                };
                let value = match value.strip_prefix('!') {
                    Some(command) => SecretValue::Command(command.to_owned()),
                    None => SecretValue::Plain(Secret::new(value)),
                };
                env.insert(key, value);
            }
            Some(program) => break program,
            None => usage(),
        }
    };
    let rest: Vec<String> = args.collect();
    let guardian = if guardian == "none" {
        GuardianMode::Disabled
    } else {
        GuardianMode::Path(PathBuf::from(guardian))
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("pimcp-spawn-probe: {e}");
            std::process::exit(1);
        }
    };
    runtime.block_on(async move {
        // Stdio only: the HTTP client is never built.
        let http = pimcp_actors::SharedHttp::lazy();
        let process = ProcessOptions {
            guardian,
            ..ProcessOptions::default()
        };
        let guardian_process = process.guardian_process.clone();
        let spec = ConnectSpec {
            server: server(program, rest, env),
            project_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            http,
            era_hint: None,
            process,
            cancel: tokio_util::sync::CancellationToken::new(),
            resume_session: None,
            access_token: None,
            token_source: None,
            trace: None,
            max_message_bytes: pimcp_config::Settings::DEFAULT_MAX_MESSAGE_BYTES,
        };
        match pimcp_actors::connect(spec, ()).await {
            Ok(conn) => {
                let mut out = std::io::stdout().lock();
                let guardian = guardian_process.pid().unwrap_or(0);
                let _ = writeln!(out, "ready {} {guardian}", conn.pid.unwrap_or(0));
                let _ = out.flush();
                drop(out);
                std::future::pending::<()>().await;
                drop(conn);
            }
            Err(e) => {
                eprintln!("pimcp-spawn-probe: {e}");
                std::process::exit(1);
            }
        }
    });
}
