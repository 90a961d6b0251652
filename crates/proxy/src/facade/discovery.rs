//! Search and describe: cold discovery, the search index per catalog snapshot, the servers a search skipped, and
//! the tool documents with their `searchKeywords`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use pimcp_actors::{CatalogTool, Glob, approval_required, tool_candidates};
use pimcp_config::{Config, ServerConfig};
use pimcp_surface::{ProxyError, SearchIndex, SearchQuery, ServerState, SkippedServer, ToolDoc, search_text};
use serde_json::Value;
use tracing::Instrument;

use super::servers::state_of;
use super::{COLD_DISCOVERY_CONCURRENCY, COLD_DISCOVERY_MAX, Indexed, Proxy, SearchOutcome, SearchResultHit, ToolInfo};

impl Proxy {
    /// [`Proxy::search`] after cold discovery: the servers the search would otherwise skip because nothing is known
    /// of them yet (never connected, nothing cached; or connecting for the first time) are connected first, at most
    /// [`COLD_DISCOVERY_MAX`] per search, [`COLD_DISCOVERY_CONCURRENCY`] at once, for at most
    /// `settings.discoveryTimeout` (10 s; zero turns cold discovery off). Each connected server is cached and then follows its lifecycle (a lazy server
    /// idles out as usual); one that did not make it in time keeps connecting and is named in the answer as
    /// connecting or failed. Disabled, untrusted, misconfigured servers and those that need auth are never started.
    /// Once every server's metadata is cached this costs nothing. The `mcp` tool's search uses it; `search`
    /// itself stays offline (the CLI's `search` without `--connect`).
    pub async fn search_discovering(&self, query: &SearchQuery) -> std::result::Result<SearchOutcome, ProxyError> {
        // An unknown `server` has no cold servers; `search` answers it.
        let server = query.server.as_deref();
        self.discover_cold(|name| server.is_none_or(|s| s == name)).await;
        self.search(query)
    }

    /// Cold discovery at start for a direct-tool surface: the servers that would contribute direct tools and of
    /// which nothing is known are connected with the bounds of [`Proxy::search_discovering`], so that their tools
    /// reach the host (announced with `tools/list_changed`) in the first session. Counts as a deliberate refresh
    /// when it connected anything. Returns the servers it tried.
    pub async fn discover_for_direct_tools(&self) -> Vec<String> {
        let config = self.config();
        let tried = self
            .discover_cold(|name| {
                config
                    .server(name)
                    .is_some_and(|cfg| crate::direct::wants_direct_tools(cfg, &config))
            })
            .await;
        if !tried.is_empty() {
            self.refreshed_deliberately();
        }
        tried
    }

    /// Connects the cold servers `wanted` selects ([`Proxy::cold_servers`]), [`COLD_DISCOVERY_CONCURRENCY`] at
    /// once, waiting at most `settings.discoveryTimeout` (zero: nothing is connected). Returns the servers tried.
    async fn discover_cold(&self, wanted: impl Fn(&str) -> bool) -> Vec<String> {
        use futures::StreamExt as _;
        let deadline = self.config().settings.discovery_timeout;
        if deadline.is_zero() {
            return Vec::new();
        }
        let cold = self.cold_servers(wanted);
        if cold.is_empty() {
            return cold;
        }
        let span = tracing::info_span!("cold_discovery", servers = cold.len());
        let connects = futures::stream::iter(cold.clone())
            .map(|server| async move {
                if let Err(e) = self.connect_and_wait(&server, false).await {
                    tracing::debug!(%server, error = %e.message, "cold discovery: the server did not connect");
                }
            })
            .buffer_unordered(COLD_DISCOVERY_CONCURRENCY)
            .collect::<Vec<()>>();
        if tokio::time::timeout(deadline, connects).instrument(span).await.is_err() {
            tracing::debug!("cold discovery: deadline reached; the rest keep connecting");
        }
        cold
    }

    /// Startable servers `wanted` selects of which nothing is known yet: never connected with nothing cached, or
    /// connecting for the first time. At most [`COLD_DISCOVERY_MAX`], in name order.
    fn cold_servers(&self, wanted: impl Fn(&str) -> bool) -> Vec<String> {
        let snapshot = self.inner.runtime.status();
        let catalog = self.inner.runtime.catalog();
        let now = SystemTime::now();
        snapshot
            .servers
            .iter()
            .filter(|s| wanted(&s.name))
            .filter(|s| {
                let sc = catalog.server(&s.name);
                match state_of(s, sc, now) {
                    ServerState::NotStarted => true,
                    ServerState::Connecting => sc.is_none_or(|c| c.source.is_none()),
                    _ => false,
                }
            })
            .map(|s| s.name.clone())
            .take(COLD_DISCOVERY_MAX)
            .collect()
    }

    /// Ranked (or regex) search over every startable server's known tools. Works offline from the cache.
    pub fn search(&self, query: &SearchQuery) -> std::result::Result<SearchOutcome, ProxyError> {
        if let Some(server) = &query.server
            && self.inner.runtime.catalog().server(server).is_none()
        {
            return Err(self.unknown_server(server));
        }
        let indexed = self.indexed();
        let page = indexed.index.search(query).map_err(ProxyError::from)?;
        let skipped = self.skipped(&indexed, query.server.as_deref(), page.total == 0);
        let mut text = search_text(query, &page, &skipped);
        if page.total == 0
            && let Some(problems) = self.config_problems_text()
        {
            text.push_str("\n\n");
            text.push_str(&problems);
        }
        Ok(SearchOutcome {
            hits: page
                .hits
                .iter()
                .map(|h| SearchResultHit {
                    doc: h.doc.clone(),
                    score: h.score,
                    kind: h.kind,
                })
                .collect(),
            total: page.total,
            offset: page.offset,
            limit: page.limit,
            next_offset: page.next_offset,
            skipped,
            text,
        })
    }

    /// One tool in full. Resolves like a call (prefixed, original, `-`/`_` fuzzy, implied server connected lazily);
    /// an unknown name gets up to 5 suggestions (token ranking and edit distance).
    pub async fn describe(&self, tool: &str, server: Option<&str>) -> std::result::Result<ToolInfo, ProxyError> {
        let resolved = self
            .inner
            .runtime
            .resolve(tool, server)
            .await
            .map_err(|e| self.runtime_error(e, server))?;
        // A schema read from the metadata cache is parsed here on first use; an unusable one is this tool's error.
        resolved.input_schema().map_err(|e| self.runtime_error(e, server))?;
        let output_schema = resolved.output_schema().map_err(|e| self.runtime_error(e, server))?;
        let config = self.config();
        Ok(ToolInfo {
            doc: tool_doc(
                &resolved,
                &keywords_for(config.server(&resolved.server), &config, &resolved),
                &config,
            ),
            title: resolved.title.as_deref().map(str::to_owned),
            output_schema: output_schema.map(|s| Value::Object((*s).clone())),
            resource_uri: resolved.resource_uri.clone(),
        })
    }

    /// The search index for the current catalog and config, built at most once per change.
    pub(crate) fn indexed(&self) -> Arc<Indexed> {
        let catalog = self.inner.runtime.catalog();
        let generation = self.inner.config_generation.load(Ordering::SeqCst);
        let mut slot = self
            .inner
            .index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(current) = slot.as_ref()
            && Arc::ptr_eq(&current.catalog, &catalog)
            && current.config_generation == generation
        {
            return current.clone();
        }
        let config = self.config();
        let mut docs = Vec::new();
        let mut searched = BTreeSet::new();
        for sc in catalog.servers().filter(|s| s.available && s.source.is_some()) {
            searched.insert(sc.server.clone());
            let cfg = config.server(&sc.server);
            let rules = keyword_rules(cfg);
            for t in sc.tools.iter().filter(|t| !t.app_only()) {
                docs.push(tool_doc(t, &apply_rules(&rules, t, cfg, &config), &config));
            }
        }
        let built = Arc::new(Indexed {
            catalog,
            config_generation: generation,
            index: SearchIndex::build(docs),
            searched,
        });
        *slot = Some(built.clone());
        built
    }

    fn skipped(&self, indexed: &Indexed, only: Option<&str>, empty: bool) -> Vec<SkippedServer> {
        let snapshot = self.inner.runtime.status();
        let now = SystemTime::now();
        snapshot
            .servers
            .iter()
            .filter(|s| only.is_none_or(|o| o == s.name))
            .filter(|s| !indexed.searched.contains(&s.name))
            .filter_map(|s| {
                let state = state_of(s, indexed.catalog.server(&s.name), now);
                let quiet = matches!(state, ServerState::Disabled | ServerState::Ready);
                (!quiet || (empty && state == ServerState::Disabled)).then(|| SkippedServer {
                    name: s.name.clone(),
                    state,
                })
            })
            .collect()
    }
}

/// `searchKeywords` of one server, compiled: (glob, keywords).
pub(super) fn keyword_rules(cfg: Option<&ServerConfig>) -> Vec<(Glob, Vec<String>)> {
    cfg.map(|c| {
        c.search_keywords
            .iter()
            .map(|(pattern, words)| (Glob::new(pattern), words.clone()))
            .collect()
    })
    .unwrap_or_default()
}

pub(super) fn apply_rules(
    rules: &[(Glob, Vec<String>)],
    tool: &CatalogTool,
    cfg: Option<&ServerConfig>,
    config: &Config,
) -> Vec<String> {
    if rules.is_empty() {
        return Vec::new();
    }
    let mode = cfg.and_then(|c| c.tool_prefix).unwrap_or(config.settings.tool_prefix);
    let mut candidates = tool_candidates(&tool.original, &tool.server, mode);
    candidates.push(tool.name.clone());
    let mut out = Vec::new();
    for (glob, words) in rules {
        if candidates.iter().any(|c| glob.matches(c)) {
            out.extend(words.iter().cloned());
        }
    }
    out
}

fn keywords_for(cfg: Option<&ServerConfig>, config: &Config, tool: &CatalogTool) -> Vec<String> {
    apply_rules(&keyword_rules(cfg), tool, cfg, config)
}

pub(super) fn tool_doc(t: &CatalogTool, keywords: &[String], config: &Config) -> ToolDoc {
    let description = t.description.as_deref().or(t.title.as_deref()).unwrap_or_default();
    // Shared, not parsed: a cached schema is parsed when a hit or describe shows it. An unusable one shows as "no
    // parameters"; `describe` reports it.
    let mut doc = ToolDoc::new(&t.name, &t.original, &t.server, description, t.input_schema.clone());
    doc.keywords = keywords.to_vec();
    doc.needs_approval = approval_required(config, t);
    doc
}
