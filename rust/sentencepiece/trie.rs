//! A static byte trie for prefix search over a vocabulary (the role darts-clone plays in the
//! reference). Built once from sorted keys; children of a node are one contiguous, label-sorted
//! run of edges, each edge carrying its child's edge range and value (one array read per
//! step), and the root has a direct 256-entry table because every search starts there.

#[derive(Debug, Clone, Copy)]
struct Node {
    first_edge: u32,
    n_edges: u32,
    /// `u32::MAX` when no key ends here.
    value: u32,
}

/// An edge carries everything about the node it leads to, so a search step reads one array:
/// the label to match, where the child's own edges are, and the value of the key ending there.
#[derive(Debug, Clone, Copy)]
struct Edge {
    first: u32,
    value: u32,
    n: u16,
    label: u8,
}

#[derive(Debug, Clone)]
pub struct ByteTrie {
    edges: Vec<Edge>,
    /// Index into `edges` of the root's edge for each first byte (`NONE` if absent).
    root_table: Box<[u32; 256]>,
    root_value: u32,
}

const NONE: u32 = u32::MAX;

impl Default for ByteTrie {
    fn default() -> Self {
        ByteTrie::build(Vec::new())
    }
}

impl ByteTrie {
    /// Build from `(key, value)` pairs. Keys must be distinct (the last of equal keys wins).
    pub fn build(mut entries: Vec<(&[u8], u32)>) -> ByteTrie {
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries.dedup_by(|later, earlier| {
            if later.0 == earlier.0 {
                earlier.1 = later.1;
                true
            } else {
                false
            }
        });
        let mut nodes = vec![Node {
            first_edge: 0,
            n_edges: 0,
            value: NONE,
        }];
        let mut labels: Vec<u8> = Vec::new();
        let mut targets: Vec<u32> = Vec::new();
        // Breadth first over (node, depth, key range sharing the node's prefix).
        let mut queue = std::collections::VecDeque::new();
        queue.push_back((0usize, 0usize, 0usize, entries.len()));
        while let Some((node, depth, mut lo, hi)) = queue.pop_front() {
            if lo < hi && entries[lo].0.len() == depth {
                nodes[node].value = entries[lo].1;
                lo += 1;
            }
            nodes[node].first_edge = labels.len() as u32;
            let mut i = lo;
            while i < hi {
                let b = entries[i].0[depth];
                let mut j = i + 1;
                while j < hi && entries[j].0[depth] == b {
                    j += 1;
                }
                let child = nodes.len();
                nodes.push(Node {
                    first_edge: 0,
                    n_edges: 0,
                    value: NONE,
                });
                labels.push(b);
                targets.push(child as u32);
                queue.push_back((child, depth + 1, i, j));
                i = j;
            }
            nodes[node].n_edges = labels.len() as u32 - nodes[node].first_edge;
        }
        // A node has at most 256 children, so `n` fits in u16.
        let edges: Vec<Edge> = labels
            .iter()
            .zip(&targets)
            .map(|(&label, &t)| {
                let c = nodes[t as usize];
                Edge {
                    first: c.first_edge,
                    value: c.value,
                    n: c.n_edges as u16,
                    label,
                }
            })
            .collect();
        let mut root_table = Box::new([NONE; 256]);
        let root = nodes[0];
        for e in root.first_edge..root.first_edge + root.n_edges {
            root_table[edges[e as usize].label as usize] = e;
        }
        ByteTrie {
            edges,
            root_table,
            root_value: root.value,
        }
    }

    /// The edge labelled `b` among the children described by `parent`.
    #[inline]
    fn child(&self, parent: &Edge, b: u8) -> Option<Edge> {
        let lo = parent.first as usize;
        let kids = self.edges.get(lo..lo + parent.n as usize)?;
        if kids.len() <= 8 {
            kids.iter().find(|e| e.label == b).copied()
        } else {
            kids.binary_search_by(|e| e.label.cmp(&b))
                .ok()
                .map(|k| kids[k])
        }
    }

    #[inline]
    fn first(&self, b: u8) -> Option<Edge> {
        let e = self.root_table[b as usize];
        (e != NONE).then(|| self.edges[e as usize])
    }

    /// Call `f(len, value)` for every key that is a prefix of `key`, shortest first.
    #[inline]
    pub fn for_each_prefix(&self, key: &[u8], mut f: impl FnMut(usize, u32)) {
        let Some((&b0, rest)) = key.split_first() else {
            return;
        };
        let Some(mut e) = self.first(b0) else {
            return;
        };
        if e.value != NONE {
            f(1, e.value);
        }
        for (i, &b) in rest.iter().enumerate() {
            match self.child(&e, b) {
                Some(c) => e = c,
                None => return,
            }
            if e.value != NONE {
                f(i + 2, e.value);
            }
        }
    }

    /// The longest key that is a prefix of `key`: `(len, value)`.
    pub fn longest_prefix(&self, key: &[u8]) -> Option<(usize, u32)> {
        let mut best = None;
        self.for_each_prefix(key, |l, v| best = Some((l, v)));
        best
    }

    /// The value of exactly `key`.
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let Some((&b0, rest)) = key.split_first() else {
            return (self.root_value != NONE).then_some(self.root_value);
        };
        let mut e = self.first(b0)?;
        for &b in rest {
            e = self.child(&e, b)?;
        }
        (e.value != NONE).then_some(e.value)
    }

    pub fn is_empty(&self) -> bool {
        self.edges.is_empty() && self.root_value == NONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_shortest_first() {
        let keys: Vec<(&[u8], u32)> =
            vec![(b"abc", 3), (b"a", 1), (b"ab", 2), (b"b", 4), (b"abd", 5)];
        let t = ByteTrie::build(keys);
        let mut got = vec![];
        t.for_each_prefix(b"abcd", |l, v| got.push((l, v)));
        assert_eq!(got, vec![(1, 1), (2, 2), (3, 3)]);
        assert_eq!(t.get(b"abd"), Some(5));
        assert_eq!(t.get(b"abx"), None);
        assert_eq!(t.get(b""), None);
        assert_eq!(t.longest_prefix(b"abx"), Some((2, 2)));
        assert_eq!(t.longest_prefix(b"x"), None);
    }

    #[test]
    fn many_children_use_binary_search() {
        let owned: Vec<Vec<u8>> = (0u8..40).map(|i| vec![b'x', b'0' + i]).collect();
        let keys = owned
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_slice(), i as u32))
            .collect();
        let t = ByteTrie::build(keys);
        for (i, k) in owned.iter().enumerate() {
            assert_eq!(t.get(k), Some(i as u32));
        }
        assert!(ByteTrie::default().is_empty());
    }

    #[test]
    fn agrees_with_a_naive_search() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Short keys over a small alphabet, so prefixes overlap heavily and some nodes have
        // more than 8 children.
        let keys: Vec<Vec<u8>> = (0..3000)
            .map(|_| {
                (0..(next() % 5 + 1))
                    .map(|_| b'a' + (next() % 20) as u8)
                    .collect()
            })
            .collect();
        let mut uniq = keys.clone();
        uniq.sort();
        uniq.dedup();
        let t = ByteTrie::build(
            uniq.iter()
                .enumerate()
                .map(|(i, k)| (k.as_slice(), i as u32))
                .collect(),
        );
        for _ in 0..2000 {
            let q: Vec<u8> = (0..(next() % 7))
                .map(|_| b'a' + (next() % 20) as u8)
                .collect();
            let mut got = vec![];
            t.for_each_prefix(&q, |l, v| got.push((l, v)));
            let want: Vec<(usize, u32)> = (1..=q.len())
                .filter_map(|l| {
                    uniq.binary_search(&q[..l].to_vec())
                        .ok()
                        .map(|i| (l, i as u32))
                })
                .collect();
            assert_eq!(got, want);
            assert_eq!(t.get(&q), uniq.binary_search(&q).ok().map(|i| i as u32));
        }
    }
}
