//! A byte trie for prefix search over a vocabulary, shared by WordPiece (longest match) and
//! Unigram (every vocabulary piece that starts at a position).
//!
//! Layout: every node is three `u32`s (value, first child edge, child count); the edges of a
//! node are contiguous and sorted by label, so a transition is a short linear scan or a binary
//! search. The root and every node with many edges (e.g. the one after `▁` in a SentencePiece
//! vocabulary) also get a dense 256-entry table, so wide branching costs one load.
//! Searching allocates nothing.

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// The value stored at this node (a key ends here), or `NONE`.
    value: u32,
    /// Index of the node's first edge in `labels` / `targets`.
    first: u32,
    /// Number of edges.
    len: u32,
    /// For a node with many edges, the index of its dense 256-entry table in `dense`
    /// (`NONE` otherwise): one load instead of a search where branching is wide.
    dense: u32,
}

/// Nodes with more edges than this get a dense transition table.
const DENSE_MIN_EDGES: usize = 24;

/// An immutable byte trie mapping keys to `u32` values (one pointer wide: the tables are boxed).
#[derive(Clone, Debug)]
pub struct Trie {
    t: Box<Tables>,
}

#[derive(Clone, Debug)]
struct Tables {
    root: [u32; 256],
    dense: Vec<[u32; 256]>,
    /// The root is node 0 (its value is the empty key's, which searches never report).
    nodes: Vec<Node>,
    labels: Vec<u8>,
    targets: Vec<u32>,
}

/// Collects keys, then builds a [`Trie`]. Inserting a key twice keeps the last value.
#[derive(Default)]
pub struct TrieBuilder {
    /// A pointer-based tree used only while building: (value, children sorted by label).
    nodes: Vec<(u32, Vec<(u8, u32)>)>,
}

impl TrieBuilder {
    pub fn new() -> Self {
        TrieBuilder {
            nodes: vec![(NONE, Vec::new())],
        }
    }

    pub fn insert(&mut self, key: &[u8], value: u32) {
        if self.nodes.is_empty() {
            self.nodes.push((NONE, Vec::new()));
        }
        let mut node = 0usize;
        for &b in key {
            let next = match self.nodes[node].1.binary_search_by_key(&b, |e| e.0) {
                Ok(i) => self.nodes[node].1[i].1 as usize,
                Err(i) => {
                    let new = self.nodes.len();
                    self.nodes.push((NONE, Vec::new()));
                    self.nodes[node].1.insert(i, (b, new as u32));
                    new
                }
            };
            node = next;
        }
        self.nodes[node].0 = value;
    }

    pub fn build(mut self) -> Trie {
        if self.nodes.is_empty() {
            self.nodes.push((NONE, Vec::new()));
        }
        // Node ids are kept as they are; only the edges are flattened, in node order.
        let mut nodes = Vec::with_capacity(self.nodes.len());
        let mut labels = Vec::with_capacity(self.nodes.len());
        let mut targets = Vec::with_capacity(self.nodes.len());
        let mut root = [NONE; 256];
        let mut dense = Vec::new();
        for (i, (value, children)) in self.nodes.iter().enumerate() {
            let mut table = None;
            if i > 0 && children.len() > DENSE_MIN_EDGES {
                table = Some(dense.len() as u32);
                dense.push([NONE; 256]);
            }
            nodes.push(Node {
                value: *value,
                first: labels.len() as u32,
                len: children.len() as u32,
                dense: table.unwrap_or(NONE),
            });
            for &(label, target) in children {
                labels.push(label);
                targets.push(target);
                if i == 0 {
                    root[label as usize] = target;
                }
                if let Some(t) = dense.last_mut().filter(|_| table.is_some()) {
                    t[label as usize] = target;
                }
            }
        }
        Trie {
            t: Box::new(Tables {
                root,
                dense,
                nodes,
                labels,
                targets,
            }),
        }
    }
}

impl Default for Trie {
    fn default() -> Self {
        TrieBuilder::new().build()
    }
}

impl Trie {
    /// Build from (key, value) pairs; a repeated key keeps its last value.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a [u8], u32)>) -> Trie {
        let mut b = TrieBuilder::new();
        for (k, v) in pairs {
            b.insert(k, v);
        }
        b.build()
    }

    #[inline]
    fn child(&self, node: u32, label: u8) -> u32 {
        if node == 0 {
            return self.t.root[label as usize];
        }
        let Some(n) = self.t.nodes.get(node as usize) else {
            return NONE;
        };
        if n.dense != NONE {
            return self
                .t
                .dense
                .get(n.dense as usize)
                .map_or(NONE, |t| t[label as usize]);
        }
        let (first, len) = (n.first as usize, n.len as usize);
        let (Some(labels), Some(targets)) = (
            self.t.labels.get(first..first + len),
            self.t.targets.get(first..first + len),
        ) else {
            return NONE;
        };
        if len <= 8 {
            for (i, &l) in labels.iter().enumerate() {
                if l == label {
                    return targets[i];
                }
            }
            NONE
        } else {
            match labels.binary_search(&label) {
                Ok(i) => targets[i],
                Err(_) => NONE,
            }
        }
    }

    #[inline]
    fn value(&self, node: u32) -> u32 {
        self.t.nodes.get(node as usize).map_or(NONE, |n| n.value)
    }

    /// The value of `key`, if it was inserted.
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let mut node = 0u32;
        for &b in key {
            node = self.child(node, b);
            if node == NONE {
                return None;
            }
        }
        let v = self.value(node);
        (v != NONE).then_some(v)
    }

    /// Every non-empty key that is a prefix of `text`, shortest first, as (byte length, value).
    pub fn common_prefixes<'a>(&'a self, text: &'a [u8]) -> CommonPrefixes<'a> {
        CommonPrefixes {
            trie: self,
            text,
            pos: 0,
            node: 0,
        }
    }

    /// The longest non-empty key that is a prefix of `text`, as (byte length, value).
    #[inline]
    pub fn longest_prefix(&self, text: &[u8]) -> Option<(usize, u32)> {
        let mut node = 0u32;
        let mut best = None;
        for (i, &b) in text.iter().enumerate() {
            node = self.child(node, b);
            if node == NONE {
                break;
            }
            let v = self.value(node);
            if v != NONE {
                best = Some((i + 1, v));
            }
        }
        best
    }
}

/// Iterator of [`Trie::common_prefixes`].
pub struct CommonPrefixes<'a> {
    trie: &'a Trie,
    text: &'a [u8],
    pos: usize,
    node: u32,
}

impl Iterator for CommonPrefixes<'_> {
    type Item = (usize, u32);

    #[inline]
    fn next(&mut self) -> Option<(usize, u32)> {
        while self.node != NONE {
            let &b = self.text.get(self.pos)?;
            self.node = self.trie.child(self.node, b);
            if self.node == NONE {
                return None;
            }
            self.pos += 1;
            let v = self.trie.value(self.node);
            if v != NONE {
                return Some((self.pos, v));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trie(keys: &[(&str, u32)]) -> Trie {
        Trie::from_pairs(keys.iter().map(|(k, v)| (k.as_bytes(), *v)))
    }

    #[test]
    fn prefixes_shortest_first() {
        let t = trie(&[("a", 1), ("abc", 3), ("ab", 2), ("b", 4), ("abd", 5)]);
        let got: Vec<_> = t.common_prefixes(b"abcd").collect();
        assert_eq!(got, vec![(1, 1), (2, 2), (3, 3)]);
        assert_eq!(t.longest_prefix(b"abde"), Some((3, 5)));
        assert_eq!(t.longest_prefix(b"x"), None);
        assert_eq!(t.longest_prefix(b""), None);
        assert_eq!(t.common_prefixes(b"").count(), 0);
    }

    #[test]
    fn empty_key_is_never_reported() {
        let t = trie(&[("", 9), ("a", 1)]);
        assert_eq!(t.get(b""), Some(9));
        assert_eq!(t.common_prefixes(b"a").collect::<Vec<_>>(), vec![(1, 1)]);
        assert_eq!(t.longest_prefix(b"b"), None);
    }

    #[test]
    fn repeated_key_keeps_last_value() {
        let t = trie(&[("ab", 1), ("ab", 7)]);
        assert_eq!(t.get(b"ab"), Some(7));
        assert_eq!(t.get(b"a"), None);
    }

    #[test]
    fn every_edge_layout_finds_its_keys() {
        // 5 edges: linear scan; 16: binary search; 200: dense table (below a non-root node).
        for n in [5u8, 16, 200] {
            let keys: Vec<Vec<u8>> = (0..n).map(|c| vec![b'x', c.wrapping_mul(7)]).collect();
            let t = Trie::from_pairs(keys.iter().enumerate().map(|(i, k)| (&k[..], i as u32)));
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(t.get(k), Some(i as u32), "n={n}");
            }
            let absent = (0..=255u8)
                .find(|b| !keys.iter().any(|k| k[1] == *b))
                .unwrap();
            assert_eq!(t.get(&[b'x', absent]), None, "n={n}");
            assert_eq!(t.get(b"x"), None);
        }
    }

    #[test]
    fn multibyte_keys() {
        let t = trie(&[("é", 1), ("éa", 2), ("𝔸", 3)]);
        assert_eq!(t.longest_prefix("éab".as_bytes()), Some((3, 2)));
        assert_eq!(t.longest_prefix("𝔸".as_bytes()), Some((4, 3)));
        // A prefix of a multi-byte character's encoding is not a key.
        assert_eq!(t.longest_prefix(&"𝔸".as_bytes()[..2]), None);
    }
}
