//! Ranked lexical search: token matches (exact, stem, substring), per-field tallies, the name tiers, the gate and
//! the bonuses, with the per-document arrays a query reuses.

use std::collections::HashMap;
use std::sync::Mutex;

use super::suggest::OsaScratch;
use super::tokens::{name_key, normalize, tokenize};
use super::{
    CharsOf, FIELD_DESCRIPTION, FIELD_KEYWORDS, FIELD_NAME, FIELD_ORIGINAL, FIELD_SERVER, LEVEL_EXACT, LEVEL_STEM,
    LEVEL_SUBSTRING, MAX_QUERY_TOKENS, MIN_STEM_CHARS, MatchKind, N_FIELDS, Prepared, STOPWORDS, SYNONYMS, Scored,
    SearchIndex, WEIGHTS, to_u32,
};

impl SearchIndex {
    /// Token ranking; `None` when the text has no tokens. `lenient` (suggestions) skips the name tiers.
    pub(super) fn ranked(&self, text: &str, server: Option<&str>, lenient: bool) -> Option<Vec<Scored>> {
        let q = normalize(text);
        let mut tokens: Vec<String> = Vec::new();
        for t in tokenize(&q) {
            if !tokens.contains(&t) {
                tokens.push(t);
            }
        }
        // Filler words of a request ("echo a message", "read the file") do not count, unless they are all it has.
        if tokens.iter().any(|t| !STOPWORDS.contains(&t.as_str())) {
            tokens.retain(|t| !STOPWORDS.contains(&t.as_str()));
        }
        tokens.truncate(MAX_QUERY_TOKENS);
        if tokens.is_empty() {
            return None;
        }
        // A concurrent query (the slot is taken) gets arrays of its own; a poisoned slot is never reused.
        let mut held = self.scratch.0.try_lock().ok();
        let mut own = Scratch::default();
        let scratch = held.as_deref_mut().unwrap_or(&mut own);
        scratch.fit(self.docs.len());
        let Scratch { accs, levels } = scratch;
        let mut candidates: Vec<u32> = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        let mut matches: Vec<(u32, u8)> = Vec::new();
        // Each token's matched tools and their levels, kept until every token's document frequency is known.
        let mut per_token: Vec<Vec<(u32, [u8; N_FIELDS])>> = Vec::with_capacity(tokens.len());
        let mut literal: Vec<bool> = Vec::with_capacity(tokens.len());
        for token in &tokens {
            matches.clear();
            self.token_matches(token, &mut matches);
            literal.push(matches.iter().any(|&(_, level)| level == LEVEL_EXACT));
            for &(token_id, level) in &matches {
                let (start, end) = (
                    self.posting_starts[token_id as usize],
                    self.posting_starts[token_id as usize + 1],
                );
                for p in &self.postings[start as usize..end as usize] {
                    let lv = &mut levels[p.doc as usize];
                    if *lv == [0; N_FIELDS] {
                        touched.push(p.doc);
                    }
                    for (f, slot) in lv.iter_mut().enumerate() {
                        if p.fields & (1 << f) != 0 && *slot < level {
                            *slot = level;
                        }
                    }
                }
            }
            per_token.push(
                touched
                    .drain(..)
                    .map(|doc| (doc, std::mem::take(&mut levels[doc as usize])))
                    .collect(),
            );
        }
        let shares = idf_shares(&per_token, &literal, self.docs.len());
        for (ti, (matched, share)) in per_token.iter().zip(shares).enumerate() {
            for &(doc, lv) in matched {
                let acc = &mut accs[doc as usize];
                if !acc.touched {
                    acc.touched = true;
                    candidates.push(doc);
                }
                for (f, &level) in lv.iter().enumerate() {
                    if level > 0 {
                        acc.score += (WEIGHTS[f] * u32::from(level) * share + IDF_SCALE / 2) / IDF_SCALE;
                        acc.field_tokens[f] |= 1 << ti;
                    }
                }
                acc.matched |= 1 << ti;
                if ti == 0 && lv[FIELD_NAME] == LEVEL_EXACT {
                    acc.first_in_name = true;
                }
            }
        }

        // Name tiers: exact and prefix matches of the prefixed or original name.
        let key: Vec<char> = name_key(text).chars().collect();
        let mut tiers: HashMap<u32, u8> = HashMap::new();
        if !lenient && !key.is_empty() {
            let sorted: [(&[u32], CharsOf); 2] = [
                (&self.by_name_key, Prepared::name_chars),
                (&self.by_original_key, Prepared::original_chars),
            ];
            for (ids, chars_of) in sorted {
                let chars_of = |id: u32| chars_of(&self.prepared[id as usize]);
                let start = ids.partition_point(|&id| chars_of(id) < key.as_slice());
                for &doc in ids[start..].iter().take_while(|&&id| chars_of(id).starts_with(&key)) {
                    let tier = if chars_of(doc) == key.as_slice() { 0 } else { 1 };
                    let slot = tiers.entry(doc).or_insert(tier);
                    *slot = (*slot).min(tier);
                    let acc = &mut accs[doc as usize];
                    if !acc.touched {
                        acc.touched = true;
                        candidates.push(doc);
                    }
                }
            }
        }

        let n = tokens.len();
        let all: u16 = if n >= 16 { u16::MAX } else { (1u16 << n) - 1 };
        let mut out = Vec::new();
        let mut weak = Vec::new();
        for &doc in &candidates {
            let d = doc as usize;
            if server.is_some_and(|s| self.docs[d].server != s) {
                continue;
            }
            let acc = &accs[d];
            let prep = &self.prepared[d];
            let mut score = acc.score;
            let mut phrase = false;
            let mut whole_field = false;
            for f in [FIELD_NAME, FIELD_ORIGINAL, FIELD_SERVER, FIELD_DESCRIPTION] {
                if acc.field_tokens[f] == all {
                    let p = phrase_points(&prep.norm[f], &q);
                    if p > 0 {
                        phrase = true;
                        whole_field |= p == 14;
                        score += p * WEIGHTS[f];
                    }
                }
            }
            if acc.field_tokens[FIELD_KEYWORDS] == all {
                let p = prep.keywords.iter().map(|k| phrase_points(k, &q)).max().unwrap_or(0);
                if p > 0 {
                    phrase = true;
                    whole_field |= p == 14;
                    score += p * WEIGHTS[FIELD_KEYWORDS];
                }
            }
            let covered = acc.matched.count_ones() as usize;
            let tier = tiers.get(&doc).copied();
            let passes = phrase || if n == 1 { covered == 1 } else { covered * 2 >= n };
            let strong = passes || tier.is_some();
            score += if covered == n {
                25
            } else {
                to_u32((covered * 10 + n / 2) / n)
            };
            if acc.first_in_name {
                score += 8;
            }
            if whole_field {
                score += 20;
            }
            let (tier, kind) = match tier {
                Some(0) => (0, MatchKind::ExactName),
                Some(_) => (1, MatchKind::NamePrefix),
                None if strong => (2, MatchKind::Ranked),
                None => (2, MatchKind::Weak),
            };
            let scored = Scored {
                tier,
                score,
                rank: prep.rank,
                doc,
                kind,
            };
            if strong {
                out.push(scored);
            } else {
                weak.push(scored);
            }
        }
        for doc in candidates {
            accs[doc as usize] = Acc::default();
        }
        // Nothing passed the gate: the tools that matched some of the words, marked weak.
        Some(if out.is_empty() { weak } else { out })
    }

    /// Tokens of the vocabulary matching `token`, with their level.
    fn token_matches(&self, token: &str, out: &mut Vec<(u32, u8)>) {
        let start = self.vocab.partition_point(|v| &**v < token);
        // A single ASCII letter or digit would stem-match a large part of the vocabulary: exact only.
        let expand = token.len() > 1;
        for (offset, v) in self.vocab[start..].iter().enumerate() {
            let exact = v.len() == token.len();
            if !v.starts_with(token) || !(exact || expand) {
                break;
            }
            out.push((to_u32(start + offset), if exact { LEVEL_EXACT } else { LEVEL_STEM }));
        }
        // The query token starts with a field token of at least MIN_STEM_CHARS characters.
        let bounds: Vec<usize> = token.char_indices().map(|(i, _)| i).skip(MIN_STEM_CHARS).collect();
        for end in bounds {
            if let Ok(id) = self.vocab.binary_search_by(|v| (**v).cmp(&token[..end])) {
                out.push((to_u32(id), LEVEL_STEM));
            }
        }
        // Substrings of field tokens: only for words of scripts without spaces, whose tokens are character pairs; a
        // word of a spaced script matches whole words and their beginnings, never the inside of another word
        // (`bmi` is not in `submissions`).
        let chars: Vec<char> = token.chars().collect();
        let inside_words = chars.iter().any(|&c| !c.is_ascii());
        let pool: Option<&[u32]> = if !inside_words {
            None
        } else if chars.len() >= 3 {
            chars
                .windows(3)
                .map(|w| self.trigrams.get(&[w[0], w[1], w[2]]))
                .try_fold(None::<&[u32]>, |best, list| {
                    let list = list?;
                    Some(Some(match best {
                        Some(b) if b.len() <= list.len() => b,
                        _ => list,
                    }))
                })
                .flatten()
        } else {
            chars
                .iter()
                .find(|c| !c.is_ascii())
                .and_then(|c| self.wide_chars.get(c))
        };
        for &id in pool.into_iter().flatten() {
            let v = &self.vocab[id as usize];
            if !v.starts_with(token) && v.contains(token) {
                out.push((id, LEVEL_SUBSTRING));
            }
        }
        let direct = out.iter().any(|&(_, level)| level >= LEVEL_STEM);
        // Other forms of the word and its synonyms, at the stem level.
        for form in word_forms(token) {
            // The form itself, or (from 4 characters) a token it starts: `relation` → `relations`.
            let start = self.vocab.partition_point(|v| **v < *form);
            for (offset, v) in self.vocab[start..].iter().enumerate() {
                let exact = v.len() == form.len();
                if !v.starts_with(form.as_str()) || !(exact || form.len() >= MIN_STEM_CHARS) {
                    break;
                }
                out.push((to_u32(start + offset), LEVEL_STEM));
            }
        }
        // A typo: only when the vocabulary has nothing the token equals or starts.
        if !direct && chars.len() >= MIN_STEM_CHARS {
            self.typo_matches(&chars, out);
        }
    }

    /// Vocabulary tokens one typo from `chars` (two from 8 characters on) that share its first letter.
    fn typo_matches(&self, chars: &[char], out: &mut Vec<(u32, u8)>) {
        let budget = if chars.len() >= 8 { 2 } else { 1 };
        let mut first = [0u8; 4];
        let first: &str = chars[0].encode_utf8(&mut first);
        let start = self.vocab.partition_point(|v| &**v < first);
        let mut osa = OsaScratch::default();
        let mut v_chars: Vec<char> = Vec::new();
        for (offset, v) in self.vocab[start..].iter().enumerate() {
            if !v.starts_with(first) {
                break;
            }
            let len = v.chars().count();
            if len.abs_diff(chars.len()) > budget || len < MIN_STEM_CHARS {
                continue;
            }
            v_chars.clear();
            v_chars.extend(v.chars());
            if osa.distance(chars, &v_chars, budget).is_some_and(|d| d > 0) {
                out.push((to_u32(start + offset), LEVEL_STEM));
            }
        }
    }
}

/// Fixed-point scale of a token's [`idf_shares`]: a share of `IDF_SCALE` leaves its points as they are.
const IDF_SCALE: u32 = 100;

/// Each query token's share of the points, by how rare it is among the tools (BM25's inverse document frequency,
/// `ln(1 + (N - df + 0.5) / (df + 0.5))`), relative to the query's mean so that the shares average `IDF_SCALE`: in
/// "read the pdf file", `pdf` (few tools) outweighs `file` (many), while a one-word query scores as it always did.
/// Shares are kept within a quarter and four times the mean. A token that no tool has as a word (`literal` false: it
/// matched only through another form, a synonym or a typo) weighs no more than the mean: its rarity says little
/// (`change` in "news about climate change" reaches `edit_file` only as a synonym of `edit`).
fn idf_shares(per_token: &[Vec<(u32, [u8; N_FIELDS])>], literal: &[bool], n_docs: usize) -> Vec<u32> {
    let n = n_docs as f64;
    let idf: Vec<f64> = per_token
        .iter()
        .map(|docs| {
            let df = docs.len() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .collect();
    let matched: Vec<f64> = per_token
        .iter()
        .zip(&idf)
        .filter(|(docs, _)| !docs.is_empty())
        .map(|(_, &w)| w)
        .collect();
    let mean = matched.iter().sum::<f64>() / matched.len().max(1) as f64;
    idf.iter()
        .zip(literal)
        .map(|(&w, &literal)| {
            if mean <= 0.0 {
                return IDF_SCALE;
            }
            let most = if literal { 4.0 } else { 1.0 };
            let share = (w / mean).clamp(0.25, most) * f64::from(IDF_SCALE);
            share.round() as u32
        })
        .collect()
}

/// The other forms of a query word that count as the word: singular and plural (`entity`/`entities`,
/// `file`/`files`, `box`/`boxes`) and the words of its synonym groups ([`SYNONYMS`]).
fn word_forms(token: &str) -> Vec<String> {
    let mut forms: Vec<String> = Vec::new();
    let mut push = |form: String| {
        if form != token && !forms.contains(&form) {
            forms.push(form);
        }
    };
    if token.is_ascii() && token.len() >= 3 {
        if let Some(stem) = token.strip_suffix("ies") {
            push(format!("{stem}y"));
        } else if let Some(stem) = token.strip_suffix('y') {
            push(format!("{stem}ies"));
        }
        if let Some(stem) = token
            .strip_suffix("es")
            .filter(|s| s.ends_with(['s', 'x', 'z']) || s.ends_with("ch") || s.ends_with("sh"))
        {
            push(stem.to_string());
        }
        if let Some(stem) = token.strip_suffix('s').filter(|s| !s.ends_with('s') && s.len() >= 3) {
            push(stem.to_string());
        } else {
            push(format!("{token}s"));
            push(format!("{token}es"));
        }
    }
    for group in SYNONYMS {
        if group.contains(&token) {
            for word in group.iter() {
                push((*word).to_string());
            }
        }
    }
    forms
}

/// A ranked query's per-document arrays. Between queries every slot is back at its default: `levels` are taken as
/// each token's matches are tallied, `accs` reset for the query's candidates at its end. Reusing them saves a query
/// allocating and clearing them (25 bytes a document: at 20,000 tools, most of a query's memory writes).
#[derive(Debug, Default)]
struct Scratch {
    accs: Vec<Acc>,
    levels: Vec<[u8; N_FIELDS]>,
}

impl Scratch {
    fn fit(&mut self, n_docs: usize) {
        self.accs.resize(n_docs, Acc::default());
        self.levels.resize(n_docs, [0; N_FIELDS]);
    }
}

/// The index's [`Scratch`], behind a lock so queries from several threads stay correct; a clone of the index
/// starts with its own empty scratch.
#[derive(Debug, Default)]
pub(super) struct ScratchSlot(Mutex<Scratch>);

impl Clone for ScratchSlot {
    fn clone(&self) -> ScratchSlot {
        ScratchSlot::default()
    }
}

#[derive(Debug, Clone, Default)]
struct Acc {
    touched: bool,
    score: u32,
    /// Bit `i` set when query token `i` matched any field.
    matched: u16,
    /// Per field, the query tokens that matched it.
    field_tokens: [u16; N_FIELDS],
    first_in_name: bool,
}

fn phrase_points(value: &str, q: &str) -> u32 {
    if value == q {
        14
    } else if value.starts_with(q) {
        9
    } else if value.contains(q) {
        6
    } else {
        0
    }
}
