//! add / remove / enable / disable / imports: minimal edits (every other byte unchanged), mode kept, atomic
//! replacement, backups for commented files, invalid files never touched.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use pimcp_config::{AddServer, Availability, EditScope, Error, ServerSpec};

use crate::support::{Sandbox, fixtures, server};

fn stdio(name: &str, scope: EditScope) -> AddServer {
    AddServer {
        name: name.into(),
        spec: ServerSpec::Stdio {
            command: "uvx".into(),
            args: vec!["mcp-server-time".into()],
        },
        env: vec![("TZ".into(), "${TZ}".into())],
        headers: Vec::new(),
        scope,
    }
}

fn commented_global(sb: &Sandbox) -> String {
    let text = std::fs::read_to_string(fixtures().join("editing/commented.json")).unwrap();
    sb.write(sb.global(), &text);
    std::fs::set_permissions(sb.global(), std::fs::Permissions::from_mode(0o640)).unwrap();
    text
}

fn inode(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn no_temp_files(dir: &Path) {
    let leftovers: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn add_inserts_only_the_new_server() {
    let sb = Sandbox::new();
    let before = commented_global(&sb);
    let old_inode = inode(&sb.global());
    let outcome = pimcp_config::add_server(&sb.opts(), &stdio("time", EditScope::Global)).unwrap();
    assert!(outcome.changed && !outcome.created);
    let after = std::fs::read_to_string(sb.global()).unwrap();
    let expected = before.replace(
        "\"files\": { \"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"~/work\"] }\n",
        "\"files\": { \"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"~/work\"] },\n    \"time\": {\n      \"command\": \"uvx\",\n      \"args\": [\n        \"mcp-server-time\"\n      ],\n      \"env\": {\n        \"TZ\": \"${TZ}\"\n      }\n    }\n",
    );
    assert_eq!(after, expected);
    assert_eq!(mode(&sb.global()), 0o640, "mode kept");
    assert_ne!(inode(&sb.global()), old_inode, "replaced by rename");
    no_temp_files(sb.global().parent().unwrap());
    // The file had comments: the previous content is kept next to it.
    let backup = outcome.backup.expect("backup for a commented file");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), before);
    // And the result loads.
    let config = sb.load();
    assert!(config.server("time").is_some() && config.server("github").is_some());

    let err = pimcp_config::add_server(&sb.opts(), &stdio("time", EditScope::Global)).unwrap_err();
    assert!(matches!(err, Error::ServerExists { .. }), "{err}");
}

#[test]
fn add_creates_files_and_http_servers() {
    let sb = Sandbox::new();
    let request = AddServer {
        name: "docs".into(),
        spec: ServerSpec::Http {
            url: "https://docs.example/mcp".into(),
        },
        env: Vec::new(),
        headers: vec![("Authorization".into(), "Bearer ${DOCS_TOKEN}".into())],
        scope: EditScope::Project,
    };
    let outcome = pimcp_config::add_server(&sb.opts(), &request).unwrap();
    assert!(outcome.created && outcome.backup.is_none());
    assert_eq!(outcome.path, sb.project.join(".mcp.json"));
    let text = std::fs::read_to_string(&outcome.path).unwrap();
    assert_eq!(
        text,
        "{\n  \"mcpServers\": {\n    \"docs\": {\n      \"url\": \"https://docs.example/mcp\",\n      \"headers\": {\n        \"Authorization\": \"Bearer ${DOCS_TOKEN}\"\n      }\n    }\n  }\n}\n"
    );
    let global = pimcp_config::add_server(&sb.opts(), &stdio("time", EditScope::Global)).unwrap();
    assert_eq!(mode(&global.path), 0o600);
}

#[test]
fn add_to_a_trusted_project_keeps_it_trusted() {
    let mut sb = Sandbox::new();
    sb.env.insert("TZ", "UTC");
    sb.write(sb.project.join(".mcp.json"), "{\"mcpServers\": {}}\n");
    pimcp_config::trust_project(&sb.project, &sb.data).unwrap();
    pimcp_config::add_server(&sb.opts(), &stdio("time", EditScope::Project)).unwrap();
    assert!(pimcp_config::is_trusted(&sb.project, &sb.data));
    assert_eq!(server(&sb.load(), "time").availability, Availability::Available);
}

#[test]
fn invalid_input_never_damages_the_file() {
    let sb = Sandbox::new();
    let broken = "{ \"mcpServers\": { \"a\": { \"command\": \"x\" }, } oops";
    sb.write(sb.global(), broken);
    let old_inode = inode(&sb.global());
    let err = pimcp_config::add_server(&sb.opts(), &stdio("time", EditScope::Global)).unwrap_err();
    assert!(matches!(err, Error::Syntax { line: 1, .. }), "{err}");
    assert!(pimcp_config::remove_server(&sb.opts(), "a", None).is_err());
    assert!(pimcp_config::add_imports(&sb.opts(), &[pimcp_config::imports::HostKind::Cursor]).is_err());
    assert_eq!(std::fs::read_to_string(sb.global()).unwrap(), broken);
    assert_eq!(inode(&sb.global()), old_inode);

    let sb = Sandbox::new();
    let bad_name = AddServer {
        name: " ".into(),
        ..stdio("x", EditScope::Global)
    };
    assert!(matches!(
        pimcp_config::add_server(&sb.opts(), &bad_name),
        Err(Error::InvalidName { .. })
    ));
    let empty = AddServer {
        spec: ServerSpec::Stdio {
            command: "".into(),
            args: vec![],
        },
        ..stdio("x", EditScope::Global)
    };
    assert!(pimcp_config::add_server(&sb.opts(), &empty).is_err());
    assert!(!sb.global().exists(), "nothing written for bad input");
}

#[test]
fn remove_takes_out_only_that_member() {
    let sb = Sandbox::new();
    let before = commented_global(&sb);
    sb.write(
        sb.home.join(".agents/mcp.json"),
        "{\"mcp-servers\": {\"files\": {\"command\": \"old\"}, \"keep\": {\"command\": \"k\"}}}\n",
    );
    let outcomes = pimcp_config::remove_server(&sb.opts(), "files", None).unwrap();
    assert_eq!(outcomes.len(), 2, "removed from every pimcp file that defines it");
    let after = std::fs::read_to_string(sb.global()).unwrap();
    let expected = before.replace(
        ", // token from the shell\n    },\n    /* a local one */\n    \"files\": { \"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"~/work\"] }\n",
        ", // token from the shell\n    }\n    /* a local one */\n",
    );
    assert_eq!(after, expected);
    assert_eq!(mode(&sb.global()), 0o640);
    assert_eq!(
        std::fs::read_to_string(sb.home.join(".agents/mcp.json")).unwrap(),
        "{\"mcp-servers\": {\"keep\": {\"command\": \"k\"}}}\n"
    );
    let config = sb.load();
    assert!(config.server("files").is_none() && config.server("github").is_some() && config.server("keep").is_some());

    let err = pimcp_config::remove_server(&sb.opts(), "gthub", None).unwrap_err();
    assert!(err.to_string().contains("did you mean `github`"), "{err}");
}

#[test]
fn imported_servers_cannot_be_removed() {
    let sb = Sandbox::new();
    sb.write(
        sb.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"c": {"command": "c"}}}"#,
    );
    sb.write(sb.global(), r#"{"imports": ["cursor"]}"#);
    let err = pimcp_config::remove_server(&sb.opts(), "c", None).unwrap_err();
    assert!(matches!(err, Error::NotEditable { .. }), "{err}");
    assert!(err.to_string().contains("cursor"), "{err}");
}

#[test]
fn disable_and_enable_write_only_disabled_into_the_project_override() {
    let mut sb = Sandbox::new();
    sb.env.insert("GITHUB_TOKEN", "ghp-planted");
    let global_before = commented_global(&sb);
    let opts = sb.opts();

    let outcome = pimcp_config::set_disabled(&opts, "github", true).unwrap();
    assert_eq!(outcome.path, sb.project.join(".pi/mcp.json"));
    assert!(outcome.created);
    let written = std::fs::read_to_string(&outcome.path).unwrap();
    assert_eq!(
        written,
        "{\n  \"mcpServers\": {\n    \"github\": {\n      \"disabled\": true\n    }\n  }\n}\n"
    );
    assert!(!written.contains("GITHUB_TOKEN"), "no credentials copied");
    assert_eq!(
        std::fs::read_to_string(sb.global()).unwrap(),
        global_before,
        "the source file is untouched"
    );
    assert_eq!(
        server(&sb.load(), "github").availability,
        Availability::Disabled,
        "an untrusted file may disable"
    );

    // Enabling when no lower layer disables: the field is removed, not set to false.
    let outcome = pimcp_config::set_disabled(&opts, "github", false).unwrap();
    assert!(outcome.changed);
    assert_eq!(
        std::fs::read_to_string(&outcome.path).unwrap(),
        "{\n  \"mcpServers\": {\n  }\n}\n"
    );
    assert_eq!(server(&sb.load(), "github").availability, Availability::Available);
    assert!(
        !pimcp_config::set_disabled(&opts, "github", false).unwrap().changed,
        "already enabled"
    );
}

#[test]
fn enable_writes_false_only_when_a_lower_layer_disables() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"off": {"command": "x", "enabled": false}}}"#,
    );
    let pi_project = sb.write(
        sb.project.join(".pi/mcp.json"),
        "{\n  // mine\n  \"mcpServers\": {\n    \"off\": { \"description\": \"keep me\" }\n  }\n}\n",
    );
    pimcp_config::trust_project(&sb.project, &sb.data).unwrap();
    let outcome = pimcp_config::set_disabled(&sb.opts(), "off", false).unwrap();
    assert_eq!(
        std::fs::read_to_string(&pi_project).unwrap(),
        "{\n  // mine\n  \"mcpServers\": {\n    \"off\": { \"description\": \"keep me\", \"disabled\": false }\n  }\n}\n"
    );
    assert!(outcome.backup.is_some(), "commented file backed up");
    assert!(
        pimcp_config::is_trusted(&sb.project, &sb.data),
        "pimcp's own edit keeps a trusted project trusted"
    );
    assert_eq!(server(&sb.load(), "off").availability, Availability::Available);

    let err = pimcp_config::set_disabled(&sb.opts(), "nope", true).unwrap_err();
    assert!(matches!(err, Error::UnknownServer { .. }), "{err}");
}

#[test]
fn add_imports_merges_into_the_existing_list_with_a_backup() {
    use pimcp_config::imports::HostKind;
    let sb = Sandbox::new();
    sb.write(sb.global(), "{\n  \"imports\": [\"codex\"],\n  \"mcpServers\": {}\n}\n");
    let outcome = pimcp_config::add_imports(&sb.opts(), &[HostKind::Cursor, HostKind::Codex]).unwrap();
    assert_eq!(
        std::fs::read_to_string(sb.global()).unwrap(),
        "{\n  \"imports\": [\n    \"codex\",\n    \"cursor\"\n  ],\n  \"mcpServers\": {}\n}\n"
    );
    assert_eq!(
        std::fs::read_to_string(outcome.backup.unwrap()).unwrap(),
        "{\n  \"imports\": [\"codex\"],\n  \"mcpServers\": {}\n}\n"
    );
}

#[test]
fn symlinked_config_is_edited_at_its_target() {
    let sb = Sandbox::new();
    let real = sb.write(sb.root.path().join("dotfiles/mcp.json"), "{}\n");
    std::fs::create_dir_all(sb.global().parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, sb.global()).unwrap();
    pimcp_config::add_server(&sb.opts(), &stdio("time", EditScope::Global)).unwrap();
    assert!(std::fs::symlink_metadata(sb.global()).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().contains("\"time\""));
}
