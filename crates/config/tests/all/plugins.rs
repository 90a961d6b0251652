//! Agent Plugins: valid packages contribute `<plugin>__<server>`, invalid entries and packages are skipped with
//! warnings, placeholders expand only in args/env/cwd, and config files outrank plugins.

use pimcp_config::{Origin, Secret, SecretValue, Severity, Transport};

use crate::support::{Sandbox, copy_dir, fixtures, server};

fn sandbox_with_plugins(extra_global: &str) -> Sandbox {
    let sb = Sandbox::new();
    copy_dir(&fixtures().join("plugins"), &sb.root.path().join("plugins"));
    let dir = sb.root.path().canonicalize().unwrap().join("plugins");
    let paths = ["acme-tools", "bad-name", "no-manifest", "absent"].map(|p| dir.join(p).to_string_lossy().into_owned());
    sb.write(
        sb.global(),
        &format!(
            r#"{{"settings": {{"agentPluginPaths": {}}}, "mcpServers": {{ {extra_global} }}}}"#,
            serde_json::json!(paths)
        ),
    );
    sb
}

#[test]
fn plugin_servers_load_with_placeholders_expanded_only_where_allowed() {
    let mut sb = sandbox_with_plugins("");
    sb.env.insert("HOME", "/should/not/expand").insert("OTHER", "nope");
    let config = sb.load();
    let root = sb.root.path().canonicalize().unwrap().join("plugins/acme-tools");
    let data = sb.data.join("plugins/acme-tools");
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["acme-tools__api", "acme-tools__db", "acme-tools__legacy"]);

    let db = server(&config, "acme-tools__db");
    let Transport::Stdio(stdio) = &db.transport else {
        panic!()
    };
    assert_eq!(stdio.command, root.join("bin/server").to_string_lossy());
    assert_eq!(
        stdio.args,
        [
            "--config".to_string(),
            format!("{}/config/db.json", root.display()),
            "--cache".into(),
            format!("{}/cache", data.display()),
            "$HOME".into(),
            "${OTHER}".into(),
        ]
    );
    assert_eq!(
        stdio.env["DATA_DIR"],
        SecretValue::Plain(Secret::new(format!("{}/db", data.display())))
    );
    assert_eq!(
        stdio.env["LITERAL"],
        SecretValue::Plain(Secret::new("!not-a-command")),
        "no !command in plugins"
    );
    assert_eq!(
        stdio.env["PLUGIN_ROOT"],
        SecretValue::Plain(Secret::new(root.to_string_lossy()))
    );
    assert_eq!(stdio.cwd.as_deref(), Some(root.as_path()));
    assert!(data.is_dir(), "plugin data dir is created");
    assert!(matches!(&db.origin, Origin::Plugin { plugin, .. } if plugin == "acme-tools"));

    let legacy = server(&config, "acme-tools__legacy");
    assert!(matches!(&legacy.transport, Transport::Http(h) if h.allow_legacy_sse));

    let warnings: Vec<String> = config
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Warning)
        .map(ToString::to_string)
        .collect();
    for expected in [
        "`escapes`",
        "`insecure`",
        "`extra-field`",
        "`reserved-env`",
        "Bad_Name",
        "plugin.json",
        "absent",
    ] {
        let hit = warnings
            .iter()
            .any(|w| w.contains(expected) || (expected == "Bad_Name" && w.contains("bad-name")));
        assert!(hit, "no warning about {expected}: {warnings:#?}");
    }
    assert!(
        config.problems.iter().all(|p| p.severity == Severity::Warning),
        "{:#?}",
        config.problems
    );
}

#[test]
fn config_files_outrank_plugins() {
    let sb = sandbox_with_plugins(r#""acme-tools__api": {"disabled": true, "description": "mine"}"#);
    let config = sb.load();
    let api = server(&config, "acme-tools__api");
    assert_eq!(api.availability, pimcp_config::Availability::Disabled);
    assert_eq!(api.description.as_deref(), Some("mine"));
    assert!(matches!(&api.provenance["url"], Origin::Plugin { .. }));
    assert!(matches!(&api.provenance["description"], Origin::File { .. }));
}
