//! Building the index (`SearchIndex::build`): per-document data, postings, the sorted name orders, the regex
//! haystack, and the flat id lists of token trigrams and wide characters.

use std::cmp::Reverse;
use std::collections::HashMap;

use super::regex_search::ASCII_FOLD_TRAPS;
use super::suggest::Fingerprint;
use super::tokens::{name_key, normalize, tokenize};
use super::{FIELD_KEYWORDS, Posting, Prepared, SearchIndex, ToolDoc, to_u32};

impl SearchIndex {
    /// Builds the index. Cost is linear in the catalog's text; do it once per catalog change.
    pub fn build(docs: Vec<ToolDoc>) -> SearchIndex {
        let mut order: Vec<usize> = (0..docs.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (&docs[a], &docs[b]);
            x.name
                .to_lowercase()
                .cmp(&y.name.to_lowercase())
                .then_with(|| x.name.cmp(&y.name))
                .then(x.server.cmp(&y.server))
        });
        let mut ranks = vec![0u32; docs.len()];
        for (rank, &doc) in order.iter().enumerate() {
            ranks[doc] = to_u32(rank);
        }

        let mut token_docs: HashMap<String, Vec<Posting>> = HashMap::new();
        let mut prepared = Vec::with_capacity(docs.len());
        let mut index = SearchIndex::default();
        for (doc_idx, doc) in docs.iter().enumerate() {
            let doc_id = to_u32(doc_idx);
            let norm = [
                normalize(&doc.name),
                normalize(&doc.original_name),
                normalize(&doc.server),
                normalize(&doc.description),
            ];
            let keywords: Vec<String> = doc
                .keywords
                .iter()
                .map(|k| normalize(k))
                .filter(|k| !k.is_empty())
                .collect();
            for (field, text) in norm.iter().enumerate() {
                for token in tokenize(text) {
                    add_posting(&mut token_docs, token, doc_id, field);
                }
            }
            for keyword in &keywords {
                for token in tokenize(keyword) {
                    add_posting(&mut token_docs, token, doc_id, FIELD_KEYWORDS);
                }
            }
            let name_chars: Vec<char> = name_key(&doc.name).chars().collect();
            let original_chars: Vec<char> = name_key(&doc.original_name).chars().collect();
            index.doc_starts.push(index.haystack.len());
            for field in [&doc.name, &doc.original_name, &doc.server, &doc.description]
                .into_iter()
                .chain(&doc.keywords)
            {
                index.fold_traps |= field.contains(ASCII_FOLD_TRAPS);
                index.haystack.push_str(field);
                index.haystack.push('\n');
            }
            let server_key = self::name_key(&doc.server);
            if !server_key.is_empty() && !index.server_keys.contains(&server_key) {
                index.server_keys.push(server_key);
            }
            prepared.push(Prepared {
                norm,
                keywords,
                name_print: Fingerprint::of(&name_chars),
                original_print: Fingerprint::of(&original_chars),
                name_chars,
                original_chars,
                rank: ranks[doc_idx],
            });
        }
        index.server_keys.sort_by_key(|k| Reverse(k.len()));
        let ids: Vec<u32> = (0..to_u32(docs.len())).collect();
        // Stable sorts of ascending ids: ties stay in id order.
        index.by_name = ids.clone();
        index
            .by_name
            .sort_by(|&a, &b| docs[a as usize].name.cmp(&docs[b as usize].name));
        index.by_original = ids.clone();
        index
            .by_original
            .sort_by(|&a, &b| docs[a as usize].original_name.cmp(&docs[b as usize].original_name));
        index.by_name_key = ids.clone();
        index
            .by_name_key
            .sort_by(|&a, &b| prepared[a as usize].name_chars.cmp(&prepared[b as usize].name_chars));
        index.by_original_key = ids;
        index.by_original_key.sort_by(|&a, &b| {
            prepared[a as usize]
                .original_chars
                .cmp(&prepared[b as usize].original_chars)
        });

        let mut vocab: Vec<(String, Vec<Posting>)> = token_docs.into_iter().collect();
        vocab.sort_by(|a, b| a.0.cmp(&b.0));
        let mut gram_pairs: Vec<([char; 3], u32)> = Vec::new();
        let mut wide_pairs: Vec<(char, u32)> = Vec::new();
        index.vocab.reserve_exact(vocab.len());
        index.posting_starts.reserve_exact(vocab.len() + 1);
        index.postings.reserve_exact(vocab.iter().map(|(_, p)| p.len()).sum());
        for (token_id, (token, postings)) in vocab.into_iter().enumerate() {
            let token_id = to_u32(token_id);
            let chars: Vec<char> = token.chars().collect();
            gram_pairs.extend(chars.windows(3).map(|w| ([w[0], w[1], w[2]], token_id)));
            wide_pairs.extend(chars.iter().filter(|c| !c.is_ascii()).map(|&c| (c, token_id)));
            index.vocab.push(token.into_boxed_str());
            index.posting_starts.push(to_u32(index.postings.len()));
            index.postings.extend(postings);
        }
        index.posting_starts.push(to_u32(index.postings.len()));
        index.trigrams = IdLists::from_pairs(gram_pairs);
        index.wide_chars = IdLists::from_pairs(wide_pairs);
        index.docs = docs;
        index.prepared = prepared;
        index
    }
}

/// Id lists keyed by `K` in three flat arrays (sorted keys, offsets, ids) instead of a map of vectors: three
/// allocations whatever the catalog's size, 4 bytes per id, binary search to find a key.
#[derive(Debug, Clone)]
pub(super) struct IdLists<K> {
    keys: Vec<K>,
    /// Key `i`'s ids are `ids[starts[i]..starts[i + 1]]`.
    starts: Vec<u32>,
    ids: Vec<u32>,
}

impl<K> Default for IdLists<K> {
    fn default() -> Self {
        IdLists {
            keys: Vec::new(),
            starts: vec![0],
            ids: Vec::new(),
        }
    }
}

impl<K: Ord + Copy> IdLists<K> {
    /// From `(key, id)` pairs in any order; a key's ids come out ascending and distinct.
    pub(super) fn from_pairs(mut pairs: Vec<(K, u32)>) -> Self {
        pairs.sort_unstable();
        pairs.dedup();
        let mut lists = IdLists {
            keys: Vec::new(),
            starts: Vec::new(),
            ids: Vec::with_capacity(pairs.len()),
        };
        for (key, id) in pairs {
            if lists.keys.last() != Some(&key) {
                lists.keys.push(key);
                lists.starts.push(to_u32(lists.ids.len()));
            }
            lists.ids.push(id);
        }
        lists.starts.push(to_u32(lists.ids.len()));
        lists.keys.shrink_to_fit();
        lists.starts.shrink_to_fit();
        lists
    }

    pub(super) fn get(&self, key: &K) -> Option<&[u32]> {
        let i = self.keys.binary_search(key).ok()?;
        Some(&self.ids[self.starts[i] as usize..self.starts[i + 1] as usize])
    }
}

fn add_posting(map: &mut HashMap<String, Vec<Posting>>, token: String, doc: u32, field: usize) {
    let list = map.entry(token).or_default();
    match list.last_mut() {
        Some(last) if last.doc == doc => last.fields |= 1 << field,
        _ => list.push(Posting {
            doc,
            fields: 1 << field,
        }),
    }
}
