//! Tests of the search module: tokenizing, ranking, pagination, regex mode and its ASCII fast path, the reused
//! query arrays, lookups and suggestions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::index::IdLists;
use super::regex_search::{Pattern, ascii_fast_path_is_exact, compiled};
use super::suggest::OsaScratch;
use super::tokens::{normalize, tokenize};
use super::{Lookup, MAX_LIMIT, MAX_TOKEN_CHARS, MatchKind, SearchIndex, SearchPage, SearchQuery, ToolDoc, doc_schema};
use crate::error::Error;

fn doc(server: &str, original: &str, description: &str) -> ToolDoc {
    ToolDoc {
        name: format!("{server}_{original}"),
        original_name: original.to_string(),
        server: server.to_string(),
        description: description.to_string(),
        keywords: Vec::new(),
        input_schema: doc_schema(json!({"type": "object"})),
        needs_approval: false,
    }
}

fn everything() -> SearchIndex {
    SearchIndex::build(vec![
        doc("everything", "echo", "Echoes back the input string"),
        doc("everything", "add", "Adds two numbers"),
        doc("everything", "get-sum", "Returns the sum of two numbers"),
        doc(
            "everything",
            "longRunningOperation",
            "Demonstrates a long running operation with progress updates",
        ),
        doc(
            "everything",
            "printEnv",
            "Prints all environment variables, helpful for debugging MCP server configuration",
        ),
        doc(
            "everything",
            "sampleLLM",
            "Samples from an LLM using MCP's sampling feature",
        ),
        doc("everything", "getTinyImage", "Returns the MCP_TINY_IMAGE"),
        doc("github", "create_issue", "Create a new issue in a GitHub repository"),
        doc(
            "github",
            "list_issues",
            "List issues in a GitHub repository with filtering options",
        ),
        doc("github", "search_code", "Search for code across GitHub repositories"),
        doc(
            "github",
            "get_file_contents",
            "Get the contents of a file or directory from a GitHub repository",
        ),
        doc(
            "files",
            "read_file",
            "Read the complete contents of a file from the file system",
        ),
        doc(
            "files",
            "write_file",
            "Create a new file or completely overwrite an existing file",
        ),
        doc(
            "files",
            "search_files",
            "Recursively search for files and directories matching a pattern",
        ),
        doc("wiki", "搜索文档", "在知识库中搜索文档和页面"),
        doc("wiki", "ページ作成", "新しいページを作成します"),
    ])
}

fn names(page: &SearchPage<'_>) -> Vec<String> {
    page.hits.iter().map(|h| h.doc.name.clone()).collect()
}

#[test]
fn normalize_and_tokenize_table() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("getTinyImage", "get tiny image", &["get", "tiny", "image"]),
        (
            "get_file-contents.v2",
            "get file contents v2",
            &["get", "file", "contents", "v2"],
        ),
        ("HTTPServer", "http server", &["http", "server"]),
        ("sampleLLM", "sample llm", &["sample", "llm"]),
        ("a/b:c  d", "a b c d", &["a", "b", "c", "d"]),
        ("Café Ünïcode", "café ünïcode", &["café", "ünïcode"]),
        ("搜索文档", "搜索文档", &["搜索", "索文", "文档"]),
        ("文", "文", &["文"]),
        ("mcp搜索tool", "mcp搜索tool", &["mcp", "搜索", "tool"]),
        ("ページ作成", "ページ作成", &["ペー", "ージ", "ジ作", "作成"]),
        ("🚀 launch 🎉", "launch", &["launch"]),
        ("", "", &[]),
        ("___", "", &[]),
        ("e\u{301}cole", "e\u{301}cole", &["e\u{301}cole"]),
    ];
    for (input, norm, tokens) in cases {
        assert_eq!(normalize(input), *norm, "normalize({input:?})");
        assert_eq!(tokenize(&normalize(input)), *tokens, "tokenize({input:?})");
    }
}

#[test]
fn tokenizer_never_panics_on_odd_utf8() {
    let long_cjk = "漢".repeat(500);
    let inputs = [
        "\u{0}\u{7f}\u{80}\u{10FFFF}",
        "👩‍👩‍👧‍👦🏳️‍🌈",
        "a\u{200d}b\u{fe0f}c",
        long_cjk.as_str(),
        "ǅungla İstanbul ß ﬁ",
        "\u{0301}\u{0301}x",
    ];
    for input in inputs {
        let tokens = tokenize(&normalize(input));
        assert!(tokens.iter().all(|t| t.chars().count() <= MAX_TOKEN_CHARS), "{input:?}");
    }
}

#[test]
fn the_worked_example_scores_408() {
    let index = everything();
    let page = index.search(&SearchQuery::new("echo")).unwrap();
    let first = &page.hits[0];
    assert_eq!(first.doc.name, "everything_echo");
    assert_eq!(first.kind, MatchKind::ExactName, "`echo` is the original name");
    assert_eq!(first.score, 408);
}

#[test]
fn a_rare_word_outweighs_a_common_one() {
    let mut docs: Vec<ToolDoc> = (0..8)
        .map(|i| doc("s", &format!("tool{i}"), &format!("Keeps file number {i}")))
        .collect();
    docs.push(doc("s", "aaa_manager", "A file manager"));
    docs.push(doc("s", "zzz_stripes", "Zebra stripes"));
    let index = SearchIndex::build(docs);
    // Each tool matches one of the two words in its description; `zebra` is in one tool, `file` in nine.
    let page = index.search(&SearchQuery::new("file zebra")).unwrap();
    assert_eq!(names(&page)[0], "s_zzz_stripes", "{:?}", names(&page));
    // A one-word query scores as without the weighting: every `file` tool alike, ties by name.
    let page = index.search(&SearchQuery::new("file")).unwrap();
    assert_eq!(names(&page)[0], "s_aaa_manager");
    assert!(page.hits.iter().all(|h| h.score == page.hits[0].score));
}

#[test]
fn ranking_table() {
    let index = everything();
    // (query, expected first results in order)
    let cases: &[(&str, &[&str])] = &[
        ("everything_echo", &["everything_echo"]),
        ("EVERYTHING-ECHO", &["everything_echo"]),
        // All three are name-prefix matches; the description starting with "Get" adds to the third's score.
        (
            "get",
            &[
                "github_get_file_contents",
                "everything_get-sum",
                "everything_getTinyImage",
            ],
        ),
        ("file contents", &["github_get_file_contents", "files_read_file"]),
        ("issue", &["github_create_issue", "github_list_issues"]),
        ("tiny image", &["everything_getTinyImage"]),
        ("llm sampling", &["everything_sampleLLM"]),
        ("repositories", &["github_search_code"]),
        ("搜索", &["wiki_搜索文档"]),
        ("知识库", &["wiki_搜索文档"]),
        ("作成", &["wiki_ページ作成"]),
        ("environment variables", &["everything_printEnv"]),
    ];
    for (query, expected) in cases {
        let page = index.search(&SearchQuery::new(*query)).unwrap();
        let got = names(&page);
        assert!(got.len() >= expected.len(), "{query}: got {got:?}");
        assert_eq!(&got[..expected.len()], *expected, "query {query:?}: {got:?}");
    }
}

#[test]
fn exact_and_prefix_name_matches_rank_first() {
    // A tool whose description mentions "echo" many ways must not beat the one named echo.
    let mut docs = vec![
        doc("a", "echo_all_echoes", "echo echo echo: echo everything, echoes, echo"),
        doc("b", "echo", "x"),
    ];
    docs.push(doc("c", "echoes", "Echo echo echo echo"));
    let index = SearchIndex::build(docs);
    let page = index.search(&SearchQuery::new("echo")).unwrap();
    assert_eq!(names(&page), ["b_echo", "a_echo_all_echoes", "c_echoes"]);
    assert_eq!(page.hits[0].kind, MatchKind::ExactName);
    assert_eq!(page.hits[1].kind, MatchKind::NamePrefix);
}

#[test]
fn half_of_the_words_is_enough_and_full_matches_rank_first() {
    let index = everything();
    // One of two words: a hit, below the tools that match both.
    let page = index.search(&SearchQuery::new("echo zebra")).unwrap();
    assert_eq!(names(&page).first().map(String::as_str), Some("everything_echo"));
    let page = index.search(&SearchQuery::new("zebra giraffe")).unwrap();
    assert_eq!(page.total, 0, "{:?}", names(&page));
    let page = index.search(&SearchQuery::new("read complete file zebra")).unwrap();
    assert_eq!(names(&page).first().map(String::as_str), Some("files_read_file"));
    // One of three is not: then the tools that matched it are weak matches, shown because nothing passed.
    let page = index.search(&SearchQuery::new("echo zebra giraffe")).unwrap();
    assert_eq!(names(&page).first().map(String::as_str), Some("everything_echo"));
    assert!(
        page.hits.iter().all(|h| h.kind == MatchKind::Weak),
        "{:?}",
        names(&page)
    );
    // A weak match never shows next to a strong one.
    let page = index.search(&SearchQuery::new("echo zebra")).unwrap();
    assert!(
        page.hits.iter().all(|h| h.kind != MatchKind::Weak),
        "{:?}",
        names(&page)
    );
}

#[test]
fn words_match_at_word_starts_never_inside_other_words() {
    let index = SearchIndex::build(vec![
        doc("s", "get_submissions", "List the user's submissions"),
        doc("s", "calculate_bmi", "Body mass index from weight and height"),
        doc("s", "open_editor", "Open the editor"),
    ]);
    let page = index.search(&SearchQuery::new("bmi")).unwrap();
    assert_eq!(names(&page), ["s_calculate_bmi"]);
    // The start of a word is a match: `edit` finds the editor.
    let page = index.search(&SearchQuery::new("edit")).unwrap();
    assert_eq!(names(&page), ["s_open_editor"]);
}

#[test]
fn word_forms_synonyms_and_typos_match_below_exact_words() {
    let index = everything();
    // A typo one letter off (a transposition counts once) finds the tool; the exact word would rank it the same.
    let page = index.search(&SearchQuery::new("ehco")).unwrap();
    assert_eq!(names(&page).first().map(String::as_str), Some("everything_echo"));
    // A synonym: `lookup` finds a `search` tool, `show` a `list` tool.
    let page = index.search(&SearchQuery::new("lookup code")).unwrap();
    assert_eq!(names(&page).first().map(String::as_str), Some("github_search_code"));
    let page = index.search(&SearchQuery::new("show issues")).unwrap();
    assert_eq!(names(&page).first().map(String::as_str), Some("github_list_issues"));
    // Singular and plural forms.
    let exact = index.search(&SearchQuery::new("read files")).unwrap();
    let singular = index.search(&SearchQuery::new("read file")).unwrap();
    assert_eq!(names(&exact).first(), names(&singular).first());
    // Exact beats fuzzy: `echo` scores above `ehco`.
    let score = |q: &str| index.search(&SearchQuery::new(q)).unwrap().hits[0].score;
    assert!(score("echo") > score("ehco"));
}

#[test]
fn filler_words_do_not_count() {
    let index = everything();
    let page = index.search(&SearchQuery::new("echo a message")).unwrap();
    assert_eq!(names(&page).first().map(String::as_str), Some("everything_echo"));
    // A query of filler words only still searches them.
    let page = index.search(&SearchQuery::new("the")).unwrap();
    assert!(page.total > 0);
}

#[test]
fn keywords_are_searched() {
    let mut d = doc("s", "frobnicate", "Does a thing");
    d.keywords = vec!["kubernetes".into(), "k8s deploy".into()];
    let index = SearchIndex::build(vec![d, doc("s", "other", "Something else")]);
    assert_eq!(
        names(&index.search(&SearchQuery::new("kubernetes")).unwrap()),
        ["s_frobnicate"]
    );
    assert_eq!(
        names(&index.search(&SearchQuery::new("k8s deploy")).unwrap()),
        ["s_frobnicate"]
    );
}

#[test]
fn server_filter_and_listing() {
    let index = everything();
    let page = index.search(&SearchQuery::new("file").with_server("files")).unwrap();
    assert!(page.hits.iter().all(|h| h.doc.server == "files"));
    assert_eq!(page.total, 3);
    let page = index.search(&SearchQuery::new("  ").with_server("github")).unwrap();
    assert_eq!(page.total, 4);
    assert!(page.hits.iter().all(|h| h.kind == MatchKind::Listed));
    assert_eq!(names(&page)[0], "github_create_issue");
    assert!(matches!(index.search(&SearchQuery::new(" ")), Err(Error::EmptyQuery)));
    assert!(matches!(
        index.search(&SearchQuery::new("!!! ???")),
        Err(Error::NoSearchableWords { .. })
    ));
}

#[test]
fn pagination_table() {
    let index = everything();
    let q = |limit, offset| {
        SearchQuery::new("e")
            .with_server("everything")
            .with_regex(true)
            .with_limit(limit)
            .with_offset(offset)
    };
    let total = index.search(&q(100, 0)).unwrap().total;
    assert_eq!(total, 7);
    // (limit, offset) -> (hits, next_offset, limit used)
    let cases: &[(usize, usize, usize, Option<usize>, usize)] = &[
        (3, 0, 3, Some(3), 3),
        (3, 3, 3, Some(6), 3),
        (3, 6, 1, None, 3),
        (3, 7, 0, None, 3),
        (3, usize::MAX, 0, None, 3),
        (0, 0, 1, Some(1), 1),
        (usize::MAX, 0, 7, None, MAX_LIMIT),
    ];
    let all = names(&index.search(&q(100, 0)).unwrap());
    for &(limit, offset, n, next, used) in cases {
        let page = index.search(&q(limit, offset)).unwrap();
        assert_eq!(
            (page.hits.len(), page.next_offset, page.limit, page.total),
            (n, next, used, total),
            "{limit}/{offset}"
        );
        if n > 0 {
            assert_eq!(names(&page), all[offset..offset + n], "pages are slices of one order");
        }
    }
}

#[test]
fn regex_mode() {
    let index = everything();
    let page = index
        .search(&SearchQuery::new("^github_(create|list)").with_regex(true))
        .unwrap();
    assert_eq!(names(&page), ["github_create_issue", "github_list_issues"]);
    let page = index
        .search(&SearchQuery::new("REPOSITOR(y|ies)").with_regex(true))
        .unwrap();
    assert_eq!(page.total, 4);
    let long = "a".repeat(257);
    assert!(matches!(
        index.search(&SearchQuery::new(long).with_regex(true)),
        Err(Error::QueryTooLong { len: 257, max: 256 })
    ));
    let ok = "é".repeat(256);
    assert!(
        index.search(&SearchQuery::new(ok).with_regex(true)).is_ok(),
        "256 characters (512 bytes) is allowed"
    );
    let err = index
        .search(&SearchQuery::new("(unclosed").with_regex(true))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("regex query `(unclosed` is invalid: "),
        "{err}"
    );
    let err = index
        .search(&SearchQuery::new(r"\w{1000}{1000}").with_regex(true))
        .unwrap_err();
    assert!(err.to_string().contains("exceeds"), "{err}");
}

/// Every match of `pattern` in `text`, as byte ranges.
fn spans(pattern: &Pattern, text: &str) -> Vec<std::ops::Range<usize>> {
    match pattern {
        Pattern::Unicode(r) => r.find_iter(text).map(|m| m.range()).collect(),
        Pattern::Ascii(r) => r.find_iter(text.as_bytes()).map(|m| m.range()).collect(),
    }
}

#[test]
fn ascii_fast_path_matches_what_the_unicode_regex_matches() {
    let texts = [
        "GitHub create_issue",
        "Créer un ticket",
        "pull-request über",
        "日本語のテキスト x",
        "cursor CURSOR",
        "line\nnext_list",
        "naïve café résumé",
        "x_list",
        "a.b and a+b",
        "aéb a中b a😀b a\nb ec\u{1F600}o",
        "].x [a]",
        "",
    ];
    let patterns = [
        "cursor",
        "^github_.*issue",
        "delete|remove",
        "^[a-z]+_list",
        "(a+)+$",
        "caf.*",
        "r.+sum",
        "ti[c-k]ket",
        "a\\.b",
        "a\\+b$",
        "CREATE|ticket",
        // `.` alone: one character of any UTF-8 length, never `\n`.
        "a.b",
        "caf.",
        "ec.o",
        "pull.?request",
        ".",
        "^.{3}$",
        "a.{1,2}b",
        "^(.)$",
        "[.]x",
        "[]a]",
        "[a.]",
        "[[:alpha:]]+_list",
        r"\.x",
    ];
    for p in patterns {
        assert!(ascii_fast_path_is_exact(p), "{p}");
        for multi_line in [true, false] {
            let fast = compiled(p, multi_line, true).unwrap();
            let unicode = compiled(p, multi_line, false).unwrap();
            assert!(matches!(fast, Pattern::Ascii(_)) && matches!(unicode, Pattern::Unicode(_)));
            for t in texts {
                assert_eq!(fast.is_match(t), unicode.is_match(t), "{p:?} on {t:?}");
                assert_eq!(fast.find_at(t, 0), unicode.find_at(t, 0), "{p:?} on {t:?}");
                assert_eq!(spans(&fast, t), spans(&unicode, t), "{p:?} on {t:?}");
            }
        }
    }
    for p in ["\\bcaf", "\\w+", "[^a]", "über", "(?-i)x", "\\x41", "[a[bc]]", "[ab"] {
        assert!(!ascii_fast_path_is_exact(p), "{p}");
    }
    // A catalog holding a character that folds onto an ASCII letter keeps the Unicode regex, which finds it.
    let index = SearchIndex::build(vec![doc("s", "temp", "200 \u{212A} max"), doc("t", "other", "nothing")]);
    assert!(index.fold_traps);
    let page = index.search(&SearchQuery::new("200 k").with_regex(true)).unwrap();
    assert_eq!(names(&page), ["s_temp"]);
    let plain = SearchIndex::build(vec![doc("s", "temp", "200 K max")]);
    assert!(!plain.fold_traps);
    let page = plain.search(&SearchQuery::new("200 k").with_regex(true)).unwrap();
    assert_eq!(names(&page), ["s_temp"]);
}

#[test]
fn regex_prescan_finds_what_a_per_field_scan_finds() {
    let mut docs = vec![
        doc("a", "first_line", "Line one\nline two ends here"),
        doc("b", "x", "ab\ncd"),
        doc("c", "issue", "no newline"),
        doc("d", "empty", ""),
        doc("e", "Ünïcode_名前", "ß and ſ and K"),
    ];
    docs[1].keywords = vec!["kw one".into(), "".into(), "kw\ttwo".into()];
    let index = SearchIndex::build(docs.clone());
    let patterns = [
        "^line",
        "two$",
        "^l",
        "e$",
        "^$",
        "",
        "a*",
        "[^x]+",
        r"\bone\b",
        r"\Bne",
        "b\\ncd",
        r"\s",
        ".",
        "(?s)ab.cd",
        r"\Aline",
        r"two\z",
        "(?-m)^x$",
        "^ß",
        "名前$",
        "kw.two",
        "^kw one$",
        "e\nl",
        r"[\n]",
    ];
    for pattern in patterns {
        let regex = regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .unwrap();
        let want: Vec<&str> = docs
            .iter()
            .filter(|d| {
                [&d.name, &d.original_name, &d.server, &d.description]
                    .into_iter()
                    .chain(&d.keywords)
                    .any(|f| regex.is_match(f))
            })
            .map(|d| d.name.as_str())
            .collect();
        let page = index.search(&SearchQuery::new(pattern).with_regex(true).with_limit(100));
        let mut got: Vec<&str> = match page {
            Ok(page) => page.hits.iter().map(|h| h.doc.name.as_str()).collect(),
            Err(Error::EmptyQuery) => docs.iter().map(|d| d.name.as_str()).collect(),
            Err(e) => panic!("{pattern}: {e}"),
        };
        got.sort_unstable();
        let mut want = want;
        want.sort_unstable();
        if pattern.trim().is_empty() {
            continue; // an empty query is not a regex search
        }
        assert_eq!(got, want, "pattern {pattern:?}");
    }
}

#[test]
fn catastrophic_looking_regex_is_linear() {
    let mut d = doc("evil", "aaaa", &format!("{}!", "a".repeat(50_000)));
    d.keywords = vec!["a".repeat(10_000)];
    let index = SearchIndex::build(vec![d]);
    for pattern in ["(a+)+$", "(a|aa)+$", "(a*)*b", "^(([a-z])+.)+[A-Z]([a-z])+$"] {
        let page = index.search(&SearchQuery::new(pattern).with_regex(true)).unwrap();
        assert!(page.total <= 1, "{pattern}");
    }
}

/// Names, scores and kinds of every hit, for comparing results of two indexes.
fn outcome(index: &SearchIndex, query: &SearchQuery) -> (usize, Vec<(String, u32, MatchKind)>) {
    let page = index.search(query).unwrap();
    let hits = page
        .hits
        .iter()
        .map(|h| (h.doc.name.clone(), h.score, h.kind))
        .collect();
    (page.total, hits)
}

#[test]
fn reused_query_arrays_leave_no_trace_between_queries() {
    let queries: Vec<SearchQuery> = [
        "issue",
        "create issue",
        "file contents",
        "echo",
        "github",
        "get",
        "zzz nothing",
        "sum numbers",
    ]
    .into_iter()
    .map(SearchQuery::new)
    .chain([
        SearchQuery::new("issue").with_server("github"),
        SearchQuery::new("get").with_limit(2),
    ])
    .collect();
    let index = everything();
    // A clone starts with empty arrays: each answer from a fresh index is the reference.
    let want: Vec<_> = queries.iter().map(|q| outcome(&index.clone(), q)).collect();
    assert!(
        want.iter().any(|(total, _)| *total > 1),
        "the queries must find something"
    );
    for round in 0..3 {
        for (i, q) in queries.iter().enumerate().rev() {
            assert_eq!(outcome(&index, q), want[i], "round {round}, {q:?}");
        }
    }
    // Queries racing on one index: one holds the arrays, the others use their own; all answers are right.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..50 {
                    for (i, q) in queries.iter().enumerate() {
                        assert_eq!(outcome(&index, q), want[i], "{q:?}");
                    }
                }
            });
        }
    });
}

#[test]
fn id_lists_hold_each_keys_ids_ascending_and_distinct() {
    let lists = IdLists::from_pairs(vec![('b', 3), ('a', 2), ('b', 1), ('a', 2), ('c', 0)]);
    assert_eq!(lists.get(&'a'), Some(&[2][..]));
    assert_eq!(lists.get(&'b'), Some(&[1, 3][..]));
    assert_eq!(lists.get(&'c'), Some(&[0][..]));
    assert_eq!(lists.get(&'0'), None);
    assert_eq!(lists.get(&'d'), None);
    assert_eq!(IdLists::<char>::default().get(&'a'), None);
    assert_eq!(IdLists::<char>::from_pairs(Vec::new()).get(&'a'), None);
}

#[test]
fn find_precedence_table() {
    let index = SearchIndex::build(vec![
        doc("everything", "get-sum", "s"),
        doc("everything", "echo", "e"),
        doc("other", "echo", "e2"),
        doc("x", "Mixed_Case", "m"),
    ]);
    let found = |name: &str, server: Option<&str>| match index.find(name, server) {
        Lookup::Found(d) => format!("found {}", d.name),
        Lookup::Ambiguous(ds) => format!(
            "ambiguous {}",
            ds.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(",")
        ),
        Lookup::NotFound => "not found".to_string(),
    };
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("everything_get-sum", None, "found everything_get-sum"),
        ("everything_get_sum", None, "found everything_get-sum"),
        ("get_sum", None, "found everything_get-sum"),
        ("echo", None, "ambiguous everything_echo,other_echo"),
        ("echo", Some("other"), "found other_echo"),
        ("other_echo", None, "found other_echo"),
        ("mixed-case", None, "found x_Mixed_Case"),
        ("echo", Some("nope"), "not found"),
        ("nothing", None, "not found"),
    ];
    for (name, server, want) in cases {
        assert_eq!(found(name, *server), *want, "{name} {server:?}");
    }
}

#[test]
fn suggestions_table() {
    let index = everything();
    let cases: &[(&str, &str)] = &[
        ("everything_ecoh", "everything_echo"),
        ("everything_eho", "everything_echo"),
        ("ecoh", "everything_echo"),
        ("github_creat_isue", "github_create_issue"),
        ("github_lsit_issues", "github_list_issues"),
        ("everything_get_summ", "everything_get-sum"),
        ("printenv", "everything_printEnv"),
        ("read_files", "files_read_file"),
        ("github_issues", "github_list_issues"),
    ];
    for (typo, want) in cases {
        let got: Vec<&str> = index.suggest(typo, 5).iter().map(|d| d.name.as_str()).collect();
        assert_eq!(got.first().copied(), Some(*want), "suggest({typo}) = {got:?}");
        assert!(got.len() <= 5);
    }
    assert!(index.suggest("zzzzzzzzzzzz", 5).is_empty());
    assert!(index.suggest("echo", 0).is_empty());
}

#[test]
fn osa_distance_table() {
    let cases: &[(&str, &str, usize, Option<usize>)] = &[
        ("echo", "echo", 1, Some(0)),
        ("ecoh", "echo", 1, Some(1)),
        ("eho", "echo", 1, Some(1)),
        ("abc", "xyz", 2, None),
        ("kitten", "sitting", 3, Some(3)),
        ("", "ab", 2, Some(2)),
        ("abcdef", "ab", 3, None),
        ("漢字", "字漢", 1, Some(1)),
    ];
    let mut scratch = OsaScratch::default();
    for (a, b, max, want) in cases {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        assert_eq!(scratch.distance(&a, &b, *max), *want, "{a:?} {b:?}");
    }
}

#[test]
fn empty_index() {
    let index = SearchIndex::build(Vec::new());
    assert_eq!(index.search(&SearchQuery::new("x")).unwrap().total, 0);
    assert!(index.suggest("x", 5).is_empty());
    assert_eq!(index.find("x", None), Lookup::NotFound);
}

/// The search-quality set (`bench/search-quality`): its queries ranked against the tools it was written for, per
/// kind, at 5 hits. Floors at the figures the ranking reaches (docs/benchmarks.md, "Search quality"): a change that
/// loses queries fails here before a model notices.
#[test]
fn the_search_quality_set_keeps_its_figures() {
    let tools: Value = serde_json::from_str(include_str!("../../../../bench/search-quality/tools.json")).unwrap();
    let set: Value = serde_json::from_str(include_str!("../../../../bench/search-quality/queries.json")).unwrap();
    let index_with = |tags: bool| {
        let docs = tools["tools"].as_array().unwrap().iter().map(|t| {
            let (server, name) = (t["server"].as_str().unwrap(), t["name"].as_str().unwrap());
            let mut d = doc(server, name, t["description"].as_str().unwrap());
            // The runner's exposed names use the server's prefix; `-` stays as the server wrote it.
            if tags && let Some(words) = set["tags"][&d.name].as_array() {
                d.keywords = words.iter().map(|w| w.as_str().unwrap().to_string()).collect();
            }
            d
        });
        SearchIndex::build(docs.collect())
    };
    // (kind, answered, top-1, top-5) floors for the plain configuration.
    let floors = [
        ("name", 1.0, 1.0, 1.0),
        ("description", 1.0, 1.0, 1.0),
        ("typo", 1.0, 0.8, 0.9),
        ("request", 1.0, 0.4, 0.6),
        ("step", 1.0, 0.7, 0.9),
    ];
    for tags in [false, true] {
        let index = index_with(tags);
        let mut by_kind: std::collections::BTreeMap<&str, (usize, usize, usize, usize)> = Default::default();
        for q in set["queries"].as_array().unwrap() {
            let gold: Vec<&str> = q["gold"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g.as_str().unwrap())
                .collect();
            let mut query = SearchQuery::new(q["query"].as_str().unwrap());
            query.limit = 5;
            let page = index.search(&query).unwrap();
            let hits = names(&page);
            let rank = hits.iter().position(|h| gold.contains(&h.as_str()));
            let slot = by_kind.entry(q["kind"].as_str().unwrap()).or_default();
            slot.0 += 1;
            slot.1 += usize::from(!hits.is_empty());
            slot.2 += usize::from(rank == Some(0));
            slot.3 += usize::from(rank.is_some());
        }
        let rate = |kind: &str, f: fn(&(usize, usize, usize, usize)) -> usize| {
            let s = &by_kind[kind];
            f(s) as f64 / s.0 as f64
        };
        for (kind, answered, top1, top5) in floors {
            assert!(
                rate(kind, |s| s.1) >= answered,
                "{kind} answered (tags: {tags}): {by_kind:?}"
            );
            assert!(rate(kind, |s| s.2) >= top1, "{kind} top-1 (tags: {tags}): {by_kind:?}");
            assert!(rate(kind, |s| s.3) >= top5, "{kind} top-5 (tags: {tags}): {by_kind:?}");
        }
        if tags {
            // 11 of 12: `logo picture` puts `fixture_read_logo_png` (`logo` in its name) before the tool tagged
            // `logo` and `picture`.
            assert!(rate("tag", |s| s.2) >= 0.9, "tags as keywords: {by_kind:?}");
        }
    }
}
