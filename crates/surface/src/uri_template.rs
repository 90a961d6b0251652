//! Matching a URI against an RFC 6570 URI template (`resources/templates/list`), to route a host's
//! `resources/read` of a templated URI to the server that lists the template. Only matching: no variables are
//! extracted, and any value an expression could expand to is accepted.

/// Whether `uri` is one of the expansions of `template`. Literal text must match exactly; an expression matches:
/// `{var}`, `{.var}`, `{;var}` one or more characters up to the next `/`, `?` or `#` (after its `.`/`;`);
/// `{/var}` a `/` and a path (several segments when exploded); `{+var}` any non-empty text; `{#var}` a `#` and any
/// text; `{?var}`/`{&var}` nothing, or a `?`/`&` and text up to a `#`. A malformed template (an unclosed `{`)
/// matches nothing.
pub fn template_matches(template: &str, uri: &str) -> bool {
    match parse(template) {
        Some(parts) => match_from(&parts, uri),
        None => false,
    }
}

/// Longest URI considered: the matcher backtracks, and a URI beyond this is not a resource a host reads.
const MAX_URI: usize = 8 * 1024;

enum Part<'a> {
    Literal(&'a str),
    /// The expression's operator (`None` for a simple `{var}`).
    Expression(Option<char>),
}

fn parse(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let end = rest.find('}')?;
                let body = &rest[1..end];
                let operator = body.chars().next().filter(|c| "+#./;?&".contains(*c));
                parts.push(Part::Expression(operator));
                rest = &rest[end + 1..];
            }
            Some(i) => {
                parts.push(Part::Literal(&rest[..i]));
                rest = &rest[i..];
            }
            None => {
                parts.push(Part::Literal(rest));
                rest = "";
            }
        }
    }
    Some(parts)
}

fn match_from(parts: &[Part<'_>], uri: &str) -> bool {
    if uri.len() > MAX_URI {
        return false;
    }
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(text) => uri.strip_prefix(text).is_some_and(|after| match_from(rest, after)),
        Part::Expression(operator) => {
            let (prefix, optional, stop): (&str, bool, &[char]) = match operator {
                None => ("", false, &['/', '?', '#']),
                Some('.') => (".", false, &['/', '?', '#']),
                Some(';') => (";", false, &['/', '?', '#']),
                Some('/') => ("/", false, &['?', '#']),
                Some('+') => ("", false, &[]),
                Some('#') => ("#", false, &[]),
                Some('?') => ("?", true, &['#']),
                Some('&') => ("&", true, &['#']),
                Some(_) => ("", false, &[]),
            };
            if optional && match_from(rest, uri) {
                return true;
            }
            let Some(value) = uri.strip_prefix(prefix) else {
                return false;
            };
            // Every non-empty run of allowed characters, shortest first, followed by the rest of the template.
            let allowed = value.find(|c| stop.contains(&c)).unwrap_or(value.len());
            (1..=allowed)
                .filter(|&n| value.is_char_boundary(n))
                .any(|n| match_from(rest, &value[n..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn simple_expressions_match_one_segment() {
        assert!(template_matches("fixture://items/{id}", "fixture://items/42"));
        assert!(!template_matches("fixture://items/{id}", "fixture://items/"));
        assert!(!template_matches("fixture://items/{id}", "fixture://items/4/2"));
        assert!(!template_matches("fixture://items/{id}", "fixture://other/42"));
        assert!(template_matches(
            "repo://{owner}/{name}/readme",
            "repo://me/pimcp/readme"
        ));
        assert!(!template_matches("repo://{owner}/{name}/readme", "repo://me/readme"));
    }

    #[test]
    fn operators() {
        assert!(template_matches("file://{+path}", "file:///etc/hosts"));
        assert!(template_matches("docs://page{#section}", "docs://page#intro"));
        assert!(template_matches("api://search{?q,limit}", "api://search"));
        assert!(template_matches("api://search{?q,limit}", "api://search?q=x&limit=2"));
        assert!(template_matches("mem://{name}{.ext}", "mem://notes.txt"));
        assert!(template_matches("tree://root{/path*}", "tree://root/a/b/c"));
        assert!(!template_matches("tree://root{/path*}", "tree://root"));
    }

    #[test]
    fn malformed_templates_and_huge_uris_match_nothing() {
        assert!(!template_matches("broken://{id", "broken://{id"));
        let long = format!("file://{}", "a".repeat(super::MAX_URI));
        assert!(!template_matches("file://{+path}", &long));
    }
}
