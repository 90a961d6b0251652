//! Direct tools (SPEC 6): upstream tools exposed beside `mcp` as first-class tools with their prefixed names and
//! upstream schemas, chosen per server by `directTools` (`true` = every exposed tool including `read_<resource>`
//! tools, a list = those original or prefixed names) or globally by `settings.directTools`, with `MCP_DIRECT_TOOLS`
//! already folded into the config. Built from the catalog, so they come from the metadata cache without connecting.
//! Hidden servers and servers that cannot start (disabled, untrusted, misconfigured) contribute none.

use std::sync::Arc;

use pimcp_actors::{Catalog, CatalogTool};
use pimcp_config::{Availability, Config, DirectTools};
use rmcp::model::Tool;

use crate::tool_def::TOOL_NAME;

/// Description of a direct tool whose upstream gave none.
pub const NO_DESCRIPTION: &str = "(no description)";

/// One direct tool: the definition the host sees and the catalog entry it calls.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectTool {
    pub tool: Tool,
    pub target: Arc<CatalogTool>,
}

/// The direct-tool surface for a catalog snapshot, in catalog order (server name, then upstream order).
pub fn direct_tools(catalog: &Catalog, config: &Config) -> Vec<DirectTool> {
    let mut out = Vec::new();
    for cfg in &config.servers {
        if cfg.hidden || cfg.availability != Availability::Available {
            continue;
        }
        let selection = cfg
            .direct_tools
            .clone()
            .unwrap_or_else(|| config.settings.direct_tools.clone());
        if selection == DirectTools::Off {
            continue;
        }
        let Some(sc) = catalog.server(&cfg.name) else {
            continue;
        };
        for t in &sc.tools {
            let chosen = match &selection {
                DirectTools::Off => false,
                DirectTools::All => true,
                DirectTools::Listed(names) => names.iter().any(|n| *n == t.original || *n == t.name),
            };
            if !chosen {
                continue;
            }
            if t.name == TOOL_NAME {
                tracing::warn!(server = %t.server, tool = %t.name, "direct tool name collides with the mcp tool; skipped");
                continue;
            }
            out.push(DirectTool {
                tool: definition(t),
                target: t.clone(),
            });
        }
    }
    out
}

/// The host-facing definition: prefixed name, upstream description and input schema (minus `$schema`), title and
/// annotations. No output schema: results are rendered text, as for `mcp`.
pub fn definition(t: &CatalogTool) -> Tool {
    let mut schema = t.input_schema().map(|s| (*s).clone()).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "registering the direct tool without its schema");
        Default::default()
    });
    schema.remove("$schema");
    if !schema.contains_key("type") {
        schema.insert("type".into(), "object".into());
    }
    let mut tool = Tool::new(
        t.name.clone(),
        t.description.as_deref().unwrap_or(NO_DESCRIPTION).to_owned(),
        Arc::new(schema),
    );
    tool.title = t.title.as_deref().map(str::to_owned);
    tool.annotations = t.annotations.as_deref().cloned();
    tool
}
