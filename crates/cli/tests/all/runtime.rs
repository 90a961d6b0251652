//! The people-facing runtime commands against a real `mcp-fixture` server: `status`, `connect`, `search`,
//! `describe`, `call` and `prompts`, human and `--json`, their exit codes, the metadata cache shared between runs,
//! and no server process left behind when a command ends.

use serde_json::json;

use crate::support::{Sandbox, pid_alive};

/// A sandbox whose global config has the fixture as `fixture` (plus `extra` entries).
fn with_fixture(extra: serde_json::Value) -> Sandbox {
    let sb = Sandbox::new();
    let mut servers = json!({ "fixture": { "command": mcp_fixture::bin_path() } });
    if let (Some(all), Some(more)) = (servers.as_object_mut(), extra.as_object()) {
        all.extend(more.clone());
    }
    sb.write(sb.global(), &json!({ "mcpServers": servers }).to_string());
    sb
}

#[test]
fn status_connect_and_the_cache_between_runs() {
    let sb = with_fixture(json!({ "off": { "command": "nothing", "disabled": true } }));
    let before = sb.run(&["status", "--json"]);
    assert_eq!(before.code, 0, "{before:?}");
    let json = before.json();
    assert_eq!(json["schema"], "pimcp/status/v1");
    let fixture = &json["servers"][0];
    assert_eq!(
        (fixture["name"].as_str(), fixture["state"].as_str()),
        (Some("fixture"), Some("cached"))
    );
    assert!(fixture.get("metadata").is_none(), "nothing is cached yet: {fixture}");
    assert_eq!(json["servers"][1]["state"], "disabled");

    let human = sb.run(&["status"]);
    assert_eq!(human.code, 0);
    assert!(human.stdout.starts_with("SERVER   STATE"), "{human:?}");
    assert!(
        human.stdout.contains("nothing cached yet; `pimcp-run connect fixture`"),
        "{human:?}"
    );
    assert!(
        !human.stdout.contains('\x1b') && !human.stderr.contains('\x1b'),
        "no colour without a terminal"
    );

    let connected = sb.run(&["connect", "fixture", "--json"]);
    assert_eq!(connected.code, 0, "{connected:?}");
    let json = connected.json();
    assert_eq!(json["schema"], "pimcp/connect/v1");
    let names: Vec<&str> = json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"fixture_echo") && names.contains(&"fixture_add"),
        "{names:?}"
    );
    assert_eq!(json["prompts"], json!(["greet", "summarize", "brief", "translate"]));
    assert!(json["protocolVersion"].is_string());

    // A new process knows the tools from the cache without starting the server.
    let after = sb.run(&["status", "--json"]).json();
    let fixture = &after["servers"][0];
    assert_eq!(fixture["state"], "cached");
    assert!(
        matches!(fixture["metadata"].as_str(), Some("cache" | "stale-cache")),
        "{fixture}"
    );
    // The status counts upstream tools; the catalog also exposes the three resources as `read_*` tools.
    let n_resource_tools = names.iter().filter(|n| n.starts_with("fixture_read_")).count();
    assert_eq!(n_resource_tools, 3);
    assert_eq!(fixture["toolCount"], names.len() - n_resource_tools);

    let live = sb.run(&["status", "--connect", "--json"]);
    assert_eq!(live.code, 0, "{live:?}");
    assert_eq!(live.json()["servers"][0]["state"], "ready");
}

#[test]
fn search_describe_call_and_their_exit_codes() {
    let sb = with_fixture(json!({}));
    let offline = sb.run(&["search", "echo"]);
    assert_eq!(offline.code, 0, "{offline:?}");
    assert!(offline.stdout.contains("no tools match \"echo\""), "{offline:?}");
    assert!(
        offline
            .stdout
            .contains("not searched: fixture (not started, nothing cached yet)"),
        "{offline:?}"
    );

    let found = sb.run(&["search", "echo", "--connect", "--json"]);
    assert_eq!(found.code, 0, "{found:?}");
    let json = found.json();
    assert_eq!(json["schema"], "pimcp/search/v1");
    assert_eq!(json["results"][0]["name"], "fixture_echo");
    assert_eq!(json["results"][0]["params"], "{text: string}");
    assert_eq!(json["results"][0]["match"], "exact-name");
    assert_eq!(json["notSearched"], json!([]));

    let page = sb.run(&["search", "fixture", "--limit", "2", "--json"]).json();
    assert_eq!(page["results"].as_array().unwrap().len(), 2);
    assert_eq!(page["nextOffset"], 2);
    let human_page = sb.run(&["search", "fixture", "--limit", "2"]);
    assert!(human_page.stdout.contains("; next page: --offset 2"), "{human_page:?}");

    let described = sb.run(&["describe", "fixture_add", "--json"]);
    assert_eq!(described.code, 0, "{described:?}");
    let json = described.json();
    assert_eq!(json["schema"], "pimcp/describe/v1");
    assert_eq!(json["originalName"], "add");
    assert_eq!(json["inputSchema"]["required"], json!(["a", "b"]));
    assert!(json["outputSchema"].is_object());
    let human = sb.run(&["describe", "add", "--server", "fixture"]);
    assert!(
        human
            .stdout
            .contains("Call: pimcp-run call fixture_add '{\"a\": 0, \"b\": 0}'"),
        "{human:?}"
    );

    let typo = sb.run(&["describe", "fixture_ecoh"]);
    assert_eq!(typo.code, 2, "{typo:?}");
    assert!(typo.stderr.contains("fixture_echo"), "suggestion: {typo:?}");
    let typo_json = sb.run(&["describe", "fixture_ecoh", "--json"]);
    assert_eq!(typo_json.code, 2);
    assert_eq!(typo_json.json()["error"]["category"], "unknown-tool");

    let echoed = sb.run(&["call", "fixture_echo", r#"{"text": "hello"}"#]);
    assert_eq!((echoed.code, echoed.stdout.as_str()), (0, "hello\n"), "{echoed:?}");
    let sum = sb.run(&["call", "fixture_add", r#"{"a": 2, "b": 3}"#, "--json"]);
    assert_eq!(sum.code, 0, "{sum:?}");
    let json = sum.json();
    assert_eq!(json["schema"], "pimcp/call/v1");
    assert_eq!(
        (json["tool"].as_str(), json["server"].as_str()),
        (Some("fixture_add"), Some("fixture"))
    );
    let text = json["text"].as_str().unwrap();
    assert!(
        text.starts_with("5\n") && text.contains("\"sum\": 5"),
        "structured content is shown: {text}"
    );
    assert_eq!(json["isError"], false);

    let invalid = sb.run(&["call", "fixture_add", r#"{"a": 1}"#]);
    assert_eq!(invalid.code, 2, "validation is the caller's mistake: {invalid:?}");
    assert!(invalid.stderr.contains("\"b\" is a required property"), "{invalid:?}");
    let failed = sb.run(&["call", "fixture_fail", r#"{"message": "boom"}"#, "--json"]);
    assert_eq!(failed.code, 1, "{failed:?}");
    assert_eq!(failed.json()["category"], "tool-error");
    assert!(
        failed.json()["text"].as_str().unwrap().starts_with("boom"),
        "{failed:?}"
    );
    let not_object = sb.run(&["call", "fixture_echo", "[1]"]);
    assert_eq!(not_object.code, 2, "{not_object:?}");
    let unknown = sb.run(&["call", "nope_nothing", "--json"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert_eq!(unknown.json()["category"], "unknown-tool");
}

#[test]
fn call_reads_arguments_from_stdin_and_saves_images() {
    let sb = with_fixture(json!({}));
    let echoed = sb.run_with_stdin(&["call", "fixture_echo", "-"], r#"{"text": "from stdin"}"#);
    assert_eq!((echoed.code, echoed.stdout.as_str()), (0, "from stdin\n"), "{echoed:?}");

    let image = sb.run(&["call", "fixture_image"]);
    assert_eq!(image.code, 0, "{image:?}");
    let line = image.stdout.trim();
    let path = line
        .strip_prefix("[image (image/png, ")
        .and_then(|rest| rest.split_once(") saved to "))
        .map(|(_, path)| path.trim_end_matches(']'))
        .unwrap_or_else(|| panic!("unexpected image line: {line}"));
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG was saved at {path}");
    std::fs::remove_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
}

/// `script FILE|-`: the value and the console lines, `--json` (`pimcp/script/v1`) with the calls it made, exit 1 for
/// a script that failed, 2 for no script at all.
#[test]
fn script_runs_a_file_or_stdin_and_reports_its_calls() {
    let sb = with_fixture(json!({}));
    let file = sb.write(
        sb.project.join("sum.js"),
        "const [a, b] = await Promise.all([tools.call('fixture_add', {a: 1, b: 2}), tools.call('fixture_add', {a: 3, b: 4})]);\n\
         console.log('two calls');\nreturn a.sum + b.sum;\n",
    );
    let run = sb.run(&["script", &file.to_string_lossy()]);
    assert_eq!(
        (run.code, run.stdout.as_str()),
        (0, "10\n--- console ---\ntwo calls\n"),
        "{run:?}"
    );

    let run = sb.run_with_stdin(
        &["script", "-", "--json"],
        "return await tools.call('fixture_fail', {});",
    );
    assert_eq!(run.code, 1, "{run:?}");
    let json = run.json();
    assert_eq!(json["schema"], "pimcp/script/v1");
    assert_eq!(
        (json["ok"].as_bool(), json["error"]["category"].as_str()),
        (Some(false), Some("script"))
    );
    assert!(
        json["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("uncaught ToolError (tool-error): "),
        "{json}"
    );
    assert_eq!(json["calls"][0]["tool"], "fixture_fail");
    assert_eq!(json["calls"][0]["category"], "tool-error");

    let run = sb.run_with_stdin(&["script", "-"], "  \n");
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("the script is empty"), "{run:?}");
}

#[test]
fn prompts_connect_a_server_nothing_is_known_about() {
    let sb = with_fixture(json!({}));
    let run = sb.run(&["prompts", "fixture", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["schema"], "pimcp/prompts/v1");
    let prompts = &json["servers"][0]["prompts"];
    assert_eq!(prompts[0]["name"], "greet");
    assert_eq!(
        prompts[0]["arguments"],
        json!([{"name": "name", "description": "Who to greet.", "required": true}])
    );
    // No arguments: an empty list; an argument without a description: null.
    assert_eq!(prompts[2]["name"], "brief");
    assert_eq!(prompts[2]["arguments"], json!([]));
    assert_eq!(
        prompts[3]["arguments"][1],
        json!({"name": "to", "description": null, "required": false})
    );
    let human = sb.run(&["prompts"]);
    assert!(human.stdout.contains("summarize  text, style?"), "{human:?}");
    assert!(human.stdout.contains("translate  text, to?"), "{human:?}");
}

#[test]
fn unknown_and_broken_servers_have_distinct_exit_codes() {
    let sb = with_fixture(json!({ "broken": { "command": "/nonexistent/mcp-server" } }));
    let unknown = sb.run(&["connect", "nope", "--json"]);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    let json = unknown.json();
    assert_eq!(json["schema"], "pimcp/error/v1");
    assert_eq!(json["error"]["category"], "usage");
    assert_eq!(
        json["error"]["message"],
        "unknown server `nope`; configured: broken, fixture"
    );

    let broken = sb.run(&["connect", "broken", "--json"]);
    assert_eq!(broken.code, 1, "{broken:?}");
    assert!(broken.stderr.contains("broken"), "{broken:?}");
    let status = sb.run(&["status", "--connect"]);
    assert_eq!(status.code, 1, "a server failed to connect: {status:?}");
    assert!(status.stdout.contains("fixture  ✓ ready"), "{status:?}");
}

#[test]
fn no_server_process_outlives_a_command() {
    let sb = Sandbox::new();
    let pid_file = sb.root.path().join("fixture.pid");
    sb.write(
        sb.global(),
        &json!({ "mcpServers": { "fixture": {
            "command": mcp_fixture::bin_path(),
            "args": ["--pid-file", pid_file],
        } } })
        .to_string(),
    );
    let run = sb.run(&["call", "fixture_echo", r#"{"text": "x"}"#]);
    assert_eq!(run.code, 0, "{run:?}");
    let pid: u32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(!pid_alive(pid), "the fixture (pid {pid}) outlived `pimcp-run call`");
}

#[test]
fn on_a_terminal_colour_and_a_progress_line_unless_no_color() {
    let sb = with_fixture(json!({}));
    let slow = sb.run_in_terminal(&["call", "fixture_slow", r#"{"ms": 1200}"#]);
    assert_eq!(slow.code, 0, "{slow:?}");
    assert!(
        slow.stdout.contains("calling fixture_slow… "),
        "a progress line while waiting: {slow:?}"
    );
    assert!(slow.stdout.contains("\r\x1b[2K"), "the line is erased: {slow:?}");
    assert!(slow.stdout.contains("slept 1200 ms in 1 step"), "{slow:?}");

    let coloured = sb.run_in_terminal(&["status"]);
    assert_eq!(coloured.code, 0, "{coloured:?}");
    assert!(
        coloured.stdout.contains("\x1b[1mSERVER\x1b[0m"),
        "bold header on a terminal: {coloured:?}"
    );

    let plain = with_fixture(json!({}))
        .env("NO_COLOR", "1")
        .run_in_terminal(&["status"]);
    assert_eq!(plain.code, 0, "{plain:?}");
    assert!(
        plain.stdout.contains("SERVER") && !plain.stdout.contains("\x1b[1m"),
        "NO_COLOR: {plain:?}"
    );

    // No command on a terminal: how to add pimcp-run to a host, then the status table, exit 0.
    let hint = sb.run_in_terminal(&[]);
    assert_eq!(hint.code, 0, "{hint:?}");
    assert!(
        hint.stdout
            .contains(r#"{"mcpServers": {"pimcp": {"command": "pimcp-run"}}}"#),
        "{hint:?}"
    );
    assert!(hint.stdout.contains("fixture"), "{hint:?}");
}

#[test]
fn ctrl_c_interrupts_a_call_and_stops_the_server() {
    let sb = Sandbox::new();
    let pid_file = sb.root.path().join("fixture.pid");
    let events = sb.root.path().join("fixture-events.jsonl");
    sb.write(
        sb.global(),
        &json!({ "mcpServers": { "fixture": {
            "command": mcp_fixture::bin_path(),
            "args": ["--pid-file", pid_file, "--event-log", events],
        } } })
        .to_string(),
    );
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_pimcp-run"))
        .args(["call", "fixture_slow", r#"{"ms": 60000}"#, "--json"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &sb.home)
        .env("PIMCP_DATA_DIR", &sb.data)
        .current_dir(&sb.project)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = None;
    let started = crate::support::poll_until(std::time::Duration::from_secs(20), || {
        server = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok());
        server.is_some()
    });
    assert!(started, "the fixture never started");
    let server = server.unwrap();
    // Interrupt the call itself, not the connect before it: wait until the fixture has logged it.
    let calling = crate::support::poll_until(std::time::Duration::from_secs(20), || {
        std::fs::read_to_string(&events).is_ok_and(|log| {
            log.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .any(|e| e["event"] == "call" && e["name"] == "slow")
        })
    });
    assert!(calling, "the call never reached the fixture");
    // SIGINT is what Ctrl-C sends.
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["error"]["category"], "interrupted");
    assert!(
        !pid_alive(server),
        "the fixture (pid {server}) outlived the interrupted command"
    );
}

/// `debug: true` shows the server's stderr live on pimcp's stderr, as `[name] line`; without it nothing of it is
/// printed (it is kept for error messages).
#[test]
fn debug_shows_the_servers_stderr_live() {
    let fixture = mcp_fixture::bin_path();
    let noisy = |debug: bool| {
        json!({
            "command": "sh",
            "args": ["-c", "echo 'hello on stderr' >&2; exec \"$0\"", fixture],
            "debug": debug,
        })
    };
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        &json!({ "mcpServers": { "loud": noisy(true), "quiet": noisy(false) } }).to_string(),
    );
    let loud = sb.run(&["call", "loud_echo", r#"{"text":"x"}"#]);
    assert_eq!(loud.code, 0, "{loud:?}");
    assert!(loud.stderr.contains("[loud] hello on stderr"), "{loud:?}");
    let quiet = sb.run(&["call", "quiet_echo", r#"{"text":"x"}"#]);
    assert_eq!(quiet.code, 0, "{quiet:?}");
    assert!(!quiet.stderr.contains("hello on stderr"), "{quiet:?}");
}
