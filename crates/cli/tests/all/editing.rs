//! add / remove / enable / disable through the binary.

use crate::support::Sandbox;

#[test]
fn add_remove_enable_disable_round_trip() {
    let sb = Sandbox::new();
    let add = sb.run(&[
        "add",
        "time",
        "--env",
        "TZ=UTC",
        "--",
        "uvx",
        "mcp-server-time",
        "--local-timezone",
        "UTC",
    ]);
    assert_eq!(add.code, 0, "{add:?}");
    assert!(
        add.stdout.contains("added `time` in ~/.pi/agent/mcp.json (new file)"),
        "{add:?}"
    );
    let text = std::fs::read_to_string(sb.global()).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value["mcpServers"]["time"]["args"],
        serde_json::json!(["mcp-server-time", "--local-timezone", "UTC"])
    );
    assert_eq!(value["mcpServers"]["time"]["env"]["TZ"], "UTC");

    let add_http = sb.run(&[
        "add",
        "docs",
        "--project",
        "--url",
        "https://docs.example/mcp",
        "-H",
        "X-Team: core",
    ]);
    assert_eq!(add_http.code, 0, "{add_http:?}");
    assert!(add_http.stdout.contains("not trusted"), "{add_http:?}");
    let project = std::fs::read_to_string(sb.project.join(".mcp.json")).unwrap();
    assert!(project.contains("\"X-Team\": \"core\""), "{project}");

    let dup = sb.run(&["add", "time", "--", "other"]);
    assert_eq!(dup.code, 1, "{dup:?}");
    assert!(dup.stderr.contains("server `time` already exists"), "{dup:?}");

    let disable = sb.run(&["disable", "time"]);
    assert_eq!(disable.code, 0, "{disable:?}");
    let show = sb.run(&["config", "show", "--json"]).json();
    let time = show["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "time")
        .unwrap()
        .clone();
    assert_eq!(time["status"], "disabled");
    assert_eq!(time["fields"]["disabled"]["from"]["source"], "pi-project");
    assert_eq!(
        std::fs::read_to_string(sb.global()).unwrap(),
        text,
        "disable never edits the source file"
    );

    let enable = sb.run(&["enable", "time"]);
    assert_eq!(enable.code, 0, "{enable:?}");
    let show = sb.run(&["config", "show", "--json"]).json();
    let time = show["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "time")
        .unwrap()
        .clone();
    assert_eq!(time["status"], "available");

    let remove = sb.run(&["remove", "time"]);
    assert_eq!(remove.code, 0, "{remove:?}");
    assert!(
        sb.run(&["config", "show", "--json"]).json()["servers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["name"] != "time")
    );
    let again = sb.run(&["remove", "time"]);
    assert_eq!(again.code, 2, "{again:?}");
}

#[test]
fn editing_a_broken_file_fails_and_leaves_it_alone() {
    let sb = Sandbox::new();
    let broken = "{ \"mcpServers\": { oops } }";
    sb.write(sb.global(), broken);
    let run = sb.run(&["add", "x", "--", "cmd"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains(":1:"), "names the position: {run:?}");
    assert_eq!(std::fs::read_to_string(sb.global()).unwrap(), broken);
}
