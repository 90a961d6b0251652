//! Direct tools: upstream tools exposed beside `mcp` as first-class tools with their prefixed names and upstream
//! schemas, chosen per server by `directTools` (`true` = every exposed tool including `read_<resource>` tools, a
//! list = those original or prefixed names) or globally by `settings.directTools`, with `MCP_DIRECT_TOOLS` already
//! folded into the config. Built from the catalog, so they come from the metadata cache without connecting. Tools
//! that `exposure: "hidden"` or a per-tool `toolExposure` entry make proxy-only, and servers that cannot start
//! (disabled, untrusted, misconfigured), contribute none.

use std::sync::Arc;

use pimcp_actors::{Catalog, CatalogTool, Glob};
use pimcp_config::{Availability, Config, DirectTools, ServerConfig};
use pimcp_surface::TOOL_NAME;
use rmcp::model::Tool;

/// Description of a direct tool whose upstream gave none.
pub const NO_DESCRIPTION: &str = "(no description)";

/// One direct tool: the definition the host sees and the catalog entry it calls.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectTool {
    /// The definition the host lists (name, description, schemas, annotations).
    pub tool: Tool,
    /// The catalog entry a call runs.
    pub target: Arc<CatalogTool>,
}

/// The direct-tool surface for a catalog snapshot, in catalog order (server name, then upstream order).
pub fn direct_tools(catalog: &Catalog, config: &Config) -> Vec<DirectTool> {
    let mut out = Vec::new();
    for cfg in &config.servers {
        if !wants_direct_tools(cfg, config) {
            continue;
        }
        let selection = cfg.direct_tools.as_ref().unwrap_or(&config.settings.direct_tools);
        let Some(sc) = catalog.server(&cfg.name) else {
            continue;
        };
        for t in &sc.tools {
            let chosen = match selection {
                DirectTools::Off => false,
                DirectTools::All => true,
                DirectTools::Listed(names) => names.iter().any(|n| *n == t.original || *n == t.name),
            };
            if !chosen || tool_hidden(cfg, &t.original) || t.app_only() {
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

/// Whether the server `cfg` would contribute direct tools (its own `directTools`, else `settings.directTools`, and
/// not every tool proxy-only), once its tools are known.
pub(crate) fn wants_direct_tools(cfg: &ServerConfig, config: &Config) -> bool {
    let selection = cfg.direct_tools.as_ref().unwrap_or(&config.settings.direct_tools);
    *selection != DirectTools::Off
        && !(cfg.hidden && cfg.tool_exposure.iter().all(|(_, mode)| mode == "hidden"))
        && cfg.availability == Availability::Available
}

/// Whether `toolExposure`/`exposure` make the tool `original` proxy-only: its exact name wins, else the first
/// pattern (`*` = any run) that matches, in file order; a tool with no entry follows the server's `exposure`.
pub(crate) fn tool_hidden(cfg: &ServerConfig, original: &str) -> bool {
    let entry = cfg.tool_exposure.iter().find(|(key, _)| key == original).or_else(|| {
        cfg.tool_exposure
            .iter()
            .find(|(key, _)| Glob::new(key).matches(original))
    });
    match entry {
        Some((_, mode)) => mode == "hidden",
        None => cfg.hidden,
    }
}

/// The host-facing definition: prefixed name, upstream description, input schema (minus `$schema`), output
/// schema, title, annotations and `_meta`. A call's result keeps the upstream `structuredContent` beside the
/// rendered text (unless the output guard cut the text), so an output schema stays truthful.
pub(crate) fn definition(t: &CatalogTool) -> Tool {
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
    tool.output_schema = t.output_schema().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "registering the direct tool without its output schema");
        None
    });
    tool.meta = t.meta.as_deref().cloned();
    tool
}
