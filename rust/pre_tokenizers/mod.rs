//! Pre-tokenizers of the tokenizer.json pipeline: split (and sometimes rewrite) the normalized
//! text into the words the model sees.

pub mod bert;
pub mod metaspace;
mod scripts_table;
pub mod split;
pub mod tables;
pub mod unicode_scripts;

use crate::error::{Error, Result};
use crate::normalizers::config::Obj;
use crate::text::PreTokenizedString;
use serde_json::Value;

pub use bert::{BertPreTokenizer, Whitespace, WhitespaceSplit};
pub use metaspace::{Metaspace, PrependScheme};
pub use split::{CharDelimiterSplit, Digits, FixedLength, Punctuation, Split};
pub use unicode_scripts::UnicodeScripts;

pub trait PreTokenizer: Send + Sync {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()>;
}

/// Several pre-tokenizers, applied in order.
pub struct Sequence {
    pub pretokenizers: Vec<Box<dyn PreTokenizer>>,
}

impl PreTokenizer for Sequence {
    fn pre_tokenize(&self, pts: &mut PreTokenizedString) -> Result<()> {
        for p in &self.pretokenizers {
            p.pre_tokenize(pts)?;
        }
        Ok(())
    }
}

/// Build the pre-tokenizer a tokenizer.json `pre_tokenizer` object describes. Every
/// pre-tokenizer of the reference checks its `type`, so there is no untyped fallback.
pub fn from_json(v: &Value) -> Result<Box<dyn PreTokenizer>> {
    let ty = v.get("type").and_then(Value::as_str);
    let what = format!("pre-tokenizer `{}`", ty.unwrap_or("?"));
    let o = Obj::new(v, &what)?;
    Ok(match ty {
        Some("BertPreTokenizer") => Box::new(BertPreTokenizer),
        Some("Whitespace") => Box::new(Whitespace),
        Some("WhitespaceSplit") => Box::new(WhitespaceSplit),
        Some("Metaspace") => Box::new(Metaspace::from_obj(&o)?),
        Some("Punctuation") => Box::new(Punctuation::from_obj(&o)?),
        Some("Digits") => Box::new(Digits::from_obj(&o)?),
        Some("Split") => Box::new(Split::from_obj(&o)?),
        Some("CharDelimiterSplit") => Box::new(CharDelimiterSplit::from_obj(&o)?),
        Some("FixedLength") => Box::new(FixedLength::from_obj(&o)?),
        Some("UnicodeScripts") => Box::new(UnicodeScripts),
        Some("ByteLevel") => Box::new(crate::byte_level::ByteLevel::from_json_strict(v)?),
        Some("Sequence") => {
            let list = o.req_array("pretokenizers")?;
            let mut pretokenizers = Vec::with_capacity(list.len());
            for (i, x) in list.iter().enumerate() {
                pretokenizers
                    .push(from_json(x).map_err(|e| e.context(format!("pretokenizers[{i}]")))?);
            }
            Box::new(Sequence { pretokenizers })
        }
        Some(t) => {
            return Err(Error::unsupported(format!(
                "pre-tokenizer `{t}` is not supported"
            )))
        }
        None => return Err(Error::invalid("pre-tokenizer: missing field `type`")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::text::NormalizedString;
    use serde_json::json;

    pub(crate) fn pieces(v: Value, s: &str) -> Vec<(String, (usize, usize))> {
        let p = from_json(&v).unwrap();
        let mut pts = PreTokenizedString::from_splits(vec![NormalizedString::from(s).into()]);
        p.pre_tokenize(&mut pts).unwrap();
        pts.splits
            .iter()
            .map(|s| {
                (
                    s.normalized.get().to_owned(),
                    s.normalized.offsets_original(),
                )
            })
            .collect()
    }

    #[test]
    fn errors_name_type_and_field() {
        let e = from_json(&json!({"type": "Nope"})).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Unsupported);
        assert!(e.message.contains("Nope"));
        let e = from_json(&json!({"type": "Digits"})).err().unwrap();
        assert_eq!(e.kind, ErrorKind::InvalidData);
        assert!(e.message.contains("individual_digits"));
        // The reference's reader does not know the short name.
        let e = from_json(&json!({"type": "Delimiter", "delimiter": "x"}))
            .err()
            .unwrap();
        assert_eq!(e.kind, ErrorKind::Unsupported);
    }

    #[test]
    fn sequence_runs_in_order() {
        let v = json!({"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": true}]});
        let p = pieces(v, "ab12 c");
        let texts: Vec<&str> = p.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(texts, vec!["ab", "1", "2", "c"]);
        assert_eq!(p[3].1, (5, 6));
    }
}
