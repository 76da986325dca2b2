//! Normalizers of the tokenizer.json pipeline. Each rewrites a `NormalizedString` in place,
//! keeping its alignment to the original text exactly as `tokenizers` 0.22.1 does.

pub mod bert;
pub(crate) mod config;
pub mod precompiled;
pub mod replace;
pub mod simple;

use crate::error::{Error, Result};
use crate::text::NormalizedString;
use config::Obj;
use serde_json::Value;

pub use bert::BertNormalizer;
pub use precompiled::Precompiled;
pub use replace::Replace;
pub use simple::{Lowercase, Nmt, Prepend, Strip, StripAccents, Unicode, UnicodeForm};

/// `Normalizer::ascii_word_classes`: a byte kept as it is, not whitespace.
pub(crate) const ASCII_WORD: u8 = 0;
/// `Normalizer::ascii_word_classes`: whitespace that stays (non-empty) whitespace.
pub(crate) const ASCII_SPACE: u8 = 1;
/// `Normalizer::ascii_word_classes`: a byte that may change words.
pub(crate) const ASCII_OTHER: u8 = 2;

pub trait Normalizer: Send + Sync {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()>;
    /// Whether `normalize` would certainly leave every whitespace-separated word of this
    /// text as it is, changing at most whitespace into other (non-empty) whitespace: a fast
    /// path that splits at whitespace may then skip normalizing. False when unsure.
    fn keeps_words(&self, _text: &str) -> bool {
        false
    }
    /// Per ASCII byte, what `normalize` does to it between ASCII characters (apart from CR
    /// LF, one grapheme): `ASCII_WORD` (kept; not whitespace), `ASCII_SPACE` (whitespace left
    /// as non-empty whitespace) or anything else (it may change words). `None` when unknown.
    fn ascii_word_classes(&self) -> Option<&[u8; 128]> {
        None
    }
    /// The normalized text alone into `out` (no alignment), for the ids fast paths; `None`
    /// when this normalizer has no such shortcut (then use `normalize`).
    fn normalize_text(&self, _text: &str, _out: &mut String) -> Option<Result<()>> {
        None
    }
}

/// Several normalizers, applied in order.
pub struct Sequence {
    pub normalizers: Vec<Box<dyn Normalizer>>,
}

impl Normalizer for Sequence {
    fn normalize(&self, n: &mut NormalizedString) -> Result<()> {
        for x in &self.normalizers {
            x.normalize(n)?;
        }
        Ok(())
    }
}

impl Sequence {
    fn from_obj(o: &Obj) -> Result<Self> {
        let list = o.req_array("normalizers")?;
        let mut normalizers = Vec::with_capacity(list.len());
        for (i, v) in list.iter().enumerate() {
            normalizers.push(from_json(v).map_err(|e| e.context(format!("normalizers[{i}]")))?);
        }
        Ok(Sequence { normalizers })
    }
}

/// Build the normalizer a tokenizer.json `normalizer` object describes.
/// An unknown `type` is `Error::unsupported` naming it; a malformed one `Error::invalid`
/// naming the field.
///
/// Like the reference, an object whose `type` is missing or not one of the known names is
/// matched against the field sets of the normalizers that do not check their type (Bert,
/// Strip, Sequence, Precompiled, Replace, Prepend, in that order).
pub fn from_json(v: &Value) -> Result<Box<dyn Normalizer>> {
    let ty = v.get("type").and_then(Value::as_str);
    let what = format!("normalizer `{}`", ty.unwrap_or("?"));
    let o = Obj::new(v, &what)?;
    Ok(match ty {
        // The reference writes "BertNormalizer" but its tagged reader knows only "Bert"; the
        // written name goes through the untyped fallback below, which tries Bert first.
        Some("Bert") => Box::new(BertNormalizer::from_obj(&o)?),
        Some("Strip") => Box::new(Strip::from_obj(&o)?),
        Some("StripAccents") => Box::new(StripAccents),
        Some("NFC") => Box::new(Unicode(UnicodeForm::Nfc)),
        Some("NFD") => Box::new(Unicode(UnicodeForm::Nfd)),
        Some("NFKC") => Box::new(Unicode(UnicodeForm::Nfkc)),
        Some("NFKD") => Box::new(Unicode(UnicodeForm::Nfkd)),
        Some("Sequence") => Box::new(Sequence::from_obj(&o)?),
        Some("Lowercase") => Box::new(Lowercase),
        Some("Nmt") => Box::new(Nmt),
        Some("Precompiled") => Box::new(Precompiled::from_obj(&o)?),
        Some("Replace") => Box::new(Replace::from_obj(&o)?),
        Some("Prepend") => Box::new(Prepend::from_obj(&o)?),
        Some("ByteLevel") => Box::new(crate::byte_level::ByteLevel::from_json(v)?),
        _ => match legacy(&o) {
            Some(x) => x,
            None => {
                return Err(match ty {
                    Some("BertNormalizer") => match BertNormalizer::from_obj(&o) {
                        Err(e) => e,
                        Ok(_) => Error::other("unreachable: Bert parsed on the second try"),
                    },
                    Some(t) => Error::unsupported(format!("normalizer `{t}` is not supported")),
                    None => {
                        Error::invalid("normalizer: no `type` and the fields match no normalizer")
                    }
                })
            }
        },
    })
}

/// The reference's fallback for an untyped object: the first normalizer whose fields parse.
fn legacy(o: &Obj) -> Option<Box<dyn Normalizer>> {
    if let Ok(x) = BertNormalizer::from_obj(o) {
        return Some(Box::new(x));
    }
    if let Ok(x) = Strip::from_obj(o) {
        return Some(Box::new(x));
    }
    if let Ok(x) = Sequence::from_obj(o) {
        return Some(Box::new(x));
    }
    if let Ok(x) = Precompiled::from_obj(o) {
        return Some(Box::new(x));
    }
    if let Ok(x) = Replace::from_obj(o) {
        return Some(Box::new(x));
    }
    if let Ok(x) = Prepend::from_obj(o) {
        return Some(Box::new(x));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use serde_json::json;

    fn norm(v: Value, s: &str) -> String {
        let n = from_json(&v).unwrap();
        let mut ns = NormalizedString::from(s);
        n.normalize(&mut ns).unwrap();
        ns.get().to_owned()
    }

    #[test]
    fn unknown_type_is_unsupported_and_missing_field_invalid() {
        let e = from_json(&json!({"type": "Foo"})).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert!(e.message.contains("Foo"));
        let e = from_json(&json!({"type": "Strip"})).err().unwrap();
        assert_eq!(e.kind, ErrorKind::InvalidData);
        assert!(e.message.contains("strip_left"));
    }

    #[test]
    fn untyped_objects_fall_back_by_fields() {
        // No type, but the Strip fields: a Strip (right only).
        assert_eq!(
            norm(json!({"strip_left": false, "strip_right": true}), " a "),
            " a"
        );
        assert_eq!(norm(json!({"prepend": "x"}), "a"), "xa");
    }

    #[test]
    fn sequence_applies_in_order() {
        let v = json!({"type": "Sequence", "normalizers": [
            {"type": "Lowercase"}, {"type": "Prepend", "prepend": "_"}]});
        assert_eq!(norm(v, "AB"), "_ab");
        let e = from_json(&json!({"type": "Sequence", "normalizers": [{}]}))
            .err()
            .unwrap();
        assert!(e.message.contains("normalizers[0]"));
    }
}
