//! Character → vocabulary id without hashing, for undecorated models (a word's first symbols
//! are then the ids of its characters' one-character tokens, `Bpe::merge_word`'s lookup of
//! the character as a string).

/// Characters per block of the two-level table.
const BLOCK: usize = 128;
/// "Not in the vocabulary" (a model with a one-character token of this id gets no table).
const NO_ID: u32 = u32::MAX;

/// ASCII directly; other code points through a page table (code point / 128 → a block of
/// 128 ids, block 0 being all `NO_ID`), so a lookup is two loads.
pub(super) struct CharIds {
    ascii: [u32; 128],
    pages: Box<[u16]>,
    blocks: Vec<u32>,
}

impl CharIds {
    /// The table of the one-character tokens of `vocab`; `None` when one has the id `NO_ID`
    /// or the blocks would not fit the u16 page index.
    pub(super) fn new<'a>(vocab: impl Iterator<Item = (&'a str, u32)>) -> Option<CharIds> {
        let mut t = CharIds {
            ascii: [NO_ID; 128],
            pages: vec![0u16; (char::MAX as usize / BLOCK) + 1].into_boxed_slice(),
            blocks: vec![NO_ID; BLOCK],
        };
        for (s, id) in vocab {
            let mut it = s.chars();
            let (Some(c), None) = (it.next(), it.next()) else {
                continue;
            };
            if id == NO_ID {
                return None;
            }
            let cp = c as usize;
            if let Some(slot) = t.ascii.get_mut(cp) {
                *slot = id;
                continue;
            }
            let page = t.pages.get_mut(cp / BLOCK)?;
            if *page == 0 {
                *page = u16::try_from(t.blocks.len() / BLOCK).ok()?;
                t.blocks.extend(std::iter::repeat_n(NO_ID, BLOCK));
            }
            *t.blocks.get_mut(usize::from(*page) * BLOCK + cp % BLOCK)? = id;
        }
        Some(t)
    }

    /// The id of the one-character token `c`, if any.
    #[inline(always)]
    pub(super) fn get(&self, c: char) -> Option<u32> {
        let cp = c as usize;
        let id = match self.ascii.get(cp) {
            Some(&id) => id,
            None => {
                let page = self.pages.get(cp / BLOCK).copied().unwrap_or(0);
                self.blocks
                    .get(usize::from(page) * BLOCK + cp % BLOCK)
                    .copied()
                    .unwrap_or(NO_ID)
            }
        };
        (id != NO_ID).then_some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_answers_as_the_map() {
        let tokens = [
            "a",
            "é",
            "火",
            "😀",
            "ab",
            "\u{7f}",
            "\u{80}",
            "\u{10FFFF}",
            "",
        ];
        let vocab: Vec<(&str, u32)> = tokens
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, i as u32 * 7))
            .collect();
        let t = CharIds::new(vocab.iter().copied()).unwrap();
        for c in [
            'a',
            'b',
            'é',
            'è',
            '火',
            '炎',
            '😀',
            '😁',
            '\u{7f}',
            '\u{80}',
            '\u{10FFFF}',
            '\0',
        ] {
            let want = vocab
                .iter()
                .find(|(s, _)| *s == c.encode_utf8(&mut [0; 4]))
                .map(|&(_, id)| id);
            assert_eq!(t.get(c), want, "{c:?}");
        }
        assert!(CharIds::new([("x", NO_ID)].into_iter()).is_none());
    }
}
