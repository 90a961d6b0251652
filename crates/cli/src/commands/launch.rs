//! `pimcp-run` with no command. Hosts start it this way and speak MCP over stdio; a person at a terminal gets the
//! config entry to paste into a host and a one-screen summary instead of a silent wait.
//!
//! The stdio server itself arrives with the runtime: until then a non-terminal start prints the same hint and exits 2.

use std::io::IsTerminal;

use pimcp_config::Availability;

use super::Ctx;
use crate::{EXIT_OK, EXIT_USAGE};

/// The entry hosts need.
pub(crate) const HOST_ENTRY: &str = r#"{"mcpServers": {"pimcp": {"command": "pimcp-run"}}}"#;

pub(crate) fn run(ctx: &Ctx) -> anyhow::Result<u8> {
    let interactive = std::io::stdin().is_terminal();
    let mut text = format!(
        "pimcp-run fronts all your MCP servers with one `mcp` tool. Hosts (Claude Code, Cursor, Codex, Pi, Zed, VS Code, …)\n\
         start it over stdio; add this entry to the host's MCP config:\n\n  {HOST_ENTRY}\n"
    );
    if interactive {
        let config = pimcp_config::load(&ctx.opts);
        text.push_str(&format!("\nConfigured servers ({}):\n", config.servers.len()));
        for server in &config.servers {
            let state = match &server.availability {
                Availability::Available => "available".to_string(),
                Availability::Disabled => "disabled".to_string(),
                Availability::Untrusted { trust_command, .. } => format!("untrusted (run `{trust_command}`)"),
                Availability::ConfigError { message } => format!("config error: {message}"),
            };
            text.push_str(&format!("  {:<24} {state}\n", server.name));
        }
        let errors = config.problems.iter().filter(|p| p.is_error()).count();
        if errors > 0 {
            text.push_str(&format!(
                "\n{errors} configuration error(s): run `pimcp-run config check`.\n"
            ));
        }
        text.push_str("\nRun `pimcp-run --help` for the commands.\n");
        eprint!("{text}");
        Ok(EXIT_OK)
    } else {
        eprint!("{text}");
        Ok(EXIT_USAGE)
    }
}
