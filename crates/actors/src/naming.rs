//! Tool naming: `toolPrefix` modes, escaping, no double prefix, resource tool names, `-`/`_` fuzz,
//! and the `*`/`?` globs of `includeTools`/`excludeTools`.

use pimcp_config::ToolPrefix;

/// The server name with every character outside `[A-Za-z0-9_-]` replaced by `_<hex codepoint>_`.
pub fn sanitize_server(server: &str) -> String {
    let mut out = String::with_capacity(server.len());
    for c in server.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            out.push_str(&format!("_{:x}_", c as u32));
        }
    }
    out
}

/// The prefix a server's tools get under `mode` (empty for [`ToolPrefix::None`]).
pub fn server_prefix(server: &str, mode: ToolPrefix) -> String {
    match mode {
        ToolPrefix::Server => sanitize_server(server),
        ToolPrefix::Short => {
            let lower = server.to_ascii_lowercase();
            let stripped = if lower.ends_with("-mcp") || lower.ends_with("_mcp") {
                &server[..server.len() - 4]
            } else if lower.ends_with("mcp") {
                &server[..server.len() - 3]
            } else {
                server
            };
            if stripped.is_empty() {
                "mcp".to_owned()
            } else {
                sanitize_server(stripped)
            }
        }
        ToolPrefix::Mcp => format!("mcp__{}", sanitize_server(server)),
        ToolPrefix::None => String::new(),
    }
}

/// An upstream tool name made safe for hosts: `.` and `/` become `_`, other characters outside `[A-Za-z0-9_-]`
/// become `_<hex>_`.
pub(crate) fn sanitize_tool(tool: &str) -> String {
    let mut out = String::with_capacity(tool.len());
    for c in tool.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else if c == '.' || c == '/' {
            out.push('_');
        } else {
            out.push_str(&format!("_{:x}_", c as u32));
        }
    }
    out
}

/// The exposed name of `tool` of `server`: `<prefix>_<tool>`, never double-prefixed, bare for `none`.
pub fn format_tool_name(tool: &str, server: &str, mode: ToolPrefix) -> String {
    with_prefix(tool, &server_prefix(server, mode))
}

/// [`format_tool_name`] with the server's prefix ([`server_prefix`]) computed once by the caller.
pub(crate) fn with_prefix(tool: &str, prefix: &str) -> String {
    let tool = sanitize_tool(tool);
    if prefix.is_empty() {
        return tool;
    }
    let prefixed = tool.len() > prefix.len() + 1 && tool.starts_with(prefix) && tool[prefix.len()..].starts_with('_');
    if prefixed {
        tool
    } else {
        let mut out = String::with_capacity(prefix.len() + 1 + tool.len());
        out.push_str(prefix);
        out.push('_');
        out.push_str(&tool);
        out
    }
}

/// `read_<name>` for a resource: non-alphanumerics become `_` (collapsed, trimmed), lowercase; empty or
/// digit-leading names become `resource…`.
pub fn resource_tool_name(resource_name: &str) -> String {
    let mut s = String::new();
    let mut last_us = false;
    for c in resource_name.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c.to_ascii_lowercase());
            last_us = false;
        } else if !last_us {
            s.push('_');
            last_us = true;
        }
    }
    let s = s.trim_matches('_').to_owned();
    let s = if s.is_empty() {
        "resource".to_owned()
    } else if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("resource_{s}")
    } else {
        s
    };
    format!("read_{s}")
}

/// `-` and `_` are interchangeable and case is ignored when matching names loosely.
pub(crate) fn fuzzy_key(name: &str) -> String {
    name.chars()
        .map(|c| if c == '-' { '_' } else { c.to_ascii_lowercase() })
        .collect()
}

/// Every name a tool may be referred to by in globs and resolution: original, the current prefixed name, and the
/// prefixed names under the `server`, `short` and `mcp` modes.
pub fn tool_candidates(original: &str, server: &str, mode: ToolPrefix) -> Vec<String> {
    let mut out = vec![original.to_owned(), format_tool_name(original, server, mode)];
    for m in [ToolPrefix::Server, ToolPrefix::Short, ToolPrefix::Mcp] {
        let n = format_tool_name(original, server, m);
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// A glob of `includeTools`/`excludeTools`/`approveTools`: `*` is any run, `?` one character, the rest literal,
/// anchored, case-sensitive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    chars: Vec<char>,
}

impl Glob {
    /// The glob `pattern`.
    pub fn new(pattern: &str) -> Glob {
        Glob {
            chars: pattern.chars().collect(),
        }
    }

    /// Whether the whole of `text` matches.
    pub fn matches(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        let p = &self.chars;
        // Iterative wildcard matching with single-star backtracking: linear in practice, no recursion.
        let (mut ti, mut pi) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while ti < t.len() {
            if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
                ti += 1;
                pi += 1;
            } else if pi < p.len() && p[pi] == '*' {
                star = Some((pi, ti));
                pi += 1;
            } else if let Some((sp, st)) = star {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            } else {
                return false;
            }
        }
        while pi < p.len() && p[pi] == '*' {
            pi += 1;
        }
        pi == p.len()
    }
}

/// `includeTools` then `excludeTools` over a tool's candidate names. An empty include list includes everything.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    include: Vec<Glob>,
    exclude: Vec<Glob>,
}

impl ToolFilter {
    /// A filter from `includeTools` (empty: everything) and `excludeTools` globs.
    pub fn new(include: &[String], exclude: &[String]) -> ToolFilter {
        ToolFilter {
            include: include.iter().map(|p| Glob::new(p)).collect(),
            exclude: exclude.iter().map(|p| Glob::new(p)).collect(),
        }
    }

    /// No `includeTools` and no `excludeTools`: every tool passes (callers skip computing candidates).
    pub fn allows_all(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    /// Whether a tool known by any of `candidates` (its original and prefixed names) passes.
    pub fn allows(&self, candidates: &[String]) -> bool {
        let hit = |globs: &[Glob]| globs.iter().any(|g| candidates.iter().any(|c| g.matches(c)));
        let included = self.include.is_empty() || hit(&self.include);
        included && !hit(&self.exclude)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_modes() {
        assert_eq!(
            format_tool_name("echo", "everything", ToolPrefix::Server),
            "everything_echo"
        );
        assert_eq!(
            format_tool_name("take_screenshot", "chrome-devtools", ToolPrefix::Server),
            "chrome-devtools_take_screenshot"
        );
        assert_eq!(
            format_tool_name("search", "github-mcp", ToolPrefix::Short),
            "github_search"
        );
        assert_eq!(format_tool_name("search", "mcp", ToolPrefix::Short), "mcp_search");
        assert_eq!(
            format_tool_name("search", "github", ToolPrefix::Mcp),
            "mcp__github_search"
        );
        assert_eq!(format_tool_name("search", "github", ToolPrefix::None), "search");
    }

    #[test]
    fn unsafe_characters_are_escaped() {
        assert_eq!(sanitize_server("my server"), "my_20_server");
        assert_eq!(
            format_tool_name("files.read", "a.b", ToolPrefix::Server),
            "a_2e_b_files_read"
        );
        assert_eq!(sanitize_tool("ns/tool"), "ns_tool");
        assert_eq!(sanitize_tool("é"), "_e9_");
    }

    #[test]
    fn no_double_prefix() {
        assert_eq!(
            format_tool_name("github_search", "github", ToolPrefix::Server),
            "github_search"
        );
        assert_eq!(
            format_tool_name("github_", "github", ToolPrefix::Server),
            "github_github_"
        );
    }

    #[test]
    fn resource_names() {
        assert_eq!(resource_tool_name("Architecture.md"), "read_architecture_md");
        assert_eq!(resource_tool_name("  "), "read_resource");
        assert_eq!(resource_tool_name("1st file"), "read_resource_1st_file");
    }

    #[test]
    fn globs() {
        let g = Glob::new("get_*");
        assert!(g.matches("get_sum"));
        assert!(g.matches("get_"));
        assert!(!g.matches("xget_sum"));
        assert!(Glob::new("e?ho").matches("echo"));
        assert!(!Glob::new("e?ho").matches("eho"));
        assert!(Glob::new("*a*b*").matches("xxaxxbxx"));
        assert!(!Glob::new("*a*b").matches("xxaxxbxx"));
        assert!(Glob::new("a.b").matches("a.b"));
        assert!(!Glob::new("a.b").matches("axb"));
        assert!(!Glob::new("Echo").matches("echo"));
        assert!(Glob::new("*").matches(""));
    }

    #[test]
    fn include_then_exclude() {
        let c = tool_candidates("get-sum", "everything", ToolPrefix::Server);
        assert!(ToolFilter::new(&[], &[]).allows(&c));
        assert!(ToolFilter::new(&["get*".into()], &[]).allows(&c));
        assert!(ToolFilter::new(&["everything_get*".into()], &[]).allows(&c));
        assert!(!ToolFilter::new(&["get*".into()], &["*sum".into()]).allows(&c));
        assert!(!ToolFilter::new(&["echo".into()], &[]).allows(&c));
    }

    #[test]
    fn fuzzy() {
        assert_eq!(fuzzy_key("everything_get-sum"), fuzzy_key("everything_get_sum"));
    }
}
