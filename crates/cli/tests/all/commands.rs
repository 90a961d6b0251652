//! Exit codes, the no-command hint, `config show/check/schema/import`, `init` and `trust` through the binary.

use crate::support::{Sandbox, Stream};

#[test]
fn version_help_and_usage_errors() {
    let sb = Sandbox::new();
    let version = sb.run(&["--version"]);
    assert_eq!(version.code, 0);
    assert!(version.stdout.starts_with("pimcp-run "), "{version:?}");
    let help = sb.run(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Exit codes:") && help.stdout.contains("2    usage error or invalid configuration"));
    assert_eq!(sb.run(&["frobnicate"]).code, 2);
    assert_eq!(sb.run(&["config", "show", "--bogus"]).code, 2);
    let add = sb.run(&["add", "x"]);
    assert_eq!(add.code, 2, "{add:?}");
    assert!(add.stderr.contains("--url URL"), "{add:?}");
}

#[test]
fn no_command_without_a_terminal_is_the_stdio_server_and_ends_at_stdin_eof() {
    let sb = Sandbox::new();
    let run = sb.run(&[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.is_empty(),
        "nothing but protocol on stdout, and no request came: {run:?}"
    );
}

#[test]
fn config_check_exit_codes() {
    let sb = Sandbox::new();
    let ok = sb.run(&["config", "check"]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(ok.stdout.contains("configuration is valid: 0 servers"), "{ok:?}");

    sb.write(
        sb.global(),
        "{\"mcpServers\": {\"a\": {\"command\": \"x\"}, \"b\": {\"command\": \"y\", \"unknownField\": 1}}}",
    );
    let warn = sb.run(&["config", "check"]);
    assert_eq!(warn.code, 0, "warnings only: {warn:?}");
    assert!(
        warn.stdout.contains("warning:") && warn.stdout.contains("`unknownField`"),
        "{warn:?}"
    );

    sb.write(
        sb.home.join(".agents/mcp.json"),
        "{\n  \"mcpServers\": {\n    \"c\": {\"lifecycle\": \"never\", \"command\": \"z\"}\n  },\n}\n}",
    );
    let bad = sb.run(&["config", "check", "--json"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    let json = bad.json();
    assert_eq!(json["valid"], false);
    let problem = &json["problems"].as_array().unwrap()[0];
    assert!(problem["path"].as_str().unwrap().ends_with(".agents/mcp.json"));
    assert_eq!(problem["position"], serde_json::json!([6, 1]));
    assert_eq!(json["servers"], 2, "the other file still loads");
}

/// A reader that goes away (`pimcp-run config show | head -1`) is not a crash: no panic, the command's own exit
/// code (`print!` panicked with "failed printing to stdout: Broken pipe", exit 101).
#[test]
fn a_closed_stdout_pipe_ends_commands_quietly() {
    let sb = Sandbox::new();
    sb.write(sb.global(), r#"{"mcpServers": {"a": {"command": "true"}}}"#);
    for args in [
        &["config", "show"][..],
        &["config", "show", "--json"],
        &["config", "check"],
        &["status"],
        &["search", "echo"],
    ] {
        let run = sb.run_with_closed_pipe(args, Stream::Stdout);
        assert!(!run.stderr.contains("panicked"), "{args:?}: {}", run.stderr);
        assert_eq!(run.code, sb.run(args).code, "{args:?}: {}", run.stderr);
    }
}

/// Started with a standard descriptor closed (`pimcp-run 2>&-`), pimcp-run puts `/dev/null` there before anything
/// else, as std's own start-up would (pimcp-run starts at a C `main` of its own on Linux): otherwise the first
/// descriptor it opened (tokio's epoll, a config file, the cache) would become its stderr and receive its logs.
#[cfg(target_os = "linux")]
#[test]
fn a_closed_standard_descriptor_is_opened_on_dev_null() {
    use std::time::Duration;
    let sb = Sandbox::new();
    let mut child = sb.spawn_with_closed_stderr(&[]);
    let fd2 = format!("/proc/{}/fd/2", child.id());
    let exe = format!("/proc/{}/exe", child.id());
    // Until `sh` has exec'd pimcp-run, fd 2 is the shell's; from pimcp-run's first instruction on it is final.
    let started = crate::support::poll_until(Duration::from_secs(10), || {
        std::fs::read_link(&exe).is_ok_and(|p| p.ends_with("pimcp-run"))
    });
    assert!(started, "pimcp-run did not start");
    let seen = crate::support::poll_until(Duration::from_secs(10), || {
        std::fs::read_link(&fd2).is_ok_and(|p| p == std::path::Path::new("/dev/null"))
    });
    let last = std::fs::read_link(&fd2);
    drop(child.stdin.take());
    let status = child.wait().unwrap();
    assert!(seen, "fd 2 of the stdio server is {last:?}, not /dev/null");
    assert!(status.success(), "the server ends at stdin EOF: {status:?}");
}

#[test]
fn config_show_json_has_provenance() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".config/mcp/mcp.json"),
        r#"{"mcpServers": {"a": {"command": "one", "args": ["x"]}}}"#,
    );
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"a": {"args": ["y"]}}, "settings": {"toolPrefix": "short"}}"#,
    );
    let run = sb.run(&["config", "show", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    let a = &json["servers"][0];
    assert_eq!(a["name"], "a");
    assert_eq!(a["status"], "available");
    assert_eq!(a["transport"], "stdio");
    assert_eq!(a["fields"]["command"]["value"], "one");
    assert_eq!(a["fields"]["command"]["from"]["source"], "shared-global");
    assert_eq!(a["fields"]["args"]["value"], serde_json::json!(["y"]));
    assert_eq!(a["fields"]["args"]["from"]["source"], "pi-global");
    assert_eq!(a["identity"].as_str().unwrap().len(), 64);
    assert_eq!(json["settings"]["toolPrefix"]["value"], "short");
    assert_eq!(json["sources"].as_array().unwrap().len(), 6);

    let human = sb.run(&["config", "show"]);
    assert!(human.stdout.contains("~/.config/mcp/mcp.json"), "{human:?}");
    assert!(
        human.stdout.contains("command  \"one\"  ← ~/.config/mcp/mcp.json"),
        "{human:?}"
    );
}

#[test]
fn config_schema_is_json_schema() {
    let run = Sandbox::new().run(&["config", "schema"]);
    assert_eq!(run.code, 0);
    let json = run.json();
    assert!(json["$schema"].as_str().unwrap().contains("json-schema.org"));
    assert!(json["properties"]["mcpServers"].is_object());
}

#[test]
fn config_import_previews_hosts() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"c1": {"command": "c"}, "shared": {"url": "https://s.example/mcp"}}}"#,
    );
    sb.write(sb.global(), r#"{"mcpServers": {"shared": {"description": "mine"}}}"#);
    let run = sb.run(&["config", "import", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    let cursor = &json["hosts"][0];
    assert_eq!(cursor["host"], "cursor");
    assert_eq!(cursor["active"], false);
    let servers = cursor["servers"].as_array().unwrap();
    assert_eq!(servers[0]["name"], "c1");
    assert_eq!(servers[0]["status"], "new");
    assert_eq!(servers[1]["status"], "under-files");
    let human = sb.run(&["config", "import"]);
    assert!(human.stdout.contains("cursor (not imported"), "{human:?}");
    assert_eq!(sb.run(&["config", "import", "--host", "emacs"]).code, 2);
}

#[test]
fn init_shows_without_a_terminal_and_writes_with_yes() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"c1": {"command": "c"}}}"#,
    );
    sb.write(sb.home.join(".codex/config.toml"), "[mcp_servers.x]\ncommand = \"x\"\n");
    let original = "{\n  // mine\n  \"mcpServers\": {}\n}\n";
    sb.write(sb.global(), original);

    let shown = sb.run(&["init"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.stdout.contains(r#""imports": ["cursor", "codex"]"#), "{shown:?}");
    assert!(shown.stdout.contains("--yes"), "{shown:?}");
    assert_eq!(
        std::fs::read_to_string(sb.global()).unwrap(),
        original,
        "nothing written without --yes"
    );

    let written = sb.run(&["init", "--yes"]);
    assert_eq!(written.code, 0, "{written:?}");
    let text = std::fs::read_to_string(sb.global()).unwrap();
    assert!(text.starts_with("{\n  // mine\n"), "{text}");
    assert!(
        text.contains("\"imports\": [\n    \"cursor\",\n    \"codex\"\n  ]"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(sb.home.join(".pi/agent/mcp.json.bak")).unwrap(),
        original
    );
    let check = sb.run(&["config", "check", "--json"]);
    assert_eq!(check.json()["servers"], 2, "{check:?}");
    assert!(sb.run(&["init"]).stdout.contains("already imports all of them"));
}

#[test]
fn trust_makes_project_servers_available() {
    let sb = Sandbox::new();
    sb.write(
        sb.project.join(".mcp.json"),
        r#"{"mcpServers": {"p": {"command": "p"}}}"#,
    );
    let before = sb.run(&["config", "show", "--json"]).json();
    assert_eq!(before["servers"][0]["status"], "untrusted");
    assert!(
        before["servers"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("pimcp-run trust")
    );
    let trust = sb.run(&["trust"]);
    assert_eq!(trust.code, 0, "{trust:?}");
    assert!(trust.stdout.contains(".mcp.json"), "{trust:?}");
    assert_eq!(
        sb.run(&["config", "show", "--json"]).json()["servers"][0]["status"],
        "available"
    );
    let one_run = Sandbox::new().env("PIMCP_TRUST_PROJECT", "1");
    one_run.write(
        one_run.project.join(".mcp.json"),
        r#"{"mcpServers": {"p": {"command": "p"}}}"#,
    );
    assert_eq!(
        one_run.run(&["config", "show", "--json"]).json()["servers"][0]["status"],
        "available"
    );
    assert!(sb.run(&["trust", "--revoke"]).stdout.contains("no longer trusted"));
    assert_eq!(sb.run(&["trust", "/definitely/not/here"]).code, 2);
}

#[test]
fn global_flags() {
    let sb = Sandbox::new();
    let other = sb.root.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    sb.write(
        other.join(".mcp.json"),
        r#"{"mcpServers": {"there": {"command": "t"}}}"#,
    );
    let custom = sb.write(
        sb.root.path().join("custom.json"),
        r#"{"mcpServers": {"custom": {"command": "c"}}}"#,
    );
    let run = sb.run(&[
        "config",
        "show",
        "--json",
        "--project",
        other.to_str().unwrap(),
        "--config",
        custom.to_str().unwrap(),
    ]);
    let names: Vec<String> = run.json()["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["custom", "there"]);
}

/// A stderr whose reader is gone (a host that closed the pipe it read our log from, `2>&1 | head -1`) loses the
/// messages, not the process: `eprintln!` panicked there (exit 101 instead of the command's own code).
#[test]
fn a_closed_stderr_pipe_keeps_exit_codes() {
    let sb = Sandbox::new();
    sb.write(sb.global(), r#"{"mcpServers": {"a": {"command": "true"}}}"#);
    for args in [
        &["--config", "/nonexistent/pimcp.json", "status"][..],
        &["call", "a_nothing"],
        &["describe", "nothing"],
        &["status"],
    ] {
        let closed = sb.run_with_closed_pipe(args, Stream::Stderr);
        let open = sb.run(args);
        assert!(!open.stderr.contains("panicked"), "{args:?}: {}", open.stderr);
        assert_eq!(closed.code, open.code, "{args:?}: {}", open.stderr);
    }
}

/// `run` on a thread: `None` when it did not return within `deadline` (a read that blocks forever).
fn run_within(sb: &Sandbox, args: &'static [&'static str], stdin: &'static str) -> Option<crate::support::Run> {
    let sb = Sandbox {
        root: tempfile::tempdir().unwrap(),
        home: sb.home.clone(),
        project: sb.project.clone(),
        data: sb.data.clone(),
        env: sb.env.clone(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(sb.run_with_stdin(args, stdin));
    });
    rx.recv_timeout(std::time::Duration::from_secs(30)).ok()
}

/// A cloned repository can carry a `.mcp.json` that is a symlink to `/dev/zero` or a FIFO; the project is untrusted,
/// yet every command reads its files. Each is a problem naming the file, and nothing hangs or allocates without end.
#[cfg(unix)]
#[test]
fn a_project_config_that_is_dev_zero_or_a_fifo_never_hangs_a_command() {
    let sb = Sandbox::new();
    sb.write(sb.global(), r#"{"mcpServers": {"a": {"command": "true"}}}"#);
    std::os::unix::fs::symlink("/dev/zero", sb.project.join(".mcp.json")).unwrap();
    std::fs::create_dir_all(sb.project.join(".pi")).unwrap();
    let fifo = sb.project.join(".pi/mcp.json");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );

    let check = run_within(&sb, &["config", "check"], "").expect("config check returned");
    assert_eq!(check.code, 2, "{check:?}");
    let text = format!("{}{}", check.stdout, check.stderr);
    assert!(
        text.contains(".mcp.json") && text.contains("is a character device, not a regular file"),
        "{check:?}"
    );
    assert!(
        text.contains(".pi/mcp.json") && text.contains("is a FIFO, not a regular file"),
        "{check:?}"
    );

    let status = run_within(&sb, &["status"], "").expect("status returned");
    assert!(!status.stderr.contains("panicked"), "{status:?}");

    let served = run_within(
        &sb,
        &[],
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n"
        ),
    )
    .expect("pimcp-run answered and exited at stdin EOF");
    assert_eq!(served.code, 0, "{served:?}");
    assert!(
        served.stdout.contains(r#""id":1"#) && served.stdout.contains("protocolVersion"),
        "{served:?}"
    );
}

/// The model sees what did not load: `mcp({})`, an unknown tool and a search miss each name the skipped file and
/// entry (file, position, server, field; never a value), so it can tell its user what to fix.
#[test]
fn config_problems_reach_the_model_in_status_unknown_tools_and_search_misses() {
    let sb = Sandbox::new();
    let global = serde_json::json!({"mcpServers": {
        "a": {"command": mcp_fixture::bin_path()},
        "b": {"command": 5, "env": {"TOKEN": "s3cr3t-value"}},
    }});
    sb.write(sb.global(), &global.to_string());
    sb.write(
        sb.home.join(".agents/mcp.json"),
        "{\n  \"mcpServers\": {\n    \"c\": {\"command\": \"z\"}\n  ,,\n}\n",
    );
    let call = |id: u32, args: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"mcp","arguments":{args}}}}}"#)
    };
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        call(2, "{}"),
        call(3, r#"{"tool": "b_query", "args": {}}"#),
        call(4, r#"{"search": "query database"}"#),
    ]
    .join("\n")
        + "\n";
    let input: &'static str = Box::leak(input.into_boxed_str());
    let served = run_within(&sb, &[], input).expect("pimcp-run answered and exited at stdin EOF");
    assert_eq!(served.code, 0, "{served:?}");
    let answers: Vec<serde_json::Value> = served
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let text = |id: u64| {
        let answer = answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer {id}: {served:?}"));
        answer["result"]["content"][0]["text"].as_str().unwrap().to_string()
    };
    for id in [2, 3, 4] {
        let text = text(id);
        assert!(text.contains("Configuration problems (2 skipped"), "{id}: {text}");
        assert!(
            text.contains(".agents/mcp.json:5:1: not valid JSON"),
            "{id}: names the file and position: {text}"
        );
        assert!(
            text.contains("server `b`: `command`"),
            "{id}: names the entry and field: {text}"
        );
        assert!(!text.contains("s3cr3t-value"), "{id}: never a value: {text}");
    }
    assert!(text(2).starts_with("MCP: 0 of 1 servers ready"), "{}", text(2));
}

#[test]
fn host_config_discovery_prompt_is_noted_in_status_and_config_check_and_never_loaded() {
    let sb = crate::support::Sandbox::new();
    sb.write(
        sb.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"from-cursor": {"command": "c"}}}"#,
    );
    sb.write(
        sb.global(),
        r#"{"settings": {"hostConfigDiscovery": "prompt"}, "mcpServers": {"a": {"command": "true"}}}"#,
    );
    let status = sb.run(&["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(
        status.stdout.contains("note: found cursor MCP configuration"),
        "{status:?}"
    );
    assert!(
        !status.stdout.contains("from-cursor"),
        "detected, not loaded: {status:?}"
    );
    let check = sb.run(&["config", "check"]);
    assert!(check.stdout.contains("found cursor MCP configuration"), "{check:?}");
}
