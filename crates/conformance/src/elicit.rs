//! Elicitation for conformance runs: accept every form request with the defaults its schema declares (SEP-1034),
//! which is what `elicitation-sep1034-client-defaults` checks.

use async_trait::async_trait;
use pimcp_actors::ElicitationHandler;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

/// Accepts with every property's `default` (properties without one are left out).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AcceptDefaults;

#[async_trait]
impl ElicitationHandler for AcceptDefaults {
    async fn elicit(&self, server: &str, request: ElicitRequestParams) -> ElicitResult {
        let params = serde_json::to_value(&request).unwrap_or_default();
        let content = defaults_of(&params);
        tracing::info!(%server, fields = content.len(), "elicitation accepted with the schema's defaults");
        ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
    }
}

/// `requestedSchema.properties.*.default` of an `elicitation/create` request.
pub(crate) fn defaults_of(params: &Value) -> Map<String, Value> {
    params
        .get("requestedSchema")
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .filter_map(|(name, schema)| schema.get("default").map(|d| (name.clone(), d.clone())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_each_default_and_skips_the_rest() {
        let params = serde_json::json!({
            "message": "defaults",
            "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "note": {"type": "string"},
            }},
        });
        let got = defaults_of(&params);
        assert_eq!(got.len(), 5);
        assert_eq!(got["age"], 30);
        assert_eq!(got["verified"], true);
        assert!(!got.contains_key("note"));
        assert!(defaults_of(&serde_json::json!({"message": "url mode"})).is_empty());
    }
}
