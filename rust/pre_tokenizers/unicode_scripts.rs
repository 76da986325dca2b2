//! UnicodeScripts: split where the script changes (Hiragana, Katakana and U+30FC count as
//! Han; the space and characters of no script are neutral). The classes come from a table
//! measured from the reference, whose script data is older than current Unicode.

use super::scripts_table::SCRIPT_CLASSES;
use super::PreTokenizer;
use crate::error::{Error, Result};
use crate::text::PreTokenizedString;

/// The neutral class: never starts a new piece and does not change the current script.
const ANY: u16 = 0;

fn script_class(c: char) -> u16 {
    let c = c as u32;
    match SCRIPT_CLASSES.binary_search_by(|&(a, b, _)| {
        if b < c {
            std::cmp::Ordering::Less
        } else if a > c {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(i) => SCRIPT_CLASSES[i].2,
        Err(_) => ANY,
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct UnicodeScripts;

impl PreTokenizer for UnicodeScripts {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        pts.split(|_, n| {
            let text = n.get();
            // Piece starts: wherever a non-neutral char has another script than the last
            // non-neutral one. As in the reference, neutral chars before the first start
            // belong to no piece and are dropped.
            let mut starts = Vec::new();
            let mut last: Option<u16> = None;
            for (b, c) in text.char_indices() {
                let k = script_class(c);
                if k != ANY {
                    if last != Some(k) {
                        starts.push(b);
                    }
                    last = Some(k);
                }
            }
            starts.push(text.len());
            starts
                .windows(2)
                .map(|w| {
                    n.slice(w[0]..w[1])
                        .ok_or_else(|| Error::other("bad script split"))
                })
                .collect::<Result<Vec<_>>>()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::pieces;
    use serde_json::json;

    fn texts(s: &str) -> Vec<String> {
        pieces(json!({"type": "UnicodeScripts"}), s)
            .into_iter()
            .map(|p| p.0)
            .collect()
    }

    #[test]
    fn splits_on_script_change_with_neutral_space() {
        assert_eq!(texts("abc日本 def"), vec!["abc", "日本 ", "def"]);
        // Katakana and the prolonged sound mark count as Han.
        assert_eq!(texts("漢カナー"), vec!["漢カナー"]);
        // Spaces never start a piece: leading ones are dropped.
        assert_eq!(texts("  ab"), vec!["ab"]);
        assert!(texts("   ").is_empty());
    }
}
