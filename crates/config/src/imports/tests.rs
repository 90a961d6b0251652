//! Tests of the host imports against the fixture trees under `tests/fixtures/imports` (fake HOME and project
//! directories, one tree per host; see its README).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::*;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/imports")
}

/// An env whose home is `<tree>/home` and project is `<tree>/project`.
fn tree_env(tree: &str) -> ImportEnv {
    let root = fixtures().join(tree);
    ImportEnv {
        home: root.join("home"),
        project_dir: root.join("project"),
        os: Os::Linux,
        appdata: None,
        xdg_config_home: None,
        codex_home: None,
    }
}

fn read_all_ok(host: HostKind, env: &ImportEnv) -> Vec<ImportedFile> {
    read_host(host, env)
        .into_iter()
        .map(|r| r.unwrap_or_else(|err| panic!("{host}: {err}")))
        .collect()
}

fn server<'a>(file: &'a ImportedFile, name: &str) -> &'a Map<String, Value> {
    &file
        .servers
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no server `{name}` in {file:?}"))
        .1
}

fn names(file: &ImportedFile) -> Vec<&str> {
    file.servers.iter().map(|(n, _)| n.as_str()).collect()
}

fn obj(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn note(server: &str, field: Option<&str>, message_part: &str) -> impl Fn(&ImportNote) -> bool {
    let (server, field, part) = (server.to_string(), field.map(str::to_string), message_part.to_string());
    move |n: &ImportNote| n.server.as_deref() == Some(server.as_str()) && n.field == field && n.message.contains(&part)
}

fn assert_note(file: &ImportedFile, server: &str, field: Option<&str>, message_part: &str) {
    assert!(
        file.notes.iter().any(note(server, field, message_part)),
        "missing note for {server}/{field:?} containing {message_part:?}; notes: {:#?}",
        file.notes
    );
}

/// No note or error text may contain a configured value.
fn assert_no_values_in_notes(file: &ImportedFile, values: &[&str]) {
    for n in &file.notes {
        let text = format!("{n} {n:?}");
        for value in values {
            assert!(!text.contains(value), "note leaks `{value}`: {text}");
        }
    }
}

fn p(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------------------------
// HostKind

#[test]
fn host_ids_round_trip_and_ignore_case() {
    for host in HostKind::ALL {
        assert_eq!(HostKind::from_id(host.id()), Some(host));
        assert_eq!(HostKind::from_id(&host.id().to_uppercase()), Some(host));
        assert_eq!(serde_json::to_value(host).unwrap(), json!(host.id()));
    }
    assert_eq!(HostKind::from_id(" Claude-Code "), Some(HostKind::ClaudeCode));
    assert_eq!(HostKind::from_id("claude"), None);
    assert_eq!(HostKind::from_id("vs-code"), None);
}

// ---------------------------------------------------------------------------------------------------------------
// Cursor

#[test]
fn cursor_user_file_translates_field_by_field() {
    let env = tree_env("cursor");
    let files = read_all_ok(HostKind::Cursor, &env);
    assert_eq!(files.len(), 2, "user file then project file");
    let user = &files[0];
    assert_eq!(user.path, env.home.join(".cursor/mcp.json"));
    assert_eq!(user.scope(&env), ImportScope::User);
    assert_eq!(names(user), ["github", "linear", "pipeshub", "legacy"]);
    assert_eq!(
        server(user, "github"),
        &obj(json!({
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
        }))
    );
    assert_eq!(
        server(user, "linear"),
        &obj(json!({"url": "https://mcp.linear.app/mcp", "headers": {"Authorization": "Bearer ${LINEAR_API_KEY}"}}))
    );
    assert_eq!(
        server(user, "pipeshub"),
        &obj(json!({
            "url": "https://pipeshub.example.com/mcp",
            "oauth": {
                "clientId": "${PIPESHUB_CLIENT_ID}",
                "clientSecret": "${PIPESHUB_CLIENT_SECRET}",
                "scope": "openid offline_access"
            }
        }))
    );
    assert_eq!(
        server(user, "legacy"),
        &obj(json!({"command": "node", "args": ["server.js"]}))
    );
    assert_note(user, "broken", None, "not an object");
    assert_note(user, "legacy", Some("disabled"), "no pimcp equivalent");
}

#[test]
fn cursor_project_file_expands_workspace_variables_and_reads_env_file() {
    let env = tree_env("cursor");
    let files = read_all_ok(HostKind::Cursor, &env);
    let project = &files[1];
    assert_eq!(project.path, env.project_dir.join(".cursor/mcp.json"));
    assert_eq!(project.scope(&env), ImportScope::Project);
    let dir = p(&env.project_dir);
    assert_eq!(
        server(project, "db"),
        &obj(json!({
            "type": "stdio",
            "command": format!("{dir}/bin/db-mcp"),
            "args": ["--root", dir, "--name", "project", "--budget=$$5", format!("--home={}", p(&env.home))],
            // envFile variables first (escaped: they are literal), the entry's own `env` wins for LOG_LEVEL.
            "env": {
                "DB_URL": "postgres://app:pa$$$$word@localhost/app",
                "DB_POOL": "5",
                "LOG_LEVEL": "debug",
                "BANNER": "!!important"
            }
        }))
    );
    assert_note(project, "db", Some("envFile"), "1 line(s)");
    assert_eq!(server(project, "missing-env-file"), &obj(json!({"command": "srv"})));
    assert_note(project, "missing-env-file", Some("envFile"), "could not be read");
    assert_no_values_in_notes(project, &["pa$$word", "postgres", ".env.does-not-exist", ".env.mcp"]);
}

// ---------------------------------------------------------------------------------------------------------------
// Claude Code

fn claude_code_env() -> ImportEnv {
    ImportEnv {
        project_dir: PathBuf::from("/srv/demo-project"),
        ..tree_env("claude-code")
    }
}

#[test]
fn claude_code_reads_user_scope_and_the_project_local_scope() {
    let env = claude_code_env();
    assert_eq!(
        candidate_paths(HostKind::ClaudeCode, &env),
        [env.home.join(".claude.json")]
    );
    let files = read_all_ok(HostKind::ClaudeCode, &env);
    assert_eq!(files.len(), 1);
    let file = &files[0];
    // User order, the local-scope `memory` replacing the user one in place, new local servers appended.
    assert_eq!(names(file), ["sentry", "memory", "api", "legacy-sse", "local-db"]);
    assert_eq!(
        server(file, "sentry"),
        &obj(json!({
            "type": "http",
            "url": "https://mcp.sentry.dev/mcp",
            "oauth": {"clientId": "sentry-client", "callbackPort": 8765},
            "enabled": false  // projects[dir].disabledMcpServers
        }))
    );
    assert_eq!(
        server(file, "memory"),
        &obj(json!({"type": "stdio", "command": "uvx", "args": ["mcp-memory"]})),
        "the local scope replaces the user definition as a whole"
    );
    assert_eq!(
        server(file, "api"),
        &obj(json!({
            "type": "http",
            "url": "${API_BASE_URL:-https://api.example.com}/mcp",
            "headers": {"Authorization": "Bearer ${API_KEY}"}
        }))
    );
    assert_eq!(
        server(file, "legacy-sse"),
        &obj(json!({"type": "sse", "url": "https://legacy.example.com/sse"}))
    );
    assert_eq!(
        server(file, "local-db"),
        &obj(json!({"type": "stdio", "command": "./bin/db-mcp", "args": []}))
    );
    assert_note(file, "api", Some("headersHelper"), "no pimcp equivalent");
    assert_note(file, "websocket", Some("type"), "server skipped");
    assert!(
        !names(file).contains(&"other"),
        "another project's servers are not imported"
    );
    assert_no_values_in_notes(file, &["get-mcp-headers", "ws://"]);
}

#[test]
fn claude_code_user_scope_keeps_dollar_brace_and_escapes_bare_dollars() {
    let env = ImportEnv {
        project_dir: PathBuf::from("/elsewhere"),
        ..tree_env("claude-code")
    };
    let file = &read_all_ok(HostKind::ClaudeCode, &env)[0];
    assert_eq!(
        server(file, "memory"),
        &obj(json!({
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-memory"],
            "env": {"MEMORY_FILE_PATH": "${HOME}/.memory.json", "PRICE": "$$5"}
        }))
    );
    assert!(
        server(file, "sentry").get("enabled").is_none(),
        "disabledMcpServers is per project"
    );
    assert!(!names(file).contains(&"local-db"));
}

// ---------------------------------------------------------------------------------------------------------------
// Claude Desktop, per OS

#[test]
fn claude_desktop_paths_per_os() {
    let home = PathBuf::from("/home/ada");
    let env = |os, appdata: Option<&str>, xdg: Option<&str>| ImportEnv {
        home: home.clone(),
        project_dir: PathBuf::from("/proj"),
        os,
        appdata: appdata.map(PathBuf::from),
        xdg_config_home: xdg.map(PathBuf::from),
        codex_home: None,
    };
    let paths = |e: ImportEnv| candidate_paths(HostKind::ClaudeDesktop, &e);
    assert_eq!(
        paths(env(Os::MacOs, None, Some("/xdg"))),
        [home.join("Library/Application Support/Claude/claude_desktop_config.json")]
    );
    assert_eq!(
        paths(env(Os::Linux, None, None)),
        [home.join(".config/Claude/claude_desktop_config.json")]
    );
    assert_eq!(
        paths(env(Os::Linux, None, Some("/xdg"))),
        [PathBuf::from("/xdg/Claude/claude_desktop_config.json")]
    );
    assert_eq!(
        paths(env(Os::Windows, Some("/appdata"), Some("/xdg"))),
        [PathBuf::from("/appdata/Claude/claude_desktop_config.json")]
    );
    assert_eq!(
        paths(env(Os::Windows, None, None)),
        [home.join("AppData/Roaming/Claude/claude_desktop_config.json")]
    );
}

#[test]
fn claude_desktop_reads_each_os_tree() {
    let base = fixtures().join("claude-desktop");
    let mk = |os, home: &str, appdata: Option<&str>, xdg: Option<&str>| ImportEnv {
        home: base.join(home),
        project_dir: base.join("no-project"),
        os,
        appdata: appdata.map(|a| base.join(a)),
        xdg_config_home: xdg.map(|x| base.join(x)),
        codex_home: None,
    };
    let mac = read_all_ok(HostKind::ClaudeDesktop, &mk(Os::MacOs, "macos/home", None, None));
    assert_eq!(mac.len(), 1);
    let file = &mac[0];
    assert_eq!(names(file), ["filesystem", "weather"]);
    assert_eq!(
        server(file, "weather"),
        &obj(json!({
            "command": "uv",
            "args": ["--directory", "/Users/ada/weather", "run", "weather.py"],
            // Claude Desktop expands nothing: every `$` is literal, and so is a leading `!`.
            "env": {"WEATHER_API_KEY": "$$ecret$${x}", "GREETING": "!!hello"}
        }))
    );
    assert!(
        file.notes.is_empty(),
        "top-level keys other than mcpServers are not server fields: {:?}",
        file.notes
    );

    let linux = read_all_ok(HostKind::ClaudeDesktop, &mk(Os::Linux, "linux/home", None, None));
    assert_eq!(names(&linux[0]), ["filesystem"]);
    let xdg = read_all_ok(
        HostKind::ClaudeDesktop,
        &mk(Os::Linux, "linux/home", None, Some("linux-xdg/xdg")),
    );
    assert_eq!(
        names(&xdg[0]),
        ["xdg-filesystem"],
        "XDG_CONFIG_HOME wins over ~/.config"
    );
    let win = read_all_ok(
        HostKind::ClaudeDesktop,
        &mk(Os::Windows, "windows/home", Some("windows/appdata"), None),
    );
    assert_eq!(
        server(&win[0], "filesystem"),
        &obj(json!({
            "command": "C:\\Program Files\\nodejs\\npx.cmd",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "C:\\Users\\ada\\Desktop"],
            "env": {"APPDATA": "C:\\Users\\ada\\AppData\\Roaming"}
        }))
    );
}

// ---------------------------------------------------------------------------------------------------------------
// VS Code

#[test]
fn vscode_servers_inputs_and_variables() {
    let env = tree_env("vscode");
    assert_eq!(
        candidate_paths(HostKind::VsCode, &env),
        [
            env.home.join(".config/Code/User/mcp.json"),
            env.project_dir.join(".vscode/mcp.json")
        ]
    );
    let files = read_all_ok(HostKind::VsCode, &env);
    assert_eq!(files.len(), 2);
    let user = &files[0];
    assert_eq!(
        server(user, "context7"),
        &obj(json!({"type": "http", "url": "https://mcp.context7.com/mcp"}))
    );
    assert_note(user, "context7", Some("gallery"), "no pimcp equivalent");
    assert_note(user, "context7", Some("version"), "no pimcp equivalent");

    let project = &files[1];
    assert_eq!(names(project), ["Perplexity", "fetch", "github", "legacy"]);
    assert_eq!(
        server(project, "Perplexity"),
        &obj(json!({
            "type": "stdio",
            "command": "docker",
            "args": ["run", "-i", "--rm", "-e", "PERPLEXITY_API_KEY", "mcp/perplexity-ask"],
            "env": {"CACHE_DIR": format!("{}/.cache/perplexity", p(&env.home))}
        }))
    );
    assert_note(
        project,
        "Perplexity",
        Some("env.PERPLEXITY_API_KEY"),
        "`${input:perplexity-key}`",
    );
    assert_eq!(
        server(project, "fetch"),
        &obj(json!({
            "type": "stdio",
            "command": "uvx",
            "args": ["mcp-server-fetch", "--root", p(&env.project_dir)],
            "env": {"FETCH_USER_AGENT": "pimcp-test/1.0"}
        }))
    );
    assert_note(project, "fetch", Some("dev"), "no pimcp equivalent");
    assert_eq!(
        server(project, "github"),
        &obj(json!({
            "type": "http",
            "url": "https://api.githubcopilot.com/mcp/",
            "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}
        }))
    );
    assert_note(project, "tenant-api", Some("url"), "`${input:tenant}`");
    assert_eq!(
        server(project, "legacy"),
        &obj(json!({"type": "sse", "url": "http://localhost:3001/sse"}))
    );
}

#[test]
fn vscode_mcp_servers_key_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let env = ImportEnv {
        home: PathBuf::new(),
        project_dir: dir.path().to_path_buf(),
        ..tree_env("vscode")
    };
    std::fs::create_dir_all(dir.path().join(".vscode")).unwrap();
    std::fs::write(
        dir.path().join(".vscode/mcp.json"),
        r#"{"mcpServers": {"a": {"command": "a"}}}"#,
    )
    .unwrap();
    let files = read_all_ok(HostKind::VsCode, &env);
    assert_eq!(files.len(), 1, "an empty home disables user-scope files");
    assert!(files[0].servers.is_empty());
    assert!(
        files[0]
            .notes
            .iter()
            .any(|n| n.field.as_deref() == Some("mcpServers") && n.server.is_none())
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Windsurf

#[test]
fn windsurf_server_url_disabled_and_disabled_tools() {
    let env = tree_env("windsurf");
    assert_eq!(
        candidate_paths(HostKind::Windsurf, &env),
        [env.home.join(".codeium/windsurf/mcp_config.json")]
    );
    let files = read_all_ok(HostKind::Windsurf, &env);
    let file = &files[0];
    assert_eq!(names(file), ["github", "figma", "notion", "keyfile", "extras"]);
    assert_eq!(
        server(file, "github"),
        &obj(json!({
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
            "excludeTools": ["delete_repository"]
        }))
    );
    assert_eq!(
        server(file, "figma"),
        &obj(json!({"url": "https://mcp.figma.com/mcp", "headers": {"Authorization": "Bearer ${FIGMA_TOKEN}"}}))
    );
    assert_eq!(
        server(file, "notion"),
        &obj(json!({"url": "https://mcp.notion.com/mcp", "enabled": false}))
    );
    assert_eq!(
        server(file, "keyfile"),
        &obj(json!({"command": "keyfile-mcp", "env": {"MODE": "fast"}}))
    );
    assert_note(file, "keyfile", Some("env.API_KEY"), "`${file:…}`");
    assert_eq!(server(file, "extras"), &obj(json!({"command": "extras-mcp"})));
    assert_note(
        file,
        "extras",
        Some("alwaysAllow"),
        "Windsurf field has no pimcp equivalent",
    );
    assert_no_values_in_notes(file, &["/home/ada/.keys", "read_file"]);
}

// ---------------------------------------------------------------------------------------------------------------
// OpenCode

#[test]
fn opencode_paths_respect_xdg_and_project_variants() {
    let env = ImportEnv {
        xdg_config_home: Some(PathBuf::from("/xdg")),
        ..tree_env("opencode")
    };
    let project = &env.project_dir;
    assert_eq!(
        candidate_paths_scoped(HostKind::OpenCode, &env),
        [
            (ImportScope::User, PathBuf::from("/xdg/opencode/config.json")),
            (ImportScope::User, PathBuf::from("/xdg/opencode/opencode.json")),
            (ImportScope::User, PathBuf::from("/xdg/opencode/opencode.jsonc")),
            (ImportScope::Project, project.join("opencode.json")),
            (ImportScope::Project, project.join("opencode.jsonc")),
            (ImportScope::Project, project.join(".opencode/opencode.json")),
            (ImportScope::Project, project.join(".opencode/opencode.jsonc")),
        ]
    );
}

#[test]
fn opencode_v1_entries() {
    let env = tree_env("opencode");
    let files = read_all_ok(HostKind::OpenCode, &env);
    assert_eq!(files.len(), 2);
    let v1 = &files[0];
    assert_eq!(v1.path, env.home.join(".config/opencode/opencode.json"));
    assert_eq!(names(v1), ["everything", "sentry", "context7", "secrets"]);
    assert_eq!(
        server(v1, "everything"),
        &obj(json!({
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-everything"],
            "env": {"MY_ENV_VAR": "{env:MY_VAR}", "PRICE": "$$5"},
            "enabled": true
        }))
    );
    assert_eq!(
        server(v1, "sentry"),
        &obj(json!({
            "url": "https://mcp.sentry.dev/mcp",
            "oauth": {"clientId": "{env:SENTRY_CLIENT_ID}", "scope": "org:read"},
            "requestTimeoutMs": 10000
        }))
    );
    assert_note(v1, "sentry", Some("oauth.authorizationEndpoint"), "no pimcp equivalent");
    assert_eq!(
        server(v1, "context7"),
        &obj(json!({
            "url": "https://mcp.context7.com/mcp",
            "headers": {"CONTEXT7_API_KEY": "{env:CONTEXT7_API_KEY}"},
            "oauth": false,
            "enabled": false
        }))
    );
    assert_eq!(
        server(v1, "secrets"),
        &obj(json!({"command": "secrets-mcp", "env": {}}))
    );
    assert_note(v1, "secrets", Some("environment.TOKEN"), "`{file:…}`");
    assert_no_values_in_notes(v1, &["sentry.io/oauth", "~/.secrets"]);
}

#[test]
fn opencode_v2_servers_with_global_timeout() {
    let env = tree_env("opencode");
    let v2 = &read_all_ok(HostKind::OpenCode, &env)[1];
    assert_eq!(v2.path, env.project_dir.join("opencode.jsonc"));
    assert_eq!(v2.scope(&env), ImportScope::Project);
    assert_eq!(names(v2), ["my-server", "jira"]);
    assert_eq!(
        server(v2, "my-server"),
        &obj(json!({
            "command": "bun",
            "args": ["x", "my-mcp-command"],
            "cwd": "./tools",
            "env": {"PORT": "8080"},
            "startupTimeout": 1.5,
            "requestTimeoutMs": 4000,
            "toolTimeout": 90   // from the global mcp.timeout
        }))
    );
    assert_note(v2, "my-server", Some("codemode"), "no pimcp equivalent");
    assert_eq!(
        server(v2, "jira"),
        &obj(json!({
            "url": "https://jira.example.com/mcp",
            "enabled": false,
            "oauth": {"clientId": "pimcp", "callbackPort": 19876},
            "startupTimeout": 20,
            "toolTimeout": 90
        }))
    );
}

#[test]
fn opencode_v1_entry_wins_over_v2_entry_of_the_same_name() {
    let dir = tempfile::tempdir().unwrap();
    let env = ImportEnv {
        home: PathBuf::new(),
        project_dir: dir.path().to_path_buf(),
        ..tree_env("opencode")
    };
    std::fs::write(
        dir.path().join("opencode.json"),
        r#"{"mcp": {"a": {"type": "local", "command": ["v1"]},
                    "servers": {"a": {"type": "local", "command": ["v2"]}, "b": {"type": "remote", "url": "u"}},
                    "weird": {"type": "pipe"}, "none": {}}}"#,
    )
    .unwrap();
    let file = &read_all_ok(HostKind::OpenCode, &env)[0];
    assert_eq!(names(file), ["a", "b"]);
    assert_eq!(server(file, "a"), &obj(json!({"command": "v1"})));
    assert_note(file, "a", None, "V1 entry is imported");
    assert_note(file, "weird", Some("type"), "server skipped");
    assert_note(file, "none", None, "skipped");
}

// ---------------------------------------------------------------------------------------------------------------
// Codex

#[test]
fn codex_translates_every_field() {
    let env = ImportEnv {
        project_dir: PathBuf::from("/nowhere"),
        ..tree_env("codex")
    };
    let files = read_all_ok(HostKind::Codex, &env);
    assert_eq!(files.len(), 1);
    let file = &files[0];
    assert_eq!(file.path, env.home.join(".codex/config.toml"));
    assert_eq!(names(file), ["docs", "figma", "legacy"], "file order, not alphabetical");
    assert_eq!(
        server(file, "docs"),
        &obj(json!({
            "command": "npx",
            "args": ["-y", "mcp-server-docs", "--budget=$$5"],
            "cwd": "/srv/docs",
            "startupTimeout": 20,
            "toolTimeout": 45.5,
            "includeTools": ["search", "fetch"],
            "excludeTools": ["fetch"],
            // env_vars forward by reference; the explicit env table wins for LANG.
            "env": {"DOCS_TOKEN": "${DOCS_TOKEN}", "LANG": "C", "LOG": "debug", "BANNER": "!!hello"}
        }))
    );
    assert_note(file, "docs", Some("required"), "Codex field has no pimcp equivalent");
    assert_eq!(
        server(file, "figma"),
        &obj(json!({
            "url": "https://mcp.figma.com/mcp",
            "auth": "bearer",
            "bearerTokenEnv": "FIGMA_OAUTH_TOKEN",
            "approveTools": true,
            "headers": {"X-Figma-Region": "us-east-1", "X-Team": "${FIGMA_TEAM}"},
            "oauth": {"scope": "files:read offline_access"}
        }))
    );
    assert_note(file, "figma", Some("oauth_resource"), "no pimcp equivalent");
    assert_eq!(
        server(file, "legacy"),
        &obj(json!({
            "command": "python",
            "args": ["server.py"],
            "startupTimeout": 60.5,
            "enabled": false,
            "approveTools": ["delete_all"]
        }))
    );
    assert_note(file, "legacy", Some("tools.list_all"), "approval_mode");
    assert_no_values_in_notes(file, &["mcp.figma.com", "us-east-1"]);
}

#[test]
fn codex_home_and_project_layer() {
    let root = fixtures().join("codex");
    let env = ImportEnv {
        codex_home: Some(root.join("codex-home")),
        ..tree_env("codex")
    };
    assert_eq!(
        candidate_paths_scoped(HostKind::Codex, &env),
        [
            (ImportScope::User, root.join("codex-home/config.toml")),
            (ImportScope::Project, root.join("project/.codex/config.toml"))
        ]
    );
    let files = read_all_ok(HostKind::Codex, &env);
    assert_eq!(names(&files[0]), ["from-codex-home"]);
    assert_eq!(
        server(&files[1], "docs"),
        &obj(json!({"args": ["-y", "mcp-server-docs@next"]}))
    );
    assert_eq!(files[1].scope(&env), ImportScope::Project);
}

#[test]
fn codex_non_table_server_is_skipped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".codex")).unwrap();
    std::fs::write(
        dir.path().join(".codex/config.toml"),
        "[mcp_servers]\nshorthand = \"npx -y some-server\"\n\n[mcp_servers.ok]\ncommand = \"ok\"\nenv_vars = [\"GOOD\", \"bad name\"]\n",
    )
    .unwrap();
    let env = ImportEnv {
        home: dir.path().to_path_buf(),
        project_dir: PathBuf::new(),
        os: Os::Linux,
        appdata: None,
        xdg_config_home: None,
        codex_home: None,
    };
    let file = &read_all_ok(HostKind::Codex, &env)[0];
    assert_eq!(names(file), ["ok"]);
    assert_eq!(
        server(file, "ok"),
        &obj(json!({"command": "ok", "env": {"GOOD": "${GOOD}"}}))
    );
    assert_note(file, "shorthand", None, "not a table");
    assert_note(file, "ok", Some("env_vars[1]"), "not a variable name");
    assert_no_values_in_notes(file, &["npx -y", "bad name"]);
}

// ---------------------------------------------------------------------------------------------------------------
// Errors and missing files

#[test]
fn json_syntax_error_has_line_and_column_and_other_files_still_load() {
    let env = tree_env("broken");
    let results = read_host(HostKind::Cursor, &env);
    assert_eq!(results.len(), 2);
    match &results[0] {
        Err(ImportError::Syntax {
            path,
            line,
            column,
            message,
        }) => {
            assert_eq!(path, &env.home.join(".cursor/mcp.json"));
            assert_eq!((*line, *column), (4, 5), "{message}");
            let shown = results[0].as_ref().unwrap_err().to_string();
            assert!(shown.ends_with(&format!("mcp.json:4:5: {message}")), "{shown}");
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
    let ok = results[1].as_ref().unwrap();
    assert_eq!(names(ok), ["still-loads"]);
}

#[test]
fn toml_syntax_error_has_line_and_column() {
    let env = tree_env("broken");
    let results = read_host(HostKind::Codex, &env);
    assert_eq!(results.len(), 1);
    match &results[0] {
        Err(ImportError::Syntax {
            path,
            line,
            column,
            message,
        }) => {
            assert_eq!(path, &env.home.join(".codex/config.toml"));
            assert_eq!(*line, 3, "{message}");
            assert!(*column > 1, "{column}");
            assert!(
                !message.contains("unterminated]"),
                "the message must not quote the value: {message}"
            );
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn wrong_shape_is_an_error_for_that_file() {
    let env = tree_env("broken");
    let results = read_host(HostKind::Windsurf, &env);
    match results.as_slice() {
        [Err(err @ ImportError::Shape { .. })] => {
            assert!(
                err.to_string()
                    .ends_with("mcp_config.json: `mcpServers` is not an object"),
                "{err}"
            );
        }
        other => panic!("expected one shape error, got {other:?}"),
    }
}

#[test]
fn missing_files_give_nothing_for_every_host() {
    let dir = tempfile::tempdir().unwrap();
    for os in [Os::Linux, Os::MacOs, Os::Windows] {
        let env = ImportEnv {
            home: dir.path().join("home"),
            project_dir: dir.path().join("project"),
            os,
            appdata: Some(dir.path().join("appdata")),
            xdg_config_home: None,
            codex_home: None,
        };
        for host in HostKind::ALL {
            assert!(read_host(host, &env).is_empty(), "{host} on {os:?}");
            assert!(!candidate_paths(host, &env).is_empty(), "{host} has candidates");
        }
        assert!(detect_hosts(&env).is_empty());
    }
}

#[test]
fn empty_and_comment_only_files_have_no_servers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cursor")).unwrap();
    std::fs::write(dir.path().join(".cursor/mcp.json"), "// nothing yet\n").unwrap();
    std::fs::write(dir.path().join(".claude.json"), r#"{"numStartups": 1}"#).unwrap();
    let env = ImportEnv {
        home: dir.path().to_path_buf(),
        project_dir: PathBuf::new(),
        os: Os::Linux,
        appdata: None,
        xdg_config_home: None,
        codex_home: None,
    };
    for host in [HostKind::Cursor, HostKind::ClaudeCode] {
        let files = read_all_ok(host, &env);
        assert_eq!(files.len(), 1, "{host}");
        assert!(
            files[0].servers.is_empty() && files[0].notes.is_empty(),
            "{host}: {:?}",
            files[0]
        );
    }
}

#[test]
fn unreadable_file_is_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be cannot be read as text.
    std::fs::create_dir_all(dir.path().join(".codeium/windsurf/mcp_config.json")).unwrap();
    let env = ImportEnv {
        home: dir.path().to_path_buf(),
        project_dir: PathBuf::new(),
        os: Os::Linux,
        appdata: None,
        xdg_config_home: None,
        codex_home: None,
    };
    match read_host(HostKind::Windsurf, &env).as_slice() {
        [Err(err @ ImportError::Read { .. })] => assert!(err.to_string().starts_with("cannot read "), "{err}"),
        other => panic!("expected one read error, got {other:?}"),
    }
}

#[test]
fn detect_hosts_lists_existing_files() {
    let env = tree_env("cursor");
    assert_eq!(
        detect_hosts(&env),
        [(
            HostKind::Cursor,
            vec![
                env.home.join(".cursor/mcp.json"),
                env.project_dir.join(".cursor/mcp.json")
            ]
        )]
    );
    let env = tree_env("vscode");
    let found = detect_hosts(&env);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, HostKind::VsCode);
    assert_eq!(found[0].1.len(), 2);
}

#[test]
fn from_process_uses_the_given_project_dir() {
    let env = ImportEnv::from_process(PathBuf::from("/some/project"));
    assert_eq!(env.project_dir, PathBuf::from("/some/project"));
    assert_eq!(env.os, Os::current());
    if let Some(xdg) = &env.xdg_config_home {
        assert!(xdg.is_absolute());
    }
}
