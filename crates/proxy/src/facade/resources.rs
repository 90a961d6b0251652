//! Upstream prompts, resources and resource templates as the host sees them, and the requests forwarded to their
//! servers (`prompts/get`, `resources/read`, `completion/complete`).

use std::collections::{BTreeSet, HashMap};

use pimcp_actors::sanitize_server;
use pimcp_surface::{Category, ProxyError};
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptResult, JsonObject, ReadResourceResult, Reference, Resource,
    ResourceTemplate,
};

use super::{PromptEntry, Proxy};

impl Proxy {
    /// Upstream prompts of startable servers with known metadata, exposed as `<server>_<prompt>` (colliding names are
    /// dropped).
    pub fn prompts(&self) -> Vec<PromptEntry> {
        let catalog = self.inner.runtime.catalog();
        let mut entries: Vec<PromptEntry> = Vec::new();
        let mut counts: HashMap<String, usize> = HashMap::new();
        for sc in catalog.servers().filter(|s| s.available) {
            for p in sc.prompts.iter() {
                let name = format!("{}_{}", sanitize_server(&sc.server), p.name);
                *counts.entry(name.clone()).or_default() += 1;
                entries.push(PromptEntry {
                    name,
                    server: sc.server.clone(),
                    prompt: p.clone(),
                });
            }
        }
        entries.retain(|e| counts.get(&e.name).copied() == Some(1));
        entries
    }

    /// `prompts/get` of an exposed prompt, forwarded to its server (connected first when needed); arguments pass
    /// through unchanged.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> std::result::Result<GetPromptResult, ProxyError> {
        let Some(entry) = self.prompts().into_iter().find(|p| p.name == name) else {
            return Err(ProxyError::new(
                Category::UnknownTool,
                format!("prompt {name:?} not found."),
            ));
        };
        self.inner
            .runtime
            .get_prompt(&entry.server, &entry.prompt.name, arguments)
            .await
            .map_err(|e| self.runtime_error(e, None))
    }

    /// Upstream resources (not templates) of startable servers with known metadata, with their server. A URI listed
    /// by several servers is kept once (first server by name).
    pub fn resources(&self) -> Vec<(String, Resource)> {
        let catalog = self.inner.runtime.catalog();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for sc in catalog.servers().filter(|s| s.available) {
            for r in sc.resources.iter() {
                if seen.insert(r.uri.clone()) {
                    out.push((sc.server.clone(), r.clone()));
                }
            }
        }
        out
    }

    /// Upstream resource templates of startable servers with known metadata, with their server. A template listed
    /// by several servers is kept once (first server by name).
    pub fn resource_templates(&self) -> Vec<(String, ResourceTemplate)> {
        let catalog = self.inner.runtime.catalog();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for sc in catalog.servers().filter(|s| s.available) {
            for t in sc.resource_templates.iter() {
                if seen.insert(t.uri_template.clone()) {
                    out.push((sc.server.clone(), t.clone()));
                }
            }
        }
        out
    }

    /// The server a resource URI belongs to: the one that lists it, else the first whose resource template
    /// matches it.
    pub(crate) fn resource_server(&self, uri: &str) -> Option<String> {
        if let Some((server, _)) = self.resources().into_iter().find(|(_, r)| r.uri == uri) {
            return Some(server);
        }
        self.resource_templates()
            .into_iter()
            .find(|(_, t)| pimcp_surface::template_matches(&t.uri_template, uri))
            .map(|(server, _)| server)
    }

    /// `completion/complete` for a prompt (by its exposed name) or a resource template, forwarded to its server
    /// with the server's own names.
    pub async fn complete(&self, mut params: CompleteRequestParams) -> std::result::Result<CompleteResult, ProxyError> {
        let server = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let Some(entry) = self.prompts().into_iter().find(|p| p.name == prompt.name) else {
                    return Err(ProxyError::new(
                        Category::UnknownTool,
                        format!("prompt {:?} not found.", prompt.name),
                    ));
                };
                prompt.name = entry.prompt.name;
                entry.server
            }
            Reference::Resource(resource) => {
                let template = self
                    .resource_templates()
                    .into_iter()
                    .find(|(_, t)| t.uri_template == resource.uri)
                    .map(|(server, _)| server);
                match template.or_else(|| self.resource_server(&resource.uri)) {
                    Some(server) => server,
                    None => {
                        return Err(ProxyError::new(
                            Category::UnknownTool,
                            format!("no server lists the resource or template {:?}.", resource.uri),
                        ));
                    }
                }
            }
            _ => {
                return Err(ProxyError::new(
                    Category::Validation,
                    "a completion reference of a kind pimcp does not know.",
                ));
            }
        };
        self.inner
            .runtime
            .complete(&server, params)
            .await
            .map_err(|e| self.runtime_error(e, Some(&server)))
    }

    /// `resources/read` of a listed resource, or of a URI one of the resource templates matches, forwarded to
    /// that server.
    pub async fn read_resource(&self, uri: &str) -> std::result::Result<ReadResourceResult, ProxyError> {
        let Some(server) = self.resource_server(uri) else {
            return Err(ProxyError::new(
                Category::UnknownTool,
                format!("resource {uri:?} is not listed by any server, nor matched by a resource template."),
            ));
        };
        self.inner
            .runtime
            .read_resource(&server, uri)
            .await
            .map_err(|e| self.runtime_error(e, None))
    }
}
