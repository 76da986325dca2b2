//! The small normalizers: Unicode normal forms, Nmt, Lowercase, Strip, StripAccents, Prepend.

use super::config::Obj;
use super::Normalizer;
use crate::error::Result;
use crate::text::NormalizedString;
use unicode_normalization_alignments::char::is_combining_mark;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnicodeForm {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
}

/// NFC / NFD / NFKC / NFKD (unicode-normalization-alignments, as the reference).
#[derive(Debug, Clone, Copy)]
pub struct Unicode(pub UnicodeForm);

impl Normalizer for Unicode {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        // `NormalizedString` skips a form the text is already in.
        match self.0 {
            UnicodeForm::Nfc => n.nfc(),
            UnicodeForm::Nfd => n.nfd(),
            UnicodeForm::Nfkc => n.nfkc(),
            UnicodeForm::Nfkd => n.nfkd(),
        };
        Ok(())
    }
}

/// Lowercase every character (std's full mapping, one char may become several).
#[derive(Debug, Clone, Copy)]
pub struct Lowercase;

impl Normalizer for Lowercase {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        n.lowercase();
        Ok(())
    }
}

/// Remove combining marks (the normalization tables' `is_combining_mark`, i.e. Mn, Mc, Me).
#[derive(Debug, Clone, Copy)]
pub struct StripAccents;

impl Normalizer for StripAccents {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        if n.get().chars().any(is_combining_mark) {
            n.filter(|c| !is_combining_mark(c));
        }
        Ok(())
    }
}

/// Strip whitespace (`char::is_whitespace`) on the left and/or right.
#[derive(Debug, Clone, Copy)]
pub struct Strip {
    pub left: bool,
    pub right: bool,
}

impl Strip {
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        Ok(Strip {
            left: o.req_bool("strip_left")?,
            right: o.req_bool("strip_right")?,
        })
    }
}

impl Normalizer for Strip {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        match (self.left, self.right) {
            (true, true) => {
                n.strip();
            }
            (true, false) => {
                n.lstrip();
            }
            (false, true) => {
                n.rstrip();
            }
            (false, false) => {}
        }
        Ok(())
    }
}

/// Put a string in front of a non-empty text; it aligns to the first character.
#[derive(Debug, Clone)]
pub struct Prepend {
    pub prepend: String,
}

impl Prepend {
    pub(crate) fn from_obj(o: &Obj) -> Result<Self> {
        Ok(Prepend {
            prepend: o.req_str("prepend")?.to_owned(),
        })
    }
}

impl Normalizer for Prepend {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        if !n.is_empty() {
            n.prepend(&self.prepend);
        }
        Ok(())
    }
}

/// The NMT cleanup: drop some C0/C1 controls, turn other separators and format characters
/// into spaces.
#[derive(Debug, Clone, Copy)]
pub struct Nmt;

fn nmt_removed(c: char) -> bool {
    matches!(c as u32, 0x1..=0x8 | 0xB | 0xE..=0x1F | 0x7F | 0x8F | 0x9F)
}

fn nmt_space(c: char) -> bool {
    matches!(
        c as u32,
        0x9 | 0xA | 0xC | 0xD | 0x1680 | 0x200B
            ..=0x200F | 0x2028 | 0x2029 | 0x2581 | 0xFEFF | 0xFFFD
    )
}

impl Normalizer for Nmt {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        if n.get().chars().any(nmt_removed) {
            n.filter(|c| !nmt_removed(c));
        }
        n.map(|c| if nmt_space(c) { ' ' } else { c });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_both_sides_keeps_inner_alignment() {
        let mut n = NormalizedString::from("  ab\u{3000}");
        Strip {
            left: true,
            right: true,
        }
        .normalize(&mut n)
        .unwrap();
        assert_eq!(n.get(), "ab");
        assert_eq!(n.convert_normalized_range(0..2), Some(2..4));
    }

    #[test]
    fn strip_accents_removes_all_combining_marks() {
        // U+0301 is Mn, U+0903 is Mc: both are combining marks.
        let mut n = NormalizedString::from("e\u{301}a\u{903}");
        StripAccents.normalize(&mut n).unwrap();
        assert_eq!(n.get(), "ea");
    }

    #[test]
    fn prepend_skips_empty() {
        let mut n = NormalizedString::from("");
        Prepend {
            prepend: "_".into(),
        }
        .normalize(&mut n)
        .unwrap();
        assert_eq!(n.get(), "");
    }

    #[test]
    fn nfkc_expands_ligature_onto_its_source() {
        let mut n = NormalizedString::from("\u{fb01}x");
        Unicode(UnicodeForm::Nfkc).normalize(&mut n).unwrap();
        assert_eq!(n.get(), "fix");
        assert_eq!(n.convert_normalized_range(0..1), Some(0..3));
        assert_eq!(n.convert_normalized_range(1..2), Some(0..3));
    }

    #[test]
    fn nmt_drops_controls_and_spaces_separators() {
        let mut n = NormalizedString::from("a\u{1}\tb\u{200b}");
        Nmt.normalize(&mut n).unwrap();
        assert_eq!(n.get(), "a b ");
    }
}
