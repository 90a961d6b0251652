//! The merged tool catalog: per-server metadata turned into exposed names (`toolPrefix`), filtered by include/exclude,
//! with resources as `read_<name>` tools, collisions dropped, and name resolution (prefixed, original, `-`/`_`
//! fuzzy, implied server, ambiguity, suggestions). A `Catalog` is an immutable snapshot; the router publishes a new
//! one whenever a server's metadata or state changes, and readers clone the `Arc` without messaging anyone.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, LazyLock};

use pimcp_config::{Availability, Config, ServerConfig, ToolPrefix};
use pimcp_surface::ToolSchema;
use rmcp::model::{Icon, JsonObject, MetaObject, Prompt, Resource, ResourceTemplate, Tool, ToolAnnotations};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::naming::{ToolFilter, fuzzy_key, resource_tool_name, server_prefix, tool_candidates, with_prefix};

/// One upstream tool as discovery or the metadata cache knows it: rmcp's `Tool`, field for field (the cache file
/// keeps rmcp's shape), with the schemas as [`ToolSchema`] so that cached ones stay unparsed until needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolInfo {
    /// The tool's name on the server.
    pub name: String,
    /// The tool's display title, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "shared_str")]
    pub title: Option<Arc<str>>,
    /// Shared with the catalog's [`CatalogTool`]s (descriptions are most of a cached tool's text besides schemas).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "shared_str")]
    pub description: Option<Arc<str>>,
    /// The JSON Schema of its arguments.
    pub input_schema: ToolSchema,
    /// The JSON Schema of its `structuredContent`, if it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<ToolSchema>,
    /// Shared with the catalog's [`CatalogTool`]s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Arc<ToolAnnotations>>,
    /// Boxed, like `meta`: rare, and thousands of cached tools would each carry the empty slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Box<[Icon]>>,
    /// The tool's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Box<MetaObject>>,
}

/// `Option<Arc<str>>` in one allocation (serde's own impl builds a `String` first and copies it).
fn shared_str<'de, D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Option<Arc<str>>, D::Error> {
    struct V;
    impl<'v> serde::de::Visitor<'v> for V {
        type Value = Option<Arc<str>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a string or null")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
            Ok(Some(Arc::from(v)))
        }
        fn visit_none<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'v>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
    }
    deserializer.deserialize_option(V)
}

impl From<Tool> for ToolInfo {
    fn from(t: Tool) -> ToolInfo {
        ToolInfo {
            name: t.name.into_owned(),
            title: t.title.map(Arc::from),
            description: t.description.map(|d| Arc::from(d.as_ref())),
            input_schema: ToolSchema::parsed(t.input_schema),
            output_schema: t.output_schema.map(ToolSchema::parsed),
            annotations: t.annotations.map(Arc::new),
            icons: t.icons.map(Vec::into_boxed_slice),
            meta: t.meta.map(Box::new),
        }
    }
}

/// What discovery (or the metadata cache) knows about one server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerMetadata {
    /// `tools/list`.
    #[serde(default)]
    pub tools: Vec<ToolInfo>,
    /// `resources/list`.
    #[serde(default)]
    pub resources: Arc<[Resource]>,
    /// `resources/templates/list`: URI templates the server reads beyond its listed resources.
    #[serde(default)]
    pub resource_templates: Arc<[ResourceTemplate]>,
    /// `prompts/list`.
    #[serde(default)]
    pub prompts: Arc<[Prompt]>,
    /// The server's `instructions` from the handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The negotiated protocol version (`2025-11-25`, `2026-07-28`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// `legacy` (initialize) or `stateless` (2026-07-28): remembered so `auto` pays its probe once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub era: Option<String>,
    /// The server's `tools/list` cache hint (SEP-2549).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// The scope the server's cache hint applies to (SEP-2549), as it sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<String>,
}

/// Where a server's catalog entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetadataSource {
    /// Discovered on the current connection.
    Live,
    /// A valid metadata-cache entry.
    Cache,
    /// An expired cache entry, served because nothing better is known.
    StaleCache,
}

/// One exposed tool (or `read_<resource>` pseudo-tool).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogTool {
    /// The exposed (prefixed, escaped) name.
    pub name: String,
    /// The upstream name (for resource tools: `read_<resource name>`).
    pub original: String,
    /// The server's name.
    pub server: String,
    /// The tool's `title`, else its annotations' title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<Arc<str>>,
    /// Shared with the server's [`ToolInfo`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Arc<str>>,
    /// Shared with the server's [`ToolInfo`]; read it through [`CatalogTool::input_schema`].
    pub input_schema: ToolSchema,
    /// The JSON Schema of its `structuredContent`, if it declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<ToolSchema>,
    /// Shared with the server's [`ToolInfo`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Arc<ToolAnnotations>>,
    /// `Some(uri)` for a resource exposed as a tool: calling it reads the resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_uri: Option<String>,
    /// The upstream `_meta` (MCP Apps' `ui`, vendor keys), passed on with direct tools.
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Box<MetaObject>>,
}

impl CatalogTool {
    /// Whether MCP Apps' `_meta.ui.visibility` leaves the model out (`["app"]`): such a tool is for the host's app
    /// view only, so it is neither a direct tool nor a search result.
    pub fn app_only(&self) -> bool {
        let visibility = self
            .meta
            .as_ref()
            .and_then(|m| m.0.get("ui"))
            .and_then(|ui| ui.get("visibility"))
            .and_then(serde_json::Value::as_array);
        visibility.is_some_and(|v| !v.iter().any(|x| x.as_str() == Some("model")))
    }

    /// The input schema, parsed on first use when it came from the metadata cache. A cached schema that is not a
    /// JSON object is an error naming this server and tool (other tools are unaffected).
    pub fn input_schema(&self) -> Result<Arc<JsonObject>> {
        self.schema_of(&self.input_schema, "inputSchema")
    }

    /// The output schema, if the tool declares one; parsed like [`CatalogTool::input_schema`].
    pub fn output_schema(&self) -> Result<Option<Arc<JsonObject>>> {
        self.output_schema
            .as_ref()
            .map(|s| self.schema_of(s, "outputSchema"))
            .transpose()
    }

    fn schema_of(&self, schema: &ToolSchema, field: &str) -> Result<Arc<JsonObject>> {
        schema.get().cloned().map_err(|message| Error::Schema {
            server: self.server.clone(),
            tool: self.original.clone(),
            field: field.to_owned(),
            message: message.to_owned(),
        })
    }

    /// `readOnlyHint` or `idempotentHint`: a call may be replayed safely. Resource reads are reads.
    pub fn is_replay_safe(&self) -> bool {
        if self.resource_uri.is_some() {
            return true;
        }
        self.annotations
            .as_ref()
            .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true))
    }
}

/// `{"type":"object","properties":{}}`, one value shared by every `read_<resource>` tool.
static RESOURCE_TOOL_SCHEMA: LazyLock<ToolSchema> = LazyLock::new(|| {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), serde_json::Value::Object(JsonObject::new()));
    ToolSchema::parsed(Arc::new(schema))
});

/// One server's slice of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCatalog {
    /// The server's name.
    pub server: String,
    /// `None`: nothing is known yet (never connected, no cache entry).
    pub source: Option<MetadataSource>,
    /// Whether the server may start (not disabled, untrusted or misconfigured).
    pub available: bool,
    /// Its exposed tools (and resource pseudo-tools), sorted by name.
    pub tools: Vec<Arc<CatalogTool>>,
    /// Its resources.
    pub resources: Arc<[Resource]>,
    /// Its resource templates.
    pub resource_templates: Arc<[ResourceTemplate]>,
    /// Its prompts.
    pub prompts: Arc<[Prompt]>,
    /// Its `instructions`, live or cached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The protocol version it last spoke.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The prefix its tools carry (empty for `toolPrefix: none`).
    pub prefix: String,
}

/// What [`Catalog::resolve`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// Exactly one tool has the name.
    Found(Arc<CatalogTool>),
    /// More than one tool fits; their exposed names.
    Ambiguous(Vec<String>),
    /// Not found, but these servers (implied by the name, or with no metadata at all) may have it once connected.
    NeedsDiscovery(Vec<String>),
    /// No tool fits.
    NotFound {
        /// The server the name implied or the caller named, if any.
        server: Option<String>,
        /// That server's tools, to choose from.
        available: Vec<String>,
        /// Close names.
        suggestions: Vec<String>,
    },
    /// The caller named a server that is not configured.
    UnknownServer(String),
}

/// An immutable snapshot of every server's exposed tools.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    servers: BTreeMap<String, ServerCatalog>,
    /// Every tool, looked up by its exposed name (no copy of the name).
    by_name: HashSet<ByName>,
    /// Names dropped because more than one tool produced them.
    collisions: Vec<String>,
    /// Version counter, bumped by the router on every publish.
    pub(crate) version: u64,
}

/// A catalog tool that hashes and compares as its exposed name.
#[derive(Debug, Clone)]
struct ByName(Arc<CatalogTool>);

impl PartialEq for ByName {
    fn eq(&self, other: &ByName) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ByName {}

impl Hash for ByName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.name.as_str().hash(state);
    }
}

impl Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        &self.0.name
    }
}

/// Inputs for one server when building a catalog.
#[derive(Debug, Clone)]
pub struct ServerInput<'a> {
    /// The server's configuration.
    pub config: &'a ServerConfig,
    /// What is known about its tools, and from where (`None`: nothing yet).
    pub metadata: Option<(&'a ServerMetadata, MetadataSource)>,
}

impl Catalog {
    /// Builds the catalog from each configured server and what is known about it.
    // `ByName` hashes and compares only the tool's name, which never changes (its schemas' parse cells do).
    #[allow(clippy::mutable_key_type)]
    pub fn build(global_mode: ToolPrefix, inputs: &[ServerInput<'_>]) -> Catalog {
        let mut servers = BTreeMap::new();
        let mut total = 0;
        for input in inputs {
            let cfg = input.config;
            let mode = cfg.tool_prefix.unwrap_or(global_mode);
            let prefix = server_prefix(&cfg.name, mode);
            let filter = ToolFilter::new(&cfg.include_tools, &cfg.exclude_tools);
            let allows =
                |original: &str| filter.allows_all() || filter.allows(&tool_candidates(original, &cfg.name, mode));
            let mut tools = Vec::new();
            if let Some((meta, _)) = input.metadata {
                let resources = if cfg.expose_resources { meta.resources.len() } else { 0 };
                tools.reserve_exact(meta.tools.len() + resources);
                for t in &meta.tools {
                    if !allows(&t.name) {
                        continue;
                    }
                    tools.push(Arc::new(CatalogTool {
                        name: with_prefix(&t.name, &prefix),
                        original: t.name.clone(),
                        server: cfg.name.clone(),
                        title: t
                            .title
                            .clone()
                            .or_else(|| t.annotations.as_ref().and_then(|a| a.title.as_deref()).map(Arc::from)),
                        description: t.description.clone(),
                        input_schema: t.input_schema.clone(),
                        output_schema: t.output_schema.clone(),
                        annotations: t.annotations.clone(),
                        resource_uri: None,
                        meta: t.meta.clone(),
                    }));
                }
                if cfg.expose_resources {
                    for r in meta.resources.iter() {
                        let original = resource_tool_name(&r.name);
                        if !allows(&original) {
                            continue;
                        }
                        tools.push(Arc::new(CatalogTool {
                            name: with_prefix(&original, &prefix),
                            original,
                            server: cfg.name.clone(),
                            title: r.title.as_deref().map(Arc::from),
                            description: Some(match &r.description {
                                Some(d) => Arc::from(d.as_str()),
                                None => Arc::from(format!("Read resource: {}", r.uri)),
                            }),
                            input_schema: RESOURCE_TOOL_SCHEMA.clone(),
                            output_schema: None,
                            annotations: None,
                            resource_uri: Some(r.uri.clone()),
                            meta: None,
                        }));
                    }
                }
            }
            total += tools.len();
            servers.insert(
                cfg.name.clone(),
                ServerCatalog {
                    server: cfg.name.clone(),
                    source: input.metadata.map(|(_, s)| s),
                    available: cfg.availability == Availability::Available,
                    tools,
                    resources: input.metadata.map(|(m, _)| m.resources.clone()).unwrap_or_default(),
                    resource_templates: input
                        .metadata
                        .map(|(m, _)| m.resource_templates.clone())
                        .unwrap_or_default(),
                    prompts: input.metadata.map(|(m, _)| m.prompts.clone()).unwrap_or_default(),
                    instructions: input.metadata.and_then(|(m, _)| m.instructions.clone()),
                    protocol_version: input.metadata.and_then(|(m, _)| m.protocol_version.clone()),
                    prefix,
                },
            );
        }
        // Names produced more than once are dropped everywhere.
        let mut by_name = HashSet::with_capacity(total);
        let mut collisions: Vec<String> = Vec::new();
        for t in servers.values().flat_map(|sc: &ServerCatalog| sc.tools.iter()) {
            if !by_name.insert(ByName(t.clone())) {
                collisions.push(t.name.clone());
            }
        }
        if !collisions.is_empty() {
            collisions.sort();
            collisions.dedup();
            for name in &collisions {
                tracing::warn!(tool = %name, "tool name produced by more than one tool; dropping all of them");
                by_name.remove(name.as_str());
            }
            for sc in servers.values_mut() {
                sc.tools.retain(|t| collisions.binary_search(&t.name).is_err());
            }
        }
        Catalog {
            servers,
            by_name,
            collisions,
            version: 0,
        }
    }

    /// Builds from a config and a map of known metadata.
    pub fn from_config(config: &Config, known: &BTreeMap<String, (ServerMetadata, MetadataSource)>) -> Catalog {
        let inputs: Vec<ServerInput<'_>> = config
            .servers
            .iter()
            .map(|s| ServerInput {
                config: s,
                metadata: known.get(&s.name).map(|(m, src)| (m, *src)),
            })
            .collect();
        Catalog::build(config.settings.tool_prefix, &inputs)
    }

    /// The catalog's version: it goes up with every publish, so a reader can tell a new snapshot from the one it has.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Every server's slice, by name.
    pub fn servers(&self) -> impl Iterator<Item = &ServerCatalog> {
        self.servers.values()
    }

    /// One server's slice.
    pub fn server(&self, name: &str) -> Option<&ServerCatalog> {
        self.servers.get(name)
    }

    /// Every exposed tool, ordered by server then upstream order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<CatalogTool>> {
        self.servers.values().flat_map(|s| s.tools.iter())
    }

    /// Exposed names dropped because they collided.
    pub fn collisions(&self) -> &[String] {
        &self.collisions
    }

    /// The tool with exactly this exposed name.
    pub fn get(&self, name: &str) -> Option<&Arc<CatalogTool>> {
        self.by_name.get(name).map(|t| &t.0)
    }

    /// Resolves a name as the proxy's `call`/`describe` do: exact exposed name, original name, the implied
    /// server's prefix, then `-`/`_` fuzz; unknown metadata asks for discovery instead of failing.
    pub fn resolve(&self, name: &str, server: Option<&str>) -> Resolution {
        if let Some(server) = server {
            let Some(sc) = self.servers.get(server) else {
                return Resolution::UnknownServer(server.to_owned());
            };
            if let Some(t) = sc.tools.iter().find(|t| t.name == name) {
                return Resolution::Found(t.clone());
            }
            let hits = match_in_server(sc, name);
            return match hits.len() {
                1 => Resolution::Found(hits[0].clone()),
                // Unknown metadata, or a server that cannot start (it will say why): ask the server.
                0 if !sc.available || sc.source != Some(MetadataSource::Live) => {
                    Resolution::NeedsDiscovery(vec![server.to_owned()])
                }
                0 => Resolution::NotFound {
                    server: Some(server.to_owned()),
                    available: sc.tools.iter().map(|t| t.name.clone()).collect(),
                    suggestions: self.suggestions(name),
                },
                _ => Resolution::Ambiguous(hits.iter().map(|t| t.name.clone()).collect()),
            };
        }
        if let Some(t) = self.get(name) {
            return Resolution::Found(t.clone());
        }
        let originals: Vec<&Arc<CatalogTool>> = self.tools().filter(|t| t.original == name).collect();
        match originals.len() {
            1 => return Resolution::Found(originals[0].clone()),
            n if n > 1 => return Resolution::Ambiguous(originals.iter().map(|t| t.name.clone()).collect()),
            _ => {}
        }
        let implied = self.implied_servers(name);
        if let Some(first) = implied.first()
            && let Some(sc) = self.servers.get(first)
        {
            let rest = name.get(sc.prefix.len() + 1..).unwrap_or("");
            let mut hits = match_in_server(sc, rest);
            if hits.is_empty() {
                hits = match_in_server(sc, name);
            }
            match hits.len() {
                1 => return Resolution::Found(hits[0].clone()),
                n if n > 1 => return Resolution::Ambiguous(hits.iter().map(|t| t.name.clone()).collect()),
                _ => {}
            }
        }
        let key = fuzzy_key(name);
        let fuzzy: Vec<&Arc<CatalogTool>> = self
            .tools()
            .filter(|t| fuzzy_key(&t.name) == key || fuzzy_key(&t.original) == key)
            .collect();
        match fuzzy.len() {
            1 => return Resolution::Found(fuzzy[0].clone()),
            n if n > 1 => return Resolution::Ambiguous(fuzzy.iter().map(|t| t.name.clone()).collect()),
            _ => {}
        }
        // An implied server that cannot start (disabled, untrusted, misconfigured) is asked too, so the caller gets
        // that server's refusal rather than "unknown tool" or another server's connect error.
        let undiscovered_implied: Vec<String> = implied
            .iter()
            .filter(|s| {
                self.servers
                    .get(*s)
                    .is_some_and(|sc| !sc.available || sc.source != Some(MetadataSource::Live))
            })
            .cloned()
            .collect();
        if !undiscovered_implied.is_empty() {
            return Resolution::NeedsDiscovery(undiscovered_implied);
        }
        let unknown: Vec<String> = self
            .servers
            .values()
            .filter(|sc| sc.available && sc.source.is_none())
            .map(|sc| sc.server.clone())
            .collect();
        if !unknown.is_empty() {
            return Resolution::NeedsDiscovery(unknown);
        }
        let (server, available) = match implied.first().and_then(|s| self.servers.get(s)) {
            Some(sc) => (
                Some(sc.server.clone()),
                sc.tools.iter().map(|t| t.name.clone()).collect(),
            ),
            None => (None, Vec::new()),
        };
        Resolution::NotFound {
            server,
            available,
            suggestions: self.suggestions(name),
        }
    }

    /// Servers whose prefix (plus `_`) starts `name`, longest prefix first.
    pub fn implied_servers(&self, name: &str) -> Vec<String> {
        let mut hits: Vec<&ServerCatalog> = self
            .servers
            .values()
            .filter(|sc| {
                !sc.prefix.is_empty() && name.len() > sc.prefix.len() && name.starts_with(&format!("{}_", sc.prefix))
            })
            .collect();
        hits.sort_by(|a, b| b.prefix.len().cmp(&a.prefix.len()).then(a.server.cmp(&b.server)));
        hits.into_iter().map(|sc| sc.server.clone()).collect()
    }

    /// Up to 5 close names: edit distance over exposed and original names, plus substring hits.
    pub fn suggestions(&self, name: &str) -> Vec<String> {
        let needle = fuzzy_key(name);
        let mut scored: Vec<(usize, &str)> = self
            .tools()
            .filter_map(|t| {
                let d = levenshtein(&needle, &fuzzy_key(&t.name)).min(levenshtein(&needle, &fuzzy_key(&t.original)));
                let limit = (needle.chars().count() / 3).max(2);
                let contains = needle.len() >= 3 && (fuzzy_key(&t.name).contains(&needle));
                (d <= limit || contains).then_some((if contains { d.min(limit) } else { d }, t.name.as_str()))
            })
            .collect();
        scored.sort();
        scored.into_iter().take(5).map(|(_, n)| n.to_owned()).collect()
    }
}

fn match_in_server(sc: &ServerCatalog, name: &str) -> Vec<Arc<CatalogTool>> {
    if name.is_empty() {
        return Vec::new();
    }
    let exact: Vec<_> = sc
        .tools
        .iter()
        .filter(|t| t.name == name || t.original == name)
        .cloned()
        .collect();
    if !exact.is_empty() {
        return exact;
    }
    let key = fuzzy_key(name);
    sc.tools
        .iter()
        .filter(|t| {
            fuzzy_key(&t.name) == key
                || fuzzy_key(&t.original) == key
                || fuzzy_key(&crate::naming::sanitize_tool(&t.original)) == key
        })
        .cloned()
        .collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
pub(crate) mod tests;
