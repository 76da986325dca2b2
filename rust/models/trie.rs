//! A byte trie for prefix search over a vocabulary, shared by WordPiece (longest match) and
//! Unigram (every vocabulary piece that starts at a position).
//!
//! Layout: every node is three `u32`s (value, first child edge, child count); the edges of a
//! node are contiguous and sorted by label, so a transition is a short linear scan or a binary
//! search. The root's edges are a dense 256-entry table because every search starts there.
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
}

/// An immutable byte trie mapping keys to `u32` values.
#[derive(Clone, Debug)]
pub struct Trie {
    root: Box<[u32; 256]>,
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
        let mut root = Box::new([NONE; 256]);
        for (i, (value, children)) in self.nodes.iter().enumerate() {
            nodes.push(Node {
                value: *value,
                first: labels.len() as u32,
                len: children.len() as u32,
            });
            for &(label, target) in children {
                labels.push(label);
                targets.push(target);
                if i == 0 {
                    root[label as usize] = target;
                }
            }
        }
        Trie {
            root,
            nodes,
            labels,
            targets,
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
            return self.root[label as usize];
        }
        let Some(n) = self.nodes.get(node as usize) else {
            return NONE;
        };
        let (first, len) = (n.first as usize, n.len as usize);
        let (Some(labels), Some(targets)) = (
            self.labels.get(first..first + len),
            self.targets.get(first..first + len),
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
        self.nodes.get(node as usize).map_or(NONE, |n| n.value)
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
    fn many_children_use_binary_search() {
        // More than 8 edges below a non-root node exercises the binary search branch.
        let keys: Vec<String> = (b'a'..=b'z').map(|c| format!("x{}", c as char)).collect();
        let t = Trie::from_pairs(
            keys.iter()
                .enumerate()
                .map(|(i, k)| (k.as_bytes(), i as u32)),
        );
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.get(k.as_bytes()), Some(i as u32));
        }
        assert_eq!(t.get(b"x{"), None);
        assert_eq!(t.get(b"x"), None);
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
