//! Approval of gated calls (`approveTools`) through the host: `pimcp-run` asks its MCP host with a form elicitation
//! (allow once / allow for this session / deny) and maps the answer to the runtime's [`ApprovalDecision`]. Anything
//! but an explicit allow is a denial; a host that cannot be asked leaves the call failing closed (`approval`).

use std::time::Duration;

use pimcp_actors::{ApprovalDecision, ApprovalRequest};
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::Peer;
use serde_json::{Value, json};

/// How long the host (a human) may take to answer an approval prompt.
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);
/// Characters of the arguments shown in an approval prompt.
pub const APPROVAL_ARGS_PREVIEW_CHARS: usize = 500;

/// The form field and its values.
const FIELD: &str = "decision";
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_SESSION: &str = "allow_for_session";
const DENY: &str = "deny";

/// The elicitation sent to the host for one gated call.
pub fn approval_elicitation(request: &ApprovalRequest) -> Option<ElicitRequestParams> {
    let args = request
        .arguments
        .as_ref()
        .map(|a| serde_json::to_string(a).unwrap_or_default())
        .unwrap_or_else(|| "{}".to_owned());
    let mut preview: String = args.chars().take(APPROVAL_ARGS_PREVIEW_CHARS).collect();
    if args.chars().count() > APPROVAL_ARGS_PREVIEW_CHARS {
        preview.push('…');
    }
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {
            FIELD: {
                "type": "string",
                "title": "Decision",
                "enum": [ALLOW_ONCE, ALLOW_SESSION, DENY],
                "enumNames": ["Allow once", "Allow for this session", "Deny"]
            }
        },
        "required": [FIELD]
    }))
    .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "MCP server `{}` wants to run tool `{}`.\nArguments: {preview}",
            request.server, request.original
        ),
        requested_schema: schema,
    })
}

/// Asks the host; maps its answer.
pub(crate) async fn ask_host(host: &Peer<RoleServer>, request: &ApprovalRequest) -> ApprovalDecision {
    let Some(params) = approval_elicitation(request) else {
        return ApprovalDecision::InputRequired;
    };
    match tokio::time::timeout(APPROVAL_TIMEOUT, host.create_elicitation(params)).await {
        Ok(Ok(result)) => decision_of(result.action, result.content.as_ref()),
        Ok(Err(e)) => {
            tracing::warn!(server = %request.server, tool = %request.original, error = %e, "approval elicitation failed");
            ApprovalDecision::InputRequired
        }
        Err(_) => ApprovalDecision::Deny,
    }
}

/// An accepted form with an allow value allows; everything else denies.
pub(crate) fn decision_of(action: ElicitationAction, content: Option<&Value>) -> ApprovalDecision {
    if action != ElicitationAction::Accept {
        return ApprovalDecision::Deny;
    }
    match content.and_then(|c| c.get(FIELD)).and_then(Value::as_str) {
        Some(ALLOW_ONCE) => ApprovalDecision::AllowOnce,
        Some(ALLOW_SESSION) => ApprovalDecision::AllowForSession,
        _ => ApprovalDecision::Deny,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn only_an_accepted_allow_allows() {
        let c = |v: &str| json!({ FIELD: v });
        assert_eq!(
            decision_of(ElicitationAction::Accept, Some(&c(ALLOW_ONCE))),
            ApprovalDecision::AllowOnce
        );
        assert_eq!(
            decision_of(ElicitationAction::Accept, Some(&c(ALLOW_SESSION))),
            ApprovalDecision::AllowForSession
        );
        assert_eq!(
            decision_of(ElicitationAction::Accept, Some(&c(DENY))),
            ApprovalDecision::Deny
        );
        assert_eq!(
            decision_of(ElicitationAction::Accept, Some(&c("yes"))),
            ApprovalDecision::Deny
        );
        assert_eq!(decision_of(ElicitationAction::Accept, None), ApprovalDecision::Deny);
        assert_eq!(
            decision_of(ElicitationAction::Decline, Some(&c(ALLOW_ONCE))),
            ApprovalDecision::Deny
        );
        assert_eq!(decision_of(ElicitationAction::Cancel, None), ApprovalDecision::Deny);
    }

    #[test]
    fn the_prompt_names_server_tool_and_a_bounded_preview() {
        let long = "x".repeat(2000);
        let request = ApprovalRequest::tool_call(
            "fs",
            "fs_delete",
            "delete",
            json!({ "path": long }).as_object().cloned(),
        );
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = approval_elicitation(&request).unwrap()
        else {
            panic!("form expected");
        };
        assert!(message.contains("`fs`") && message.contains("`delete`"), "{message}");
        assert!(message.chars().count() < APPROVAL_ARGS_PREVIEW_CHARS + 100, "{message}");
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["required"], json!([FIELD]));
        assert_eq!(schema["properties"][FIELD]["enum"][2], DENY);
    }
}
