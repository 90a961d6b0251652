//! Field-by-field merge of one server's entries across layers (lowest first), with provenance and the scrubs
//! (docs/configuration.md, section 3): switching transport (`command` ↔ `url` ↔ `socket`) drops the other transport's
//! fields and `type`; a changed `url` drops inherited credentials (`headers`, `bearerToken`, `bearerTokenEnv`, and
//! `oauth` unless it is `false`). A `null` removes the inherited field. Settings merge shallowly per key.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::model::Origin;

const STDIO_FIELDS: [&str; 5] = ["command", "args", "env", "cwd", "inheritEnv"];
const HTTP_FIELDS: [&str; 6] = ["url", "headers", "auth", "bearerToken", "bearerTokenEnv", "oauth"];
const CREDENTIAL_FIELDS: [&str; 3] = ["headers", "bearerToken", "bearerTokenEnv"];
/// Object-valued fields whose keys get their own provenance entry (`headers.Authorization`).
const MAP_FIELDS: [&str; 4] = ["env", "headers", "oauth", "searchKeywords"];

/// One server merged across layers, still in JSON form.
#[derive(Debug, Clone)]
pub(crate) struct MergedServer {
    pub name: String,
    pub fields: Map<String, Value>,
    /// Field (and `map.key`) → the layer that set it.
    pub provenance: BTreeMap<String, Origin>,
    /// Top-level fields whose value came from an Agent Plugin (never interpolated).
    pub literal: BTreeSet<String>,
    /// The highest layer that contributed.
    pub origin: Origin,
    /// Index of the lowest layer with a valid entry.
    pub first_layer: usize,
}

impl MergedServer {
    pub(crate) fn new(name: &str, origin: Origin, layer: usize) -> MergedServer {
        MergedServer {
            name: name.to_string(),
            fields: Map::new(),
            provenance: BTreeMap::new(),
            literal: BTreeSet::new(),
            origin,
            first_layer: layer,
        }
    }

    fn transport(&self) -> Option<&'static str> {
        crate::entries::TRANSPORT_FIELDS
            .into_iter()
            .find(|k| self.fields.get(*k).is_some_and(|v| !v.is_null()))
    }

    fn drop_field(&mut self, key: &str) {
        self.fields.remove(key);
        self.literal.remove(key);
        let prefix = format!("{key}.");
        self.provenance.retain(|k, _| k != key && !k.starts_with(&prefix));
    }

    /// Applies one entry on top. `literal`: the entry's values must not be interpolated (Agent Plugins).
    pub(crate) fn apply(&mut self, entry: &Map<String, Value>, origin: &Origin, literal: bool) {
        let sets = |k: &str| entry.get(k).is_some_and(|v| !v.is_null());
        let incoming = crate::entries::TRANSPORT_FIELDS.into_iter().find(|k| sets(k));
        if let Some(incoming) = incoming {
            let current = self.transport();
            if current.is_some_and(|c| c != incoming) {
                let keep: &[&str] = match incoming {
                    "command" => &STDIO_FIELDS,
                    "url" => &HTTP_FIELDS,
                    _ => &["socket"],
                };
                let all = STDIO_FIELDS
                    .iter()
                    .chain(HTTP_FIELDS.iter())
                    .chain(["socket", "type"].iter());
                let drop: Vec<&str> = all.copied().filter(|k| !keep.contains(k)).collect();
                for key in drop {
                    self.drop_field(key);
                }
            } else if incoming == "url" && current == Some("url") && self.fields.get("url") != entry.get("url") {
                for key in CREDENTIAL_FIELDS {
                    self.drop_field(key);
                }
                if self.fields.get("oauth").is_some_and(|o| o != &Value::Bool(false)) {
                    self.drop_field("oauth");
                }
            }
        }
        for (key, value) in entry {
            if value.is_null() {
                self.drop_field(key);
                continue;
            }
            self.drop_field(key);
            self.fields.insert(key.clone(), value.clone());
            self.provenance.insert(key.clone(), origin.clone());
            if MAP_FIELDS.contains(&key.as_str())
                && let Value::Object(map) = value
            {
                for sub in map.keys() {
                    self.provenance.insert(format!("{key}.{sub}"), origin.clone());
                }
            }
            if literal {
                self.literal.insert(key.clone());
            }
        }
        self.origin = origin.clone();
    }
}

/// Shallow per-key merge of settings with provenance.
#[derive(Debug, Clone, Default)]
pub(crate) struct MergedSettings {
    pub values: Map<String, Value>,
    pub provenance: BTreeMap<String, Origin>,
}

impl MergedSettings {
    pub(crate) fn apply(&mut self, settings: &Map<String, Value>, origin: &Origin) {
        for (key, value) in settings {
            self.values.insert(key.clone(), value.clone());
            self.provenance.insert(key.clone(), origin.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::SourceKind;
    use serde_json::json;
    use std::path::PathBuf;

    fn origin(n: &str) -> Origin {
        Origin::File {
            source: SourceKind::PiGlobal,
            path: PathBuf::from(n),
        }
    }

    fn merged(entries: &[(&str, Value)]) -> MergedServer {
        let mut m = MergedServer::new("s", origin(entries[0].0), 0);
        for (file, entry) in entries {
            m.apply(entry.as_object().unwrap(), &origin(file), false);
        }
        m
    }

    #[test]
    fn later_file_wins_per_field_with_provenance() {
        let m = merged(&[
            ("a", json!({"command": "node", "args": ["a.js"], "env": {"K": "v"}})),
            ("b", json!({"args": ["b.js"], "disabled": true})),
        ]);
        assert_eq!(m.fields["command"], "node");
        assert_eq!(m.fields["args"], json!(["b.js"]));
        assert_eq!(m.provenance["command"], origin("a"));
        assert_eq!(m.provenance["args"], origin("b"));
        assert_eq!(m.provenance["env.K"], origin("a"));
        assert_eq!(m.origin, origin("b"));
    }

    #[test]
    fn url_change_drops_inherited_credentials() {
        let m = merged(&[
            (
                "a",
                json!({"url": "https://one", "headers": {"Authorization": "x"}, "bearerToken": "t", "oauth": {"clientId": "c"}, "auth": "oauth", "description": "d"}),
            ),
            ("b", json!({"url": "https://two"})),
        ]);
        for key in ["headers", "bearerToken", "oauth"] {
            assert!(!m.fields.contains_key(key), "{key} survived the url change");
        }
        assert!(!m.provenance.contains_key("headers.Authorization"));
        assert_eq!(m.fields["description"], "d");
        assert_eq!(m.fields["auth"], "oauth");
    }

    #[test]
    fn same_url_keeps_credentials_and_oauth_false_survives() {
        let m = merged(&[
            (
                "a",
                json!({"url": "https://one", "headers": {"X": "y"}, "oauth": false}),
            ),
            ("b", json!({"url": "https://one"})),
            ("c", json!({"url": "https://two"})),
        ]);
        assert_eq!(m.fields.get("oauth"), Some(&Value::Bool(false)));
        assert!(!m.fields.contains_key("headers"));
        let m = merged(&[
            ("a", json!({"url": "https://one", "headers": {"X": "y"}})),
            ("b", json!({"url": "https://one"})),
        ]);
        assert!(m.fields.contains_key("headers"));
    }

    #[test]
    fn transport_switch_drops_other_transport_fields() {
        let m = merged(&[
            (
                "a",
                json!({"type": "sse", "url": "https://one", "headers": {"X": "y"}, "auth": "bearer", "lifecycle": "eager"}),
            ),
            ("b", json!({"command": "node", "args": ["x"]})),
        ]);
        let keys: Vec<&String> = m.fields.keys().collect();
        assert_eq!(keys, ["lifecycle", "command", "args"]);
        let m = merged(&[
            ("a", json!({"command": "node", "env": {"A": "1"}, "cwd": "/x"})),
            ("b", json!({"socket": "/s"})),
        ]);
        assert_eq!(m.fields.keys().collect::<Vec<_>>(), ["socket"]);
    }

    #[test]
    fn null_removes_inherited_field() {
        let m = merged(&[
            ("a", json!({"command": "n", "description": "d"})),
            ("b", json!({"description": null})),
        ]);
        assert!(!m.fields.contains_key("description") && !m.provenance.contains_key("description"));
    }
}
