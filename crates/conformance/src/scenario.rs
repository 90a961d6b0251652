//! What each conformance scenario asks of the client (`MCP_CONFORMANCE_SCENARIO`, with `MCP_CONFORMANCE_CONTEXT`
//! for pre-registered credentials, keys and the SEP-990 identity provider): the one-server pimcp configuration to
//! build and the steps to run through the runtime. Auth scenarios share one shape: connect (the runtime logs in by
//! itself with `settings.autoAuth`, or by a machine grant), then call `test-tool` when the server lists it. Every
//! credential goes through the configuration fields a user would write (`oauth.clientSecret`,
//! `oauth.clientPrivateKey`, `oauth.identityAssertion`).

use anyhow::Context as _;
use serde_json::{Value, json};

/// The name of the only configured server.
pub(crate) const SERVER: &str = "conformance";
/// The client ID metadata document URL the `auth/basic-cimd` scenario expects (SEP-991).
pub(crate) const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// One step, run through the runtime.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// `RuntimeHandle::connect` (initialize + discovery).
    Connect,
    /// Call an upstream tool by its original name.
    Call { tool: &'static str, args: Value },
    /// Call the tool if the server lists it (with `{}`).
    CallIfListed(&'static str),
}

/// The configuration and the steps of one run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The `mcpServers` entry of [`SERVER`].
    pub server: Value,
    pub steps: Vec<Step>,
}

impl Plan {
    /// The in-memory configuration: one server, logins without a person (`autoAuth`).
    pub(crate) fn config(&self) -> Value {
        json!({"settings": {"autoAuth": true}, "mcpServers": {SERVER: self.server}})
    }
}

/// The plan for `scenario` against `url` (the suite appends the URL as the last argument).
pub(crate) fn plan(scenario: &str, url: &str, context: Option<&Value>) -> anyhow::Result<Plan> {
    // The suite speaks the initialize-era protocol (2025-03-26 … 2025-11-25): no server/discover probe.
    let mut server = json!({"url": url, "protocol": "legacy"});
    let steps = match scenario {
        "initialize" => vec![Step::Connect],
        "tools_call" => vec![Step::Call {
            tool: "add_numbers",
            args: json!({"a": 5, "b": 3}),
        }],
        "elicitation-sep1034-client-defaults" => vec![Step::Call {
            tool: "test_client_elicitation_defaults",
            args: json!({}),
        }],
        "sse-retry" => vec![Step::Call {
            tool: "test_reconnection",
            args: json!({}),
        }],
        auth if auth.starts_with("auth/") => {
            let mut oauth = json!({"clientMetadataUrl": CLIENT_METADATA_URL});
            if let Some(context) = context {
                if let Some(id) = context.get("client_id").and_then(Value::as_str) {
                    oauth["clientId"] = id.into();
                }
                if let Some(secret) = context.get("client_secret").and_then(Value::as_str) {
                    oauth["clientSecret"] = secret.into();
                }
                if let Some(pem) = context.get("private_key_pem").and_then(Value::as_str) {
                    oauth["clientPrivateKey"] = pem.into();
                }
                // SEP-990: the IdP and the user's ID token (a real user would write `"idToken": "!command …"`).
                if let Some(id_token) = context.get("idp_id_token").and_then(Value::as_str) {
                    let mut idp = json!({"idToken": id_token});
                    for (from, to) in [
                        ("idp_issuer", "idpIssuer"),
                        ("idp_token_endpoint", "idpTokenEndpoint"),
                        ("idp_client_id", "idpClientId"),
                    ] {
                        if let Some(value) = context.get(from).and_then(Value::as_str) {
                            idp[to] = value.into();
                        }
                    }
                    oauth["grantType"] = "identity_assertion".into();
                    oauth["identityAssertion"] = idp;
                }
            }
            if auth.starts_with("auth/client-credentials") {
                oauth["grantType"] = "client_credentials".into();
                oauth
                    .get("clientId")
                    .context("client_credentials scenarios pass `client_id` in MCP_CONFORMANCE_CONTEXT")?;
            }
            server["oauth"] = oauth;
            vec![Step::Connect, Step::CallIfListed("test-tool")]
        }
        other => {
            tracing::warn!(scenario = other, "unknown scenario: connecting and listing tools only");
            vec![Step::Connect]
        }
    };
    Ok(Plan { server, steps })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn core_scenarios() {
        let p = plan("tools_call", "http://localhost:1/mcp", None).unwrap();
        assert_eq!(p.server["protocol"], "legacy");
        assert!(p.server.get("oauth").is_none());
        assert!(matches!(
            &p.steps[..],
            [Step::Call {
                tool: "add_numbers",
                ..
            }]
        ));
        assert_eq!(
            plan("initialize", "http://localhost:1", None).unwrap().steps,
            vec![Step::Connect]
        );
        assert_eq!(
            plan("something-new", "http://x/mcp", None).unwrap().steps,
            vec![Step::Connect]
        );
    }

    #[test]
    fn auth_scenarios_take_their_context() {
        let context = json!({"name": "auth/pre-registration", "client_id": "pre", "client_secret": "s3cret"});
        let p = plan("auth/pre-registration", "http://localhost:1/mcp", Some(&context)).unwrap();
        assert_eq!(p.server["oauth"]["clientId"], "pre");
        assert_eq!(p.server["oauth"]["clientSecret"], "s3cret");
        assert_eq!(p.server["oauth"]["clientMetadataUrl"], CLIENT_METADATA_URL);
        assert!(p.server["oauth"].get("grantType").is_none());
        assert_eq!(p.steps, vec![Step::Connect, Step::CallIfListed("test-tool")]);

        let context =
            json!({"client_id": "m2m", "private_key_pem": "-----BEGIN PRIVATE KEY-----", "signing_algorithm": "ES256"});
        let p = plan("auth/client-credentials-jwt", "http://localhost:1/mcp", Some(&context)).unwrap();
        assert_eq!(p.server["oauth"]["grantType"], "client_credentials");
        assert_eq!(p.server["oauth"]["clientPrivateKey"], "-----BEGIN PRIVATE KEY-----");
        assert!(plan("auth/client-credentials-basic", "http://localhost:1/mcp", None).is_err());

        let config = p.config();
        assert_eq!(config["settings"]["autoAuth"], true);
        assert_eq!(config["mcpServers"][SERVER]["url"], "http://localhost:1/mcp");

        let context = json!({"client_id": "xaa", "client_secret": "s", "idp_client_id": "idp-client",
            "idp_id_token": "eyJ.x.y", "idp_issuer": "http://localhost:2", "idp_token_endpoint": "http://localhost:2/token"});
        let p = plan(
            "auth/cross-app-access-complete-flow",
            "http://localhost:1/mcp",
            Some(&context),
        )
        .unwrap();
        let oauth = &p.server["oauth"];
        assert_eq!(oauth["grantType"], "identity_assertion");
        assert_eq!(oauth["clientId"], "xaa");
        assert_eq!(
            oauth["identityAssertion"],
            json!({"idToken": "eyJ.x.y", "idpIssuer": "http://localhost:2",
                   "idpTokenEndpoint": "http://localhost:2/token", "idpClientId": "idp-client"})
        );
        // The generated configuration is valid for pimcp-config (the grant, the nested object, the key).
        let dir = tempfile::tempdir().unwrap();
        let loaded = pimcp_config::load_in_memory(&p.config(), &pimcp_config::LoadOptions::new(dir.path(), dir.path()));
        assert!(
            loaded
                .problems
                .iter()
                .all(|p| p.severity != pimcp_config::Severity::Error),
            "{:?}",
            loaded.problems
        );
    }
}
