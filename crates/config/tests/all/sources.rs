//! The six sources plus host imports in one temp HOME: the merged result and the provenance, field by field.

use std::path::PathBuf;
use std::time::Duration;

use pimcp_config::{
    AuthConfig, Availability, Lifecycle, Origin, SecretValue, Severity, SourceKind, ToolPrefix, Transport,
    load_in_memory,
};
use serde_json::json;

use crate::support::{Sandbox, problems_of, server};

fn file(kind: SourceKind, path: PathBuf) -> Origin {
    Origin::File { source: kind, path }
}

#[test]
fn six_sources_and_imports_merge_field_by_field_with_provenance() {
    let sb = Sandbox::fixture("six-sources");
    pimcp_config::trust_project(&sb.project, &sb.data).unwrap();
    let config = sb.load();
    let errors: Vec<_> = config.problems.iter().filter(|p| p.is_error()).collect();
    assert!(errors.is_empty(), "{errors:#?}");

    let shared = file(SourceKind::SharedGlobal, sb.home.join(".config/mcp/mcp.json"));
    let agents = file(SourceKind::AgentsGlobal, sb.home.join(".agents/mcp.json"));
    let nested = file(SourceKind::AgentsNestedGlobal, sb.home.join(".agents/mcp/mcp.json"));
    let pi = file(SourceKind::PiGlobal, sb.home.join(".pi/agent/mcp.json"));
    let shared_project = file(SourceKind::SharedProject, sb.project.join(".mcp.json"));
    let pi_project = file(SourceKind::PiProject, sb.project.join(".pi/mcp.json"));
    let cursor = Origin::Import {
        host: "cursor".into(),
        path: sb.home.join(".cursor/mcp.json"),
    };
    let codex = Origin::Import {
        host: "codex".into(),
        path: sb.home.join(".codex/config.toml"),
    };

    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "alpha",
            "beta",
            "codex-only",
            "cursor-only",
            "delta",
            "epsilon",
            "gamma",
            "shared-import"
        ]
    );

    // alpha: every file adds a field; the cursor import supplies the base it all lands on.
    let alpha = server(&config, "alpha");
    let Transport::Stdio(stdio) = &alpha.transport else {
        panic!("alpha is not stdio")
    };
    assert_eq!(stdio.command, "alpha-v1");
    assert_eq!(stdio.args, ["--from-2"]);
    assert_eq!(
        stdio.env.get("FROM_CURSOR"),
        Some(&SecretValue::Plain(pimcp_config::Secret::new("1")))
    );
    assert_eq!(alpha.description.as_deref(), Some("from shared global"));
    assert_eq!(alpha.lifecycle, Lifecycle::Eager);
    assert_eq!(alpha.timeouts.request, Duration::from_millis(1500));
    assert_eq!(alpha.timeouts.startup, Duration::from_millis(1500));
    assert_eq!(alpha.timeouts.tool, Duration::from_secs(90));
    assert_eq!(
        alpha.timeouts.idle, None,
        "eager without its own idleTimeout never idles out"
    );
    assert_eq!(alpha.availability, Availability::Disabled);
    let p = &alpha.provenance;
    assert_eq!(p["command"], shared);
    assert_eq!(p["args"], agents);
    assert_eq!(p["env"], cursor);
    assert_eq!(p["env.FROM_CURSOR"], cursor);
    assert_eq!(p["description"], shared);
    assert_eq!(p["lifecycle"], shared);
    assert_eq!(p["requestTimeoutMs"], pi);
    assert_eq!(p["toolTimeout"], shared_project);
    assert_eq!(p["disabled"], pi_project, "`enabled: false` is recorded as `disabled`");
    assert_eq!(alpha.origin, pi_project);

    // beta: the url changed in source 3, so source 1's headers and oauth are gone.
    let beta = server(&config, "beta");
    let Transport::Http(http) = &beta.transport else {
        panic!("beta is not http")
    };
    assert_eq!(http.url, "https://beta-v2.example/mcp");
    assert!(http.headers.is_empty());
    assert_eq!(beta.auth, AuthConfig::Auto);
    assert_eq!(beta.provenance["url"], nested);
    assert!(!beta.provenance.contains_key("headers") && !beta.provenance.contains_key("oauth"));

    // gamma: switched to HTTP in source 6; its command and env (with a missing variable) are gone with it.
    let gamma = server(&config, "gamma");
    assert!(matches!(&gamma.transport, Transport::Http(h) if h.url == "https://gamma.example/mcp"));
    assert_eq!(gamma.availability, Availability::Available);
    assert_eq!(gamma.provenance.keys().collect::<Vec<_>>(), ["url"]);

    let delta = server(&config, "delta");
    assert!(matches!(&delta.transport, Transport::Socket(s) if s.path == sb.home.join("mux.sock")));
    assert_eq!(delta.provenance["socket"], pi);

    assert_eq!(server(&config, "epsilon").provenance["command"], shared_project);
    assert_eq!(server(&config, "cursor-only").origin, cursor);
    assert_eq!(server(&config, "codex-only").origin, codex);

    // shared-import: the first listed import (cursor) wins over codex; the pi global file adds a field on top.
    let shared_import = server(&config, "shared-import");
    assert!(matches!(&shared_import.transport, Transport::Stdio(s) if s.command == "from-cursor"));
    assert_eq!(shared_import.provenance["command"], cursor);
    assert_eq!(shared_import.provenance["description"], pi);

    // Settings: shallow per key, later file wins.
    assert_eq!(config.settings.tool_prefix, ToolPrefix::Mcp);
    assert_eq!(config.settings.idle_timeout, Some(Duration::from_secs(7 * 60)));
    assert!(config.settings.trace.enabled);

    // Every source is accounted for.
    let loaded: Vec<&Origin> = config.sources.iter().filter(|s| s.loaded).map(|s| &s.origin).collect();
    for origin in [
        &shared,
        &agents,
        &nested,
        &pi,
        &shared_project,
        &pi_project,
        &cursor,
        &codex,
    ] {
        assert!(loaded.contains(&origin), "{origin} not loaded");
    }
}

#[test]
fn config_path_replaces_source_four_and_exclusive_reads_only_it() {
    let sb = Sandbox::fixture("six-sources");
    let custom = sb.write(
        sb.root.path().join("custom.json"),
        r#"{"mcpServers": {"only": {"command": "c"}}}"#,
    );
    let mut opts = sb.opts();
    opts.config_path = Some(custom.clone());
    let config = pimcp_config::load(&opts);
    assert!(config.server("only").is_some());
    assert!(config.server("delta").is_none(), "source 4 was replaced");
    assert!(config.server("beta").is_some(), "other sources still load");

    opts.env.insert("PIMCP_CONFIG_MODE", "Exclusive");
    let config = pimcp_config::load(&opts);
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["only"]);
    assert_eq!(config.sources.len(), 1);
}

#[test]
fn missing_explicit_config_path_is_an_error() {
    let sb = Sandbox::new();
    let mut opts = sb.opts();
    opts.config_path = Some(sb.root.path().join("nope.json"));
    let config = pimcp_config::load(&opts);
    assert!(
        config
            .problems
            .iter()
            .any(|p| p.is_error() && p.message.contains("--config")),
        "{:?}",
        config.problems
    );
}

#[test]
fn agent_dir_comes_from_env() {
    let sb = Sandbox::new();
    sb.write(
        sb.root.path().join("agent/mcp.json"),
        r#"{"mcpServers": {"a": {"command": "a"}}}"#,
    );
    let mut opts = sb.opts();
    opts.env
        .insert("PI_CODING_AGENT_DIR", sb.root.path().join("agent").to_string_lossy());
    assert!(pimcp_config::load(&opts).server("a").is_some());
}

#[test]
fn in_memory_config_is_never_merged_with_files() {
    let sb = Sandbox::fixture("six-sources");
    let json = json!({
        "mcpServers": { "mem": { "url": "https://mem.example/mcp", "lifecycle": "keep-alive" } },
        "imports": ["cursor"],
        "settings": { "toolPrefix": "none" }
    });
    let config = load_in_memory(&json, &sb.opts());
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["mem"]);
    assert_eq!(config.settings.tool_prefix, ToolPrefix::None);
    assert_eq!(config.servers[0].origin, Origin::InMemory);
    assert_eq!(config.servers[0].timeouts.idle, None);
    assert!(config.problems.iter().any(|p| p.field.as_deref() == Some("imports")));
}

#[test]
fn host_config_discovery_on_imports_every_detected_host() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"from-cursor": {"command": "c"}}}"#,
    );
    sb.write(sb.global(), r#"{"settings": {"hostConfigDiscovery": "on"}}"#);
    assert!(sb.load().server("from-cursor").is_some());
    sb.write(sb.global(), r#"{"settings": {"hostConfigDiscovery": "prompt"}}"#);
    let config = sb.load();
    assert!(config.server("from-cursor").is_none(), "prompt detects only");
    let found = config
        .problems
        .iter()
        .find(|p| p.field.as_deref() == Some("settings.hostConfigDiscovery"))
        .expect("the detected host is reported");
    assert_eq!(found.severity, Severity::Warning);
    assert!(found.message.contains("found cursor MCP configuration"), "{found:?}");
    assert!(found.message.contains(".cursor/mcp.json"), "{found:?}");
    // A host already listed in `imports` is loaded, not reported.
    sb.write(
        sb.global(),
        r#"{"settings": {"hostConfigDiscovery": "prompt"}, "imports": ["cursor"]}"#,
    );
    let config = sb.load();
    assert!(config.server("from-cursor").is_some());
    assert!(
        !config
            .problems
            .iter()
            .any(|p| p.field.as_deref() == Some("settings.hostConfigDiscovery"))
    );
}

#[test]
fn timeouts_more_specific_wins_and_idle_follows_lifecycle() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"settings": {"idleTimeout": 2, "requestTimeoutMs": 20000},
            "mcpServers": {
              "plain": {"command": "x"},
              "secs": {"command": "x", "timeout": 5, "startupTimeout": 9, "idleTimeout": 0.5},
              "never": {"command": "x", "idleTimeout": 0},
              "ka": {"command": "x", "lifecycle": {"mode": "keep-alive"}, "idleTimeout": 3}
            }}"#,
    );
    let config = sb.load();
    let plain = server(&config, "plain");
    assert_eq!(plain.timeouts.request, Duration::from_secs(20));
    assert_eq!(plain.timeouts.tool, Duration::from_secs(20));
    assert_eq!(plain.timeouts.startup, Duration::from_secs(30));
    assert_eq!(plain.timeouts.idle, Some(Duration::from_secs(120)));
    let secs = server(&config, "secs");
    assert_eq!(secs.timeouts.request, Duration::from_secs(5));
    assert_eq!(secs.timeouts.startup, Duration::from_secs(9));
    assert_eq!(secs.timeouts.idle, Some(Duration::from_secs(30)));
    assert_eq!(server(&config, "never").timeouts.idle, None);
    let ka = server(&config, "ka");
    assert_eq!(ka.lifecycle, Lifecycle::KeepAlive);
    assert_eq!(ka.timeouts.idle, None);
}

#[test]
fn every_server_field_is_typed() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"full": {
            "type": "sse", "url": "https://full.example/mcp", "headers": {"X-A": "a"},
            "auth": "oauth",
            "oauth": {"grantType": "client_credentials", "clientId": "cid", "clientSecret": "!pass show x",
                      "scope": "a b", "callbackPort": 4000, "authorizationParams": {"prompt": "consent"},
                      "skipIssuerMetadataValidation": true, "dpop": true},
            "protocol": "2026-07-28", "description": "d", "exposeResources": false,
            "directTools": ["t1"], "toolPrefix": "short", "allowedTools": ["a*"], "excludeTools": ["a_x"],
            "exposure": "hidden", "searchKeywords": {"*": ["kw"]}, "approveTools": ["del*"],
            "debug": true, "trace": false
        }}}"#,
    );
    let config = sb.load();
    let full = server(&config, "full");
    let Transport::Http(http) = &full.transport else {
        panic!()
    };
    assert!(http.allow_legacy_sse);
    let AuthConfig::OAuth(oauth) = &full.auth else {
        panic!("{:?}", full.auth)
    };
    assert_eq!(oauth.grant_type, pimcp_config::OAuthGrant::ClientCredentials);
    assert_eq!(oauth.client_id.as_deref(), Some("cid"));
    assert_eq!(oauth.client_secret, Some(SecretValue::Command("pass show x".into())));
    assert_eq!(oauth.callback_port, Some(4000));
    assert_eq!(oauth.authorization_params["prompt"], "consent");
    assert!(oauth.skip_issuer_metadata_validation && oauth.dpop);
    assert_eq!(full.protocol, pimcp_config::ProtocolMode::Stateless20260728);
    assert!(!full.expose_resources);
    assert_eq!(
        full.direct_tools,
        Some(pimcp_config::DirectTools::Listed(vec!["t1".into()]))
    );
    assert_eq!(full.tool_prefix, Some(ToolPrefix::Short));
    assert_eq!(full.include_tools, ["a*"]);
    assert_eq!(full.exclude_tools, ["a_x"]);
    assert!(full.hidden && full.debug);
    assert_eq!(full.trace, Some(false));
    assert_eq!(full.search_keywords["*"], ["kw"]);
    assert_eq!(
        full.approve_tools,
        Some(pimcp_config::ApproveTools::Globs(vec!["del*".into()]))
    );
}

#[test]
fn auth_forms() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {
            "off": {"url": "https://a.example", "auth": false},
            "oauth-off": {"url": "https://a.example", "oauth": false},
            "bearer": {"url": "https://a.example", "auth": "bearer", "bearerTokenEnv": "TOKEN_VAR"},
            "implied-bearer": {"url": "https://a.example", "bearerToken": "!op read x"},
            "bearer-missing": {"url": "https://a.example", "auth": "bearer"}
        }}"#,
    );
    let config = sb.load();
    assert_eq!(server(&config, "off").auth, AuthConfig::Disabled);
    assert_eq!(server(&config, "oauth-off").auth, AuthConfig::Disabled);
    assert_eq!(
        server(&config, "bearer").auth,
        AuthConfig::Bearer {
            token: None,
            token_env: Some("TOKEN_VAR".into())
        }
    );
    assert_eq!(
        server(&config, "implied-bearer").auth,
        AuthConfig::Bearer {
            token: Some(SecretValue::Command("op read x".into())),
            token_env: None
        }
    );
    assert!(
        matches!(&server(&config, "bearer-missing").availability, Availability::ConfigError { message } if message.contains("bearerToken"))
    );
}

#[test]
fn direct_tools_env_overrides_config() {
    let mut sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"a": {"command": "a", "directTools": true}, "b": {"command": "b"}}}"#,
    );
    sb.env.insert("MCP_DIRECT_TOOLS", "b/search,b/fetch");
    let config = sb.load();
    assert_eq!(server(&config, "a").direct_tools, Some(pimcp_config::DirectTools::Off));
    assert_eq!(
        server(&config, "b").direct_tools,
        Some(pimcp_config::DirectTools::Listed(vec!["search".into(), "fetch".into()]))
    );
    sb.env.insert("MCP_OUTPUT_GUARD", "0");
    assert_eq!(sb.load().settings.output_guard, None);
}

/// `scriptMode`: on by default with the default limits, off with `false` or `MCP_SCRIPT_MODE=0`, limits clamped to
/// their ranges, and a wrong type is a problem naming the field.
#[test]
fn script_mode_defaults_limits_and_the_switch() {
    use pimcp_config::ScriptLimits;
    use std::time::Duration;
    let mut sb = Sandbox::new();
    sb.write(sb.global(), r#"{"mcpServers": {"a": {"command": "x"}}}"#);
    assert_eq!(sb.load().settings.script, Some(ScriptLimits::DEFAULT));
    sb.write(
        sb.global(),
        r#"{"settings": {"scriptMode": {"timeoutMs": 5000, "memoryMb": 4, "maxCalls": 100000}}, "mcpServers": {}}"#,
    );
    let limits = sb.load().settings.script.unwrap();
    assert_eq!(limits.timeout, Duration::from_secs(5));
    assert_eq!(limits.memory_bytes, 8 << 20, "raised to the 8 MiB floor");
    assert_eq!(limits.max_calls, 1000, "cut to the ceiling");
    sb.write(sb.global(), r#"{"settings": {"scriptMode": false}, "mcpServers": {}}"#);
    assert_eq!(sb.load().settings.script, None);
    sb.write(sb.global(), r#"{"settings": {"scriptMode": true}, "mcpServers": {}}"#);
    sb.env.insert("MCP_SCRIPT_MODE", "0");
    assert_eq!(sb.load().settings.script, None);
    sb.env.remove("MCP_SCRIPT_MODE");
    sb.write(sb.global(), r#"{"settings": {"scriptMode": "yes"}, "mcpServers": {}}"#);
    let config = sb.load();
    let problem = config
        .problems
        .iter()
        .find(|p| p.field.as_deref() == Some("settings.scriptMode"))
        .unwrap_or_else(|| panic!("{:?}", config.problems));
    assert!(problem.message.contains("`true`, `false` or"), "{problem:?}");
    assert_eq!(
        config.settings.script,
        Some(ScriptLimits::DEFAULT),
        "a bad value keeps the default"
    );
}

#[test]
fn identity_hash_tracks_identity_fields_only() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {
            "a": {"command": "x", "env": {"K": "!secret-cmd"}, "description": "one"},
            "b": {"command": "x", "env": {"K": "!secret-cmd"}, "description": "two", "lifecycle": "eager"},
            "c": {"command": "x", "env": {"K": "!other-cmd"}}
        }}"#,
    );
    let config = sb.load();
    let (a, b, c) = (server(&config, "a"), server(&config, "b"), server(&config, "c"));
    assert_eq!(a.identity_hash().len(), 64);
    assert_eq!(
        a.identity_hash(),
        b.identity_hash(),
        "description and lifecycle are not identity"
    );
    assert_ne!(
        a.identity_hash(),
        c.identity_hash(),
        "a different !command is a different server"
    );
    assert_eq!(
        pimcp_config::identity_hash(a),
        sb.load().server("a").unwrap().identity_hash(),
        "stable across loads"
    );
}

/// Loads on a thread; `None` when it did not finish within `deadline` (a read that blocks forever).
fn load_within(sb: &Sandbox, deadline: Duration) -> Option<pimcp_config::Config> {
    let opts = sb.opts();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(pimcp_config::load(&opts));
    });
    rx.recv_timeout(deadline).ok()
}

#[cfg(unix)]
fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
#[test]
fn a_project_file_that_is_dev_zero_or_a_fifo_is_a_problem_and_the_other_sources_still_load() {
    let sb = Sandbox::new();
    // An untrusted project (a cloned repository) carrying a device and a FIFO where its configs would be.
    std::os::unix::fs::symlink("/dev/zero", sb.project.join(".mcp.json")).unwrap();
    std::fs::create_dir_all(sb.project.join(".pi")).unwrap();
    mkfifo(&sb.project.join(".pi/mcp.json"));
    // A host import that is a FIFO too.
    mkfifo(&sb.home.join(".cursor-mcp-fifo"));
    std::fs::create_dir_all(sb.home.join(".cursor")).unwrap();
    std::fs::rename(sb.home.join(".cursor-mcp-fifo"), sb.home.join(".cursor/mcp.json")).unwrap();
    sb.write(
        sb.global(),
        r#"{"imports": ["cursor"], "mcpServers": {"a": {"command": "a"}}}"#,
    );

    let config = load_within(&sb, Duration::from_secs(20)).expect("load returned (no read may block or run away)");
    assert!(
        config.server("a").is_some(),
        "the global server still loads: {:?}",
        config.problems
    );
    let problem = |file: &str| {
        config
            .problems
            .iter()
            .find(|p| p.path.as_deref() == Some(sb.project.join(file).as_path()) || p.message.contains(file))
            .unwrap_or_else(|| panic!("no problem names {file}: {:#?}", config.problems))
            .to_string()
    };
    assert!(problem(".mcp.json").contains("is a character device, not a regular file"));
    assert!(problem(".pi/mcp.json").contains("is a FIFO, not a regular file"));
    assert!(problem(".cursor/mcp.json").contains("is a FIFO, not a regular file"));
}

#[test]
fn a_config_file_over_the_size_cap_is_skipped_naming_the_cap() {
    let sb = Sandbox::new();
    sb.write(sb.global(), r#"{"mcpServers": {"a": {"command": "a"}}}"#);
    let big = std::fs::File::create(sb.project.join(".mcp.json")).unwrap();
    big.set_len(pimcp_config::CONFIG_FILE_LIMIT + 1).unwrap();
    let config = load_within(&sb, Duration::from_secs(20)).expect("load returned");
    assert!(config.server("a").is_some());
    let text: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|t| t.contains(".mcp.json") && t.contains("larger than the 16 MiB limit")),
        "{text:#?}"
    );
}

/// pimcp listed among its own servers (the README has users add `pimcp-run` to their hosts' configs, which pimcp may
/// import or share): the entry is never started, and `config check` and status say it is pimcp itself and where it
/// came from. A disabled entry stays disabled, without a warning.
#[test]
fn an_entry_that_starts_pimcp_itself_is_refused_and_reported_with_its_origin() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".claude.json"),
        r#"{"mcpServers": {"pimcp": {"command": "pimcp-run"}, "other": {"command": "node"}}}"#,
    );
    sb.write(
        sb.global(),
        r#"{"imports": ["claude-code"], "mcpServers": {
            "me": {"command": "/usr/local/bin/pimcp-run", "args": ["--config", "x.json"], "lifecycle": "keep-alive"},
            "off": {"command": "pimcp-run", "disabled": true}
        }}"#,
    );
    let config = sb.load();
    for (name, origin) in [("pimcp", "(import claude-code)"), ("me", "mcp.json")] {
        let Availability::ConfigError { message } = &server(&config, name).availability else {
            panic!("{name} is not refused: {:?}", server(&config, name).availability);
        };
        assert!(message.starts_with("this is pimcp itself"), "{message}");
        assert!(message.contains(origin), "{message}");
        let problems = problems_of(&config, name);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field.as_deref(), Some("command"));
        assert_eq!(problems[0].severity, Severity::Warning);
    }
    assert_eq!(server(&config, "other").availability, Availability::Available);
    assert_eq!(server(&config, "off").availability, Availability::Disabled);
    assert!(problems_of(&config, "off").is_empty());
    assert!(pimcp_config::is_pimcp_command("pimcp-run"));
    assert!(pimcp_config::is_pimcp_command("C:/tools/pimcp-run.exe"));
    assert!(!pimcp_config::is_pimcp_command("pimcp-runner"));
    assert!(!pimcp_config::is_pimcp_command("node"));
}
