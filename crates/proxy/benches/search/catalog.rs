//! The search benchmark's synthetic catalogs: a fixed-seed generator of servers, tool names in each naming style,
//! descriptions over a skewed lexicon, `searchKeywords` and schemas, plus two CJK tools.

use pimcp_proxy::{ToolDoc, doc_schema};
use serde_json::{Map, Value, json};

/// SplitMix64: a tiny deterministic generator, so every run measures the same catalogs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const SERVERS: &[&str] = &[
    "github",
    "gitlab",
    "linear",
    "jira",
    "slack",
    "discord",
    "notion",
    "confluence",
    "postgres",
    "mysql",
    "sqlite",
    "filesystem",
    "kubernetes",
    "docker",
    "aws",
    "gcp",
    "azure",
    "stripe",
    "shopify",
    "salesforce",
    "hubspot",
    "zendesk",
    "gmail",
    "outlook",
    "gcal",
    "drive",
    "dropbox",
    "figma",
    "sentry",
    "datadog",
    "grafana",
    "pagerduty",
    "twilio",
    "sendgrid",
    "airtable",
    "asana",
    "trello",
    "clickup",
    "monday",
    "zoom",
    "teams",
    "spotify",
    "youtube",
    "twitter",
    "reddit",
    "wikipedia",
    "arxiv",
    "brave-search",
    "puppeteer",
    "playwright",
];
const VERBS: &[&str] = &[
    "get", "list", "create", "update", "delete", "search", "find", "send", "archive", "restore", "add", "remove",
    "set", "fetch", "query", "run", "start", "stop", "upload", "download", "export", "import", "merge", "close",
];
const NOUNS: &[&str] = &[
    "issue",
    "pull_request",
    "comment",
    "message",
    "channel",
    "file",
    "directory",
    "user",
    "team",
    "project",
    "invoice",
    "customer",
    "payment",
    "subscription",
    "ticket",
    "event",
    "calendar",
    "document",
    "page",
    "database",
    "table",
    "row",
    "query",
    "bucket",
    "object",
    "instance",
    "cluster",
    "pod",
    "deployment",
    "service",
    "log",
    "metric",
    "alert",
    "incident",
    "dashboard",
    "label",
    "milestone",
    "branch",
    "commit",
    "release",
    "workflow",
    "secret",
    "webhook",
    "contact",
    "deal",
    "lead",
    "order",
    "product",
    "playlist",
    "video",
    "post",
    "thread",
];
const QUALIFIERS: &[&str] = &[
    "",
    "",
    "",
    "by_id",
    "details",
    "status",
    "batch",
    "history",
    "permissions",
    "summary",
];
const ADJECTIVES: &[&str] = &[
    "new",
    "existing",
    "archived",
    "recent",
    "shared",
    "private",
    "public",
    "pending",
    "failed",
    "scheduled",
];
const PHRASES: &[&str] = &[
    "Supports pagination with a cursor.",
    "Returns at most 100 items per call.",
    "Requires write access to the workspace.",
    "Results are sorted by most recent first.",
    "Use the id returned by the list call.",
    "Fields not provided are left unchanged.",
    "The operation cannot be undone.",
    "Filters can be combined.",
];

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "zen", "tor", "pha", "ri", "sel", "dun", "vo", "quin", "bra", "te", "nox", "fi", "gul", "har",
    "ju", "mek", "os", "pra", "sti", "ul", "wex", "yo", "zar", "cle", "dro", "ev", "gan",
];

/// A long tail of product terms (deterministic pseudo-words), so the vocabulary grows with the catalog as real
/// catalogs' does.
pub(crate) fn lexicon(n: usize) -> Vec<String> {
    let mut rng = Rng(0x1E81C0);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let word: String = (0..2 + rng.below(3)).map(|_| rng.pick(SYLLABLES)).collect();
        if seen.insert(word.clone()) {
            out.push(word);
        }
    }
    out
}

/// Index into a lexicon of `n` words, skewed toward the front (a few terms are common, most are rare).
fn zipfish(rng: &mut Rng, n: usize) -> usize {
    let u = (rng.next() % 1_000_000) as f64 / 1_000_000.0;
    ((u * u * u) * n as f64) as usize % n
}

fn style(server_idx: usize, verb: &str, noun: &str, qualifier: &str) -> String {
    let words: Vec<&str> = [verb]
        .into_iter()
        .chain(noun.split('_'))
        .chain(qualifier.split('_'))
        .filter(|w| !w.is_empty())
        .collect();
    match server_idx % 3 {
        0 => words.join("_"),
        1 => words.join("-"),
        _ => {
            let mut s = words[0].to_string();
            for w in &words[1..] {
                let mut c = w.chars();
                if let Some(first) = c.next() {
                    s.extend(first.to_uppercase());
                    s.push_str(c.as_str());
                }
            }
            s
        }
    }
}

fn schema(rng: &mut Rng, noun: &str) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    let id = format!("{}_id", noun.split('_').next().unwrap_or(noun));
    props.insert(
        id.clone(),
        json!({"type": "string", "description": format!("Identifier of the {noun}")}),
    );
    required.push(json!(id));
    let extra = rng.below(5);
    let pool: &[(&str, Value)] = &[
        ("limit", json!({"type": "integer", "minimum": 1, "maximum": 100})),
        ("cursor", json!({"type": "string"})),
        ("state", json!({"enum": ["open", "closed", "all"]})),
        ("labels", json!({"type": "array", "items": {"type": "string"}})),
        ("body", json!({"type": "string", "description": "Markdown body"})),
        (
            "filter",
            json!({"type": "object", "properties": {"field": {"type": "string"}, "value": {"type": "string"}}}),
        ),
        ("dry_run", json!({"type": "boolean"})),
    ];
    for _ in 0..extra {
        let (name, s) = &pool[rng.below(pool.len())];
        props.insert((*name).to_string(), s.clone());
    }
    json!({"type": "object", "properties": props, "required": required})
}

pub(crate) fn catalog(n_tools: usize, n_servers: usize, seed: u64, lexicon: &[String]) -> Vec<ToolDoc> {
    let mut rng = Rng(seed);
    let per_server = n_tools.div_ceil(n_servers);
    let mut docs = Vec::with_capacity(n_tools);
    for s in 0..n_servers {
        let server = if s < SERVERS.len() {
            SERVERS[s].to_string()
        } else {
            format!("{}-{s}", SERVERS[s % SERVERS.len()])
        };
        let mut seen = std::collections::HashSet::new();
        for i in 0..per_server {
            if docs.len() == n_tools {
                break;
            }
            let (verb, noun, qualifier) = (rng.pick(VERBS), rng.pick(NOUNS), rng.pick(QUALIFIERS));
            let mut original = style(s, verb, noun, qualifier);
            if !seen.insert(original.clone()) {
                original = format!("{original}_{i}");
                seen.insert(original.clone());
            }
            let readable = noun.replace('_', " ");
            let mut description = format!(
                "{} {} {readable} in {server}{}. {}",
                capitalize(verb),
                if verb == "list" || verb == "search" { "the" } else { "a" },
                if qualifier.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", qualifier.replace('_', " "))
                },
                rng.pick(PHRASES),
            );
            if rng.below(3) == 0 {
                description.push_str(&format!(" Works with {} {readable}s.", rng.pick(ADJECTIVES)));
            }
            if rng.below(5) < 3 {
                let terms: Vec<&str> = (0..1 + rng.below(3))
                    .map(|_| lexicon[zipfish(&mut rng, lexicon.len())].as_str())
                    .collect();
                description.push_str(&format!(" Related: {}.", terms.join(", ")));
            }
            let keywords = if rng.below(4) == 0 {
                vec![rng.pick(ADJECTIVES).to_string(), server.clone()]
            } else {
                Vec::new()
            };
            let input_schema = doc_schema(schema(&mut rng, noun));
            let mut doc = ToolDoc::new(
                format!("{server}_{original}"),
                original,
                server.clone(),
                description,
                input_schema,
            );
            doc.keywords = keywords;
            docs.push(doc);
        }
    }
    if n_tools >= 20 {
        // A few CJK tools, as real catalogs sometimes have.
        docs.truncate(n_tools - 2);
        for (name, description) in [
            ("搜索文档", "在知识库中搜索文档和页面"),
            ("ページ作成", "新しいページを作成します"),
        ] {
            let input_schema = doc_schema(json!({"type": "object", "properties": {"q": {"type": "string"}}}));
            docs.push(ToolDoc::new(
                format!("wiki_{name}"),
                name,
                "wiki",
                description,
                input_schema,
            ));
        }
    }
    docs
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
