//! Project trust: untrusted project files list their servers as untrusted (never started), their settings and
//! imports are ignored, and a changed file is untrusted again.

use pimcp_config::{Availability, ToolPrefix};

use crate::support::{Sandbox, server};

fn untrusted(availability: &Availability) -> bool {
    matches!(availability, Availability::Untrusted { trust_command, .. } if trust_command.starts_with("pimcp-run trust "))
}

#[test]
fn untrusted_project_file() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"global": {"command": "g"}, "shared": {"command": "s"}}}"#,
    );
    sb.write(
        sb.project.join(".mcp.json"),
        r#"{"mcpServers": {"evil": {"command": "rm"}, "shared": {"args": ["--project"]}},
            "settings": {"toolPrefix": "none", "agentPluginPaths": ["/tmp"]}, "imports": ["cursor"]}"#,
    );
    sb.write(
        sb.home.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"cursor-one": {"command": "c"}}}"#,
    );
    let config = sb.load();
    assert_eq!(server(&config, "global").availability, Availability::Available);
    let evil = server(&config, "evil");
    let Availability::Untrusted {
        project_dir,
        trust_command,
    } = &evil.availability
    else {
        panic!("{:?}", evil.availability)
    };
    assert_eq!(project_dir, &sb.project);
    assert_eq!(trust_command, &format!("pimcp-run trust {}", sb.project.display()));
    assert!(
        untrusted(&server(&config, "shared").availability),
        "a project field on a global server taints it"
    );
    assert_eq!(
        config.settings.tool_prefix,
        ToolPrefix::Server,
        "untrusted settings are ignored"
    );
    assert!(config.settings.agent_plugin_paths.is_empty());
    assert!(config.server("cursor-one").is_none(), "untrusted imports are ignored");
    assert!(config.problems.iter().any(|p| p.message.contains("not trusted")));

    // Trusting the directory.
    pimcp_config::trust_project(&sb.project, &sb.data).unwrap();
    let config = sb.load();
    assert_eq!(server(&config, "evil").availability, Availability::Available);
    assert_eq!(config.settings.tool_prefix, ToolPrefix::None);
    assert!(config.server("cursor-one").is_some());

    // A changed file is untrusted again.
    sb.write(
        sb.project.join(".mcp.json"),
        r#"{"mcpServers": {"evil": {"command": "rm", "args": ["-rf"]}}}"#,
    );
    assert!(untrusted(&server(&sb.load(), "evil").availability));
}

#[test]
fn trust_for_one_run() {
    let sb = Sandbox::new();
    sb.write(
        sb.project.join(".pi/mcp.json"),
        r#"{"mcpServers": {"p": {"command": "p"}}}"#,
    );
    let mut opts = sb.opts();
    assert!(untrusted(&pimcp_config::load(&opts).server("p").unwrap().availability));
    opts.trust_project = true;
    assert_eq!(
        pimcp_config::load(&opts).server("p").unwrap().availability,
        Availability::Available
    );
    assert!(!pimcp_config::is_trusted(&sb.project, &sb.data), "nothing was recorded");
}

#[test]
fn untrusted_entry_that_only_disables_is_honoured() {
    let sb = Sandbox::new();
    sb.write(
        sb.global(),
        r#"{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b", "disabled": true}}}"#,
    );
    sb.write(
        sb.project.join(".pi/mcp.json"),
        r#"{"mcpServers": {"a": {"disabled": true}, "b": {"disabled": false}}}"#,
    );
    let config = sb.load();
    assert_eq!(server(&config, "a").availability, Availability::Disabled);
    assert!(
        untrusted(&server(&config, "b").availability),
        "enabling from an untrusted file needs trust"
    );
}

#[test]
fn project_scope_host_file_needs_trust() {
    let sb = Sandbox::new();
    sb.write(sb.global(), r#"{"imports": ["cursor"]}"#);
    sb.write(
        sb.project.join(".cursor/mcp.json"),
        r#"{"mcpServers": {"proj-cursor": {"command": "c"}}}"#,
    );
    assert!(untrusted(&server(&sb.load(), "proj-cursor").availability));
    pimcp_config::trust_project(&sb.project, &sb.data).unwrap();
    assert_eq!(server(&sb.load(), "proj-cursor").availability, Availability::Available);
}
