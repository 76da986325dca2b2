//! A static byte trie for prefix search over a vocabulary (the role darts-clone plays in the
//! reference). Built once from sorted keys; children of a node are one contiguous, label-sorted
//! run of edges, and the root has a direct 256-entry table because almost every search starts
//! there.

#[derive(Debug, Clone, Copy)]
struct Node {
    first_edge: u32,
    n_edges: u32,
    /// `u32::MAX` when no key ends here.
    value: u32,
}

#[derive(Debug, Clone)]
pub struct ByteTrie {
    nodes: Vec<Node>,
    labels: Vec<u8>,
    targets: Vec<u32>,
    root_table: Box<[u32; 256]>,
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
        let mut labels = Vec::new();
        let mut targets = Vec::new();
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
        let mut root_table = Box::new([NONE; 256]);
        let root = nodes[0];
        for e in root.first_edge..root.first_edge + root.n_edges {
            root_table[labels[e as usize] as usize] = targets[e as usize];
        }
        ByteTrie {
            nodes,
            labels,
            targets,
            root_table,
        }
    }

    #[inline]
    fn child(&self, node: u32, b: u8) -> Option<u32> {
        if node == 0 {
            let c = self.root_table[b as usize];
            return (c != NONE).then_some(c);
        }
        let n = self.nodes[node as usize];
        let lo = n.first_edge as usize;
        let labels = &self.labels[lo..lo + n.n_edges as usize];
        let k = if labels.len() <= 8 {
            labels.iter().position(|&l| l == b)?
        } else {
            labels.binary_search(&b).ok()?
        };
        Some(self.targets[lo + k])
    }

    /// Call `f(len, value)` for every key that is a prefix of `key`, shortest first.
    #[inline]
    pub fn for_each_prefix(&self, key: &[u8], mut f: impl FnMut(usize, u32)) {
        let mut node = 0u32;
        for (i, &b) in key.iter().enumerate() {
            match self.child(node, b) {
                Some(c) => node = c,
                None => return,
            }
            let v = self.nodes[node as usize].value;
            if v != NONE {
                f(i + 1, v);
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
        let mut node = 0u32;
        for &b in key {
            node = self.child(node, b)?;
        }
        let v = self.nodes[node as usize].value;
        (v != NONE).then_some(v)
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1 && self.nodes[0].value == NONE
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
}
