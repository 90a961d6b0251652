//! `pimcp-spawn-probe`: a test helper that connects one stdio server through pimcp's transport layer, prints
//! `ready <pid>` on stdout and then waits forever, so a test can SIGKILL it and check that the server and its
//! grandchildren die with it (SPEC 4). Usage: `pimcp-spawn-probe <shim-path|none> <program> [args...]`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;

use pimcp_actors::process::{ProcessOptions, ShimMode};
use pimcp_actors::transport::ConnectSpec;
use pimcp_config::{
    AuthConfig, Availability, Lifecycle, Origin, ProtocolMode, ServerConfig, StdioTransport, Timeouts, Transport,
};

fn server(command: String, args: Vec<String>) -> ServerConfig {
    ServerConfig {
        name: "probe".into(),
        transport: Transport::Stdio(StdioTransport {
            command,
            args,
            env: BTreeMap::new(),
            cwd: None,
            inherit_env: true,
        }),
        auth: AuthConfig::Auto,
        lifecycle: Lifecycle::Lazy,
        timeouts: Timeouts::default(),
        protocol: ProtocolMode::Legacy,
        availability: Availability::Available,
        description: None,
        expose_resources: true,
        direct_tools: None,
        tool_prefix: None,
        include_tools: Vec::new(),
        exclude_tools: Vec::new(),
        hidden: false,
        search_keywords: BTreeMap::new(),
        approve_tools: None,
        debug: false,
        trace: None,
        origin: Origin::InMemory,
        provenance: BTreeMap::new(),
    }
}

fn main() {
    pimcp_actors::process::shim_main_if_requested();
    let mut args = std::env::args().skip(1);
    let (Some(shim), Some(program)) = (args.next(), args.next()) else {
        eprintln!("usage: pimcp-spawn-probe <shim-path|none> <program> [args...]");
        std::process::exit(2);
    };
    let rest: Vec<String> = args.collect();
    let shim = if shim == "none" {
        ShimMode::Disabled
    } else {
        ShimMode::Path(PathBuf::from(shim))
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
        let http = pimcp_actors::transport::SharedHttp::lazy();
        let spec = ConnectSpec {
            server: server(program, rest),
            project_dir: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
            http,
            era_hint: None,
            process: ProcessOptions {
                shim,
                ..ProcessOptions::default()
            },
            cancel: tokio_util::sync::CancellationToken::new(),
            resume_session: None,
            access_token: None,
            token_source: None,
            trace: None,
        };
        match pimcp_actors::transport::connect(spec, ()).await {
            Ok(conn) => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "ready {}", conn.pid.unwrap_or(0));
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
