//! Post-processors: add special tokens, set type ids, join pairs.
//!
//! Every processor works like the reference's: `process` first marks each input with its
//! sequence id (overflowing parts too) and gives its tokens type id 0 or 1, then the
//! processor-specific step turns the list of inputs into a list of encodings, and the list is
//! merged left to right (which is also where overflowing parts get combined).

pub mod template;

use crate::encoding::Encoding;
use crate::error::{Error, Result};
use serde_json::Value;

pub use template::TemplateProcessing;

pub trait PostProcessor: Send + Sync {
    /// How many tokens `process` adds (for truncation).
    fn added_tokens(&self, is_pair: bool) -> usize;
    fn process(
        &self,
        encoding: Encoding,
        pair: Option<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Encoding>;
    /// The ids `process` gives one sequence, from the ids alone; `None` when only the full
    /// path can tell (it then also raises any error).
    fn single_ids(&self, _ids: &[u32], _add_special_tokens: bool) -> Option<Vec<u32>> {
        None
    }
    /// Whether `single_ids` gives back every `ids` as it is (so a caller may skip it).
    fn single_ids_unchanged(&self, _add_special_tokens: bool) -> bool {
        false
    }
}

/// What the reference does when there is no post-processor: a single input is returned as it
/// is (no sequence ids); a pair gets sequence ids 0 and 1 and is merged, type ids untouched.
pub fn default_process(
    encoding: Encoding,
    pair: Option<Encoding>,
    _add_special_tokens: bool,
) -> Result<Encoding> {
    let Some(mut pair) = pair else {
        return Ok(encoding);
    };
    let mut encoding = encoding;
    encoding.set_sequence_id(0);
    pair.set_sequence_id(1);
    Ok(Encoding::merge([encoding, pair], false))
}

/// `(token, id)` as the Bert and Roberta processors store `cls` and `sep`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialPair {
    pub token: String,
    pub id: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BertProcessing {
    pub sep: SpecialPair,
    pub cls: SpecialPair,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobertaProcessing {
    pub sep: SpecialPair,
    pub cls: SpecialPair,
    pub trim_offsets: bool,
    pub add_prefix_space: bool,
}

/// The ByteLevel post-processor: only offset trimming.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByteLevelProcessing {
    pub add_prefix_space: bool,
    pub trim_offsets: bool,
}

/// Every post-processor a tokenizer.json can name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Processor {
    Bert(BertProcessing),
    Roberta(RobertaProcessing),
    ByteLevel(ByteLevelProcessing),
    Template(TemplateProcessing),
    Sequence(Vec<Processor>),
}

/// `[cls] tokens [sep]` (or `tokens [sep]`, `[sep] tokens [sep]`) around one encoding, with
/// the sequence range covering only the input tokens. The input's tokens are moved, not
/// copied; its overflowing parts are dropped (the caller wraps them separately).
fn wrap(
    e: Encoding,
    front: Option<&SpecialPair>,
    back: &SpecialPair,
    type_ids: Vec<u32>,
    seq: usize,
) -> Encoding {
    let start = usize::from(front.is_some());
    let n = e.len() + start + 1;
    let mut out = Encoding::with_capacity(n);
    if let Some(f) = front {
        out.ids.push(f.id);
        out.tokens.push(f.token.clone());
        out.words.push(None);
        out.offsets.push((0, 0));
        out.special_tokens_mask.push(1);
    }
    out.special_tokens_mask
        .extend(std::iter::repeat_n(0, e.ids.len()));
    out.ids.extend(e.ids);
    out.tokens.extend(e.tokens);
    out.words.extend(e.words);
    out.offsets.extend(e.offsets);
    out.ids.push(back.id);
    out.tokens.push(back.token.clone());
    out.words.push(None);
    out.offsets.push((0, 0));
    out.special_tokens_mask.push(1);
    out.type_ids = type_ids;
    out.attention_mask = vec![1; out.ids.len()];
    out.sequence_ranges.insert(seq, start..out.ids.len() - 1);
    out
}

fn concat_type_ids(front: Option<u32>, mid: &[u32], back: u32) -> Vec<u32> {
    let mut v = Vec::with_capacity(mid.len() + 2);
    v.extend(front);
    v.extend_from_slice(mid);
    v.push(back);
    v
}

impl BertProcessing {
    fn process_encodings(&self, encodings: Vec<Encoding>, add: bool) -> Vec<Encoding> {
        if !add {
            return encodings;
        }
        encodings
            .into_iter()
            .enumerate()
            .map(|(i, mut e)| {
                let overflowing = std::mem::take(&mut e.overflowing);
                let one = |e: Encoding| {
                    if i == 0 {
                        let t = concat_type_ids(Some(0), &e.type_ids, 0);
                        wrap(e, Some(&self.cls), &self.sep, t, 0)
                    } else {
                        let t = concat_type_ids(None, &e.type_ids, 1);
                        wrap(e, None, &self.sep, t, 1)
                    }
                };
                let mut out = one(e);
                out.overflowing = overflowing.into_iter().map(one).collect();
                out
            })
            .collect()
    }
}

impl RobertaProcessing {
    fn process_encodings(&self, mut encodings: Vec<Encoding>, add: bool) -> Vec<Encoding> {
        if self.trim_offsets {
            for e in &mut encodings {
                trim_offsets(e, self.add_prefix_space);
            }
        }
        // Roberta gives every token type id 0 (the overflowing parts only when wrapped).
        for e in &mut encodings {
            set_type_ids(e, 0);
        }
        if !add {
            return encodings;
        }
        encodings
            .into_iter()
            .enumerate()
            .map(|(i, mut e)| {
                let overflowing = std::mem::take(&mut e.overflowing);
                let one = |e: Encoding| {
                    let zeros = vec![0; e.len() + 2];
                    if i == 0 {
                        wrap(e, Some(&self.cls), &self.sep, zeros, 0)
                    } else {
                        wrap(e, Some(&self.sep), &self.sep, zeros, 1)
                    }
                };
                let mut out = one(e);
                out.overflowing = overflowing.into_iter().map(one).collect();
                out
            })
            .collect()
    }
}

/// Every token of `e` gets type id `t` (reusing the vector).
fn set_type_ids(e: &mut Encoding, t: u32) {
    let n = e.ids.len();
    e.type_ids.clear();
    e.type_ids.resize(n, t);
}

/// The ByteLevel offset trimming, applied to an encoding and its overflowing parts.
fn trim_offsets(e: &mut Encoding, add_prefix_space: bool) {
    crate::byte_level::process_offsets(e, add_prefix_space);
    for o in &mut e.overflowing {
        crate::byte_level::process_offsets(o, add_prefix_space);
    }
}

impl Processor {
    pub fn added_tokens(&self, is_pair: bool) -> usize {
        match self {
            Processor::Bert(_) => 2 + usize::from(is_pair),
            Processor::Roberta(_) => 2 + 2 * usize::from(is_pair),
            Processor::ByteLevel(_) => 0,
            Processor::Template(t) => t.added_tokens(is_pair),
            Processor::Sequence(list) => list.iter().map(|p| p.added_tokens(is_pair)).sum(),
        }
    }

    /// The processor-specific step: inputs in, encodings to merge out.
    pub fn process_encodings(&self, encodings: Vec<Encoding>, add: bool) -> Result<Vec<Encoding>> {
        Ok(match self {
            Processor::Bert(b) => b.process_encodings(encodings, add),
            Processor::Roberta(r) => r.process_encodings(encodings, add),
            Processor::ByteLevel(b) => {
                let mut encodings = encodings;
                for (i, e) in encodings.iter_mut().enumerate() {
                    if b.trim_offsets {
                        trim_offsets(e, b.add_prefix_space);
                    }
                    e.set_sequence_id(i);
                }
                encodings
            }
            Processor::Template(t) => t.process_encodings(encodings, add)?,
            Processor::Sequence(list) => {
                let mut encodings = encodings;
                for p in list {
                    encodings = p.process_encodings(encodings, add)?;
                }
                encodings
            }
        })
    }
}

impl PostProcessor for Processor {
    fn added_tokens(&self, is_pair: bool) -> usize {
        Processor::added_tokens(self, is_pair)
    }

    fn single_ids_unchanged(&self, add_special_tokens: bool) -> bool {
        // Mirrors `single_ids` arm by arm.
        match self {
            Processor::Bert(_) | Processor::Roberta(_) => !add_special_tokens,
            Processor::ByteLevel(_) => true,
            Processor::Template(t) => t.single_ids_unchanged(add_special_tokens),
            Processor::Sequence(list) => list
                .iter()
                .all(|p| PostProcessor::single_ids_unchanged(p, add_special_tokens)),
        }
    }

    fn single_ids(&self, ids: &[u32], add_special_tokens: bool) -> Option<Vec<u32>> {
        let wrap = |cls: &SpecialPair, sep: &SpecialPair| {
            let mut out = Vec::with_capacity(ids.len() + 2);
            out.push(cls.id);
            out.extend_from_slice(ids);
            out.push(sep.id);
            out
        };
        match self {
            // A template still repeats its sequences without special tokens.
            Processor::Bert(_) | Processor::Roberta(_) | Processor::ByteLevel(_)
                if !add_special_tokens =>
            {
                Some(ids.to_vec())
            }
            Processor::Bert(b) => Some(wrap(&b.cls, &b.sep)),
            Processor::Roberta(r) => Some(wrap(&r.cls, &r.sep)),
            Processor::ByteLevel(_) => Some(ids.to_vec()),
            Processor::Template(t) => t.single_ids(ids, add_special_tokens),
            Processor::Sequence(list) => {
                let mut cur = ids.to_vec();
                for p in list {
                    cur = PostProcessor::single_ids(p, &cur, add_special_tokens)?;
                }
                Some(cur)
            }
        }
    }

    fn process(
        &self,
        encoding: Encoding,
        pair: Option<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        let mut encodings = Vec::with_capacity(2);
        encodings.push(encoding);
        encodings.extend(pair);
        for (i, e) in encodings.iter_mut().enumerate() {
            e.set_sequence_id(i);
            for o in &mut e.overflowing {
                o.set_sequence_id(i);
            }
            // Only the top level gets the type id; overflowing parts keep theirs.
            set_type_ids(e, i as u32);
        }
        let encodings = self.process_encodings(encodings, add_special_tokens)?;
        Ok(Encoding::merge(encodings, false))
    }
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json

/// `["[SEP]", 102]`, or None when the value has another shape.
fn special_pair(v: Option<&Value>) -> Option<SpecialPair> {
    match v?.as_array()?.as_slice() {
        [t, id] => Some(SpecialPair {
            token: t.as_str()?.to_owned(),
            id: u32::try_from(id.as_u64()?).ok()?,
        }),
        _ => None,
    }
}

fn bert_from(v: &Value) -> Option<BertProcessing> {
    Some(BertProcessing {
        sep: special_pair(v.get("sep"))?,
        cls: special_pair(v.get("cls"))?,
    })
}

fn roberta_from(v: &Value) -> Option<RobertaProcessing> {
    let b = bert_from(v)?;
    Some(RobertaProcessing {
        sep: b.sep,
        cls: b.cls,
        trim_offsets: v.get("trim_offsets")?.as_bool()?,
        add_prefix_space: v.get("add_prefix_space")?.as_bool()?,
    })
}

fn byte_level_from(v: &Value) -> Result<ByteLevelProcessing> {
    let flag = |name: &str| {
        v.get(name).and_then(Value::as_bool).ok_or_else(|| {
            Error::invalid(format!(
                "post-processor `ByteLevel`: field `{name}` must be a boolean"
            ))
        })
    };
    if v.get("use_regex").is_some_and(|u| !u.is_boolean()) {
        return Err(Error::invalid(
            "post-processor `ByteLevel`: field `use_regex` must be a boolean",
        ));
    }
    Ok(ByteLevelProcessing {
        add_prefix_space: flag("add_prefix_space")?,
        trim_offsets: flag("trim_offsets")?,
    })
}

/// Build the processor a tokenizer.json `post_processor` object describes.
///
/// The reference reads this object as an untagged union tried in the order Roberta, Bert,
/// ByteLevel, Template, Sequence, and only ByteLevel and Sequence check `type`. So any object
/// with `sep`/`cls` (plus both Roberta flags) is Roberta/Bert whatever its `type` says; we
/// follow that order.
pub fn processor_from_json(v: &Value) -> Result<Processor> {
    if !v.is_object() {
        return Err(Error::invalid(format!(
            "post_processor: expected an object, got {v}"
        )));
    }
    if let Some(r) = roberta_from(v) {
        return Ok(Processor::Roberta(r));
    }
    if let Some(b) = bert_from(v) {
        return Ok(Processor::Bert(b));
    }
    let ty = v.get("type").and_then(Value::as_str);
    if ty == Some("ByteLevel") {
        return byte_level_from(v).map(Processor::ByteLevel);
    }
    let template_error = match TemplateProcessing::from_json(v) {
        Ok(t) => return Ok(Processor::Template(t)),
        Err(e) => e,
    };
    match ty {
        Some("Sequence") => {
            let list = v
                .get("processors")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    Error::invalid("post-processor `Sequence`: missing list field `processors`")
                })?;
            let list = list
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    processor_from_json(p)
                        .map_err(|e| e.context(format!("post-processor `Sequence`.processors[{i}]")))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Processor::Sequence(list))
        }
        Some("TemplateProcessing") => Err(template_error),
        Some("BertProcessing") => Err(Error::invalid(
            "post-processor `BertProcessing`: fields `sep` and `cls` must be [token, id]",
        )),
        Some("RobertaProcessing") => Err(Error::invalid(
            "post-processor `RobertaProcessing`: fields `sep` and `cls` must be [token, id], `trim_offsets` and `add_prefix_space` booleans",
        )),
        Some(other) => Err(Error::unsupported(format!(
            "post-processor `{other}` is not supported"
        ))),
        None => Err(Error::invalid(
            "post_processor: no `type`, and the fields match no known post-processor",
        )),
    }
}

/// Build the post-processor a tokenizer.json `post_processor` object describes.
pub fn from_json(v: &Value) -> Result<Box<dyn PostProcessor>> {
    Ok(Box::new(processor_from_json(v)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn letters(s: &str, ty: u32) -> Encoding {
        let mut e = Encoding::default();
        for (i, c) in s.chars().enumerate() {
            e.ids.push(c as u32);
            e.type_ids.push(ty);
            e.tokens.push(c.to_string());
            e.words.push(Some(i as u32));
            e.offsets.push((i, i + 1));
            e.special_tokens_mask.push(0);
            e.attention_mask.push(1);
        }
        e
    }

    fn bert() -> Processor {
        processor_from_json(
            &json!({"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}),
        )
        .unwrap()
    }

    fn bert_template() -> Processor {
        processor_from_json(&json!({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [101], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [102], "tokens": ["[SEP]"]}
            }
        }))
        .unwrap()
    }

    /// `single_ids_unchanged` only where `process` (the full path) keeps a single sequence's
    /// ids as they are, for every processor kind and both settings.
    #[test]
    fn single_ids_unchanged_only_when_process_keeps_the_ids() {
        let seq = |id: &str| json!({"Sequence": {"id": id, "type_id": 0}});
        let sp = |id: &str| json!({"SpecialToken": {"id": id, "type_id": 0}});
        let template = |single: Value| {
            processor_from_json(&json!({
                "type": "TemplateProcessing", "single": single, "pair": [seq("A"), seq("B")],
                "special_tokens": {
                    "[CLS]": {"id": "[CLS]", "ids": [101], "tokens": ["[CLS]"]},
                    "E": {"id": "E", "ids": [], "tokens": []}
                }
            }))
            .unwrap()
        };
        let roberta = processor_from_json(&json!({"type": "RobertaProcessing",
            "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true, "add_prefix_space": true}))
        .unwrap();
        let byte_level = processor_from_json(&json!({"type": "ByteLevel", "trim_offsets": false,
            "add_prefix_space": false, "use_regex": true}))
        .unwrap();
        let procs = vec![
            bert(),
            bert_template(),
            roberta,
            byte_level,
            template(json!([seq("A")])),
            template(json!([seq("A"), seq("A")])),
            template(json!([sp("E"), seq("A"), sp("E")])),
            template(json!([sp("[CLS]"), seq("A")])),
            Processor::Sequence(vec![bert_template(), template(json!([seq("A")]))]),
            Processor::Sequence(vec![template(json!([seq("A"), seq("A")]))]),
        ];
        let mut seen = [0, 0];
        for p in &procs {
            for add in [false, true] {
                let e = letters("abc", 0);
                // (A sequence holding a template may refuse to run on the full path; the ids
                // path then already gives what `single_ids` gives.)
                let full = p.process(e.clone(), None, add).map(|r| r.ids);
                let claimed = PostProcessor::single_ids_unchanged(p, add);
                assert!(
                    !claimed
                        || full
                            .as_ref()
                            .is_err_and(|_| matches!(p, Processor::Sequence(_)))
                        || full.as_ref().is_ok_and(|ids| *ids == e.ids),
                    "{p:?} {add} {full:?}"
                );
                if claimed {
                    assert_eq!(p.single_ids(&e.ids, add), Some(e.ids.clone()));
                }
                seen[usize::from(claimed)] += 1;
            }
        }
        assert!(seen[0] > 3 && seen[1] > 3, "{seen:?}");
    }

    #[test]
    fn bert_single_and_pair() {
        let p = bert();
        assert_eq!((p.added_tokens(false), p.added_tokens(true)), (2, 3));
        let e = p.process(letters("ab", 0), None, true).unwrap();
        assert_eq!(e.tokens, ["[CLS]", "a", "b", "[SEP]"]);
        assert_eq!(e.special_tokens_mask, [1, 0, 0, 1]);
        assert_eq!(e.offsets, [(0, 0), (0, 1), (1, 2), (0, 0)]);
        assert_eq!(e.sequence_ids(), [None, Some(0), Some(0), None]);
        let e = p
            .process(letters("ab", 0), Some(letters("c", 1)), true)
            .unwrap();
        assert_eq!(e.ids, [101, 97, 98, 102, 99, 102]);
        assert_eq!(e.type_ids, [0, 0, 0, 0, 1, 1]);
        assert_eq!(e.words, [None, Some(0), Some(1), None, Some(0), None]);
        assert_eq!(
            e.sequence_ids(),
            [None, Some(0), Some(0), None, Some(1), None]
        );
        // Without special tokens the pair is only merged, with sequence and type ids.
        let e = p
            .process(letters("ab", 7), Some(letters("c", 7)), false)
            .unwrap();
        assert_eq!(e.tokens, ["a", "b", "c"]);
        assert_eq!(e.type_ids, [0, 0, 1]);
        assert_eq!(e.sequence_ids(), [Some(0), Some(0), Some(1)]);
    }

    #[test]
    fn template_matches_bert_and_wraps_overflowing() {
        let mut a = letters("abcd", 0);
        a.truncate(2, 0, crate::encoding::Direction::Right).unwrap();
        let b = letters("x", 1);
        for p in [bert(), bert_template()] {
            let e = p.process(a.clone(), Some(b.clone()), true).unwrap();
            assert_eq!(e.tokens, ["[CLS]", "a", "b", "[SEP]", "x", "[SEP]"]);
            assert_eq!(e.overflowing.len(), 1);
            let o = &e.overflowing[0];
            assert_eq!(o.tokens, ["[CLS]", "c", "d", "[SEP]", "x", "[SEP]"]);
            assert_eq!(o.type_ids, [0, 0, 0, 0, 1, 1]);
            assert_eq!(
                o.sequence_ids(),
                [None, Some(0), Some(0), None, Some(1), None]
            );
        }
    }

    #[test]
    fn template_multi_id_tokens_and_type_ids() {
        let p = processor_from_json(&json!({
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<bos>", "type_id": 3}}, {"Sequence": {"id": "A", "type_id": 2}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 5}},
                     {"SpecialToken": {"id": "<bos>", "type_id": 1}}, {"SpecialToken": {"id": "nope", "type_id": 1}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [1, 2], "tokens": ["<b", "os>"]}}
        }))
        .unwrap();
        // An unknown id counts zero tokens (and fails only when used).
        assert_eq!((p.added_tokens(false), p.added_tokens(true)), (2, 2));
        let e = p.process(letters("a", 0), None, true).unwrap();
        assert_eq!(e.tokens, ["<b", "os>", "a"]);
        assert_eq!(e.type_ids, [3, 3, 2]);
        assert_eq!(e.special_tokens_mask, [1, 1, 0]);
        let e = p.process(letters("a", 0), None, false).unwrap();
        assert_eq!((e.tokens.len(), e.type_ids[0]), (1, 2));
        assert!(p
            .process(letters("a", 0), Some(letters("b", 1)), true)
            .is_err());
        let e = p
            .process(letters("a", 0), Some(letters("b", 1)), false)
            .unwrap();
        assert_eq!(e.type_ids, [0, 5]);
    }

    #[test]
    fn roberta_pair_layout() {
        let p = processor_from_json(&json!({"type": "RobertaProcessing", "sep": ["</s>", 2],
            "cls": ["<s>", 0], "trim_offsets": false, "add_prefix_space": true}))
        .unwrap();
        assert!(matches!(p, Processor::Roberta(_)));
        assert_eq!(p.added_tokens(true), 4);
        let e = p
            .process(letters("a", 0), Some(letters("b", 1)), true)
            .unwrap();
        assert_eq!(e.tokens, ["<s>", "a", "</s>", "</s>", "b", "</s>"]);
        assert_eq!(e.type_ids, [0; 6]);
        assert_eq!(e.special_tokens_mask, [1, 0, 1, 1, 0, 1]);
        assert_eq!(e.sequence_ids(), [None, Some(0), None, None, Some(1), None]);
    }

    #[test]
    fn default_process_single_is_untouched_pair_is_merged() {
        let e = default_process(letters("ab", 0), None, true).unwrap();
        assert!(e.sequence_ranges.is_empty());
        let e = default_process(letters("ab", 0), Some(letters("c", 1)), true).unwrap();
        assert_eq!(e.sequence_ids(), [Some(0), Some(0), Some(1)]);
        assert_eq!(e.type_ids, [0, 0, 1]);
        assert_eq!(e.offsets[2], (0, 1));
    }

    #[test]
    fn sequence_and_byte_level_without_trimming() {
        let p = processor_from_json(&json!({"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
            {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
        ]}))
        .unwrap();
        assert_eq!(p.added_tokens(true), 3);
        let e = p.process(letters("a", 0), None, true).unwrap();
        assert_eq!(e.tokens, ["[CLS]", "a", "[SEP]"]);
        let bl = processor_from_json(
            &json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false}),
        )
        .unwrap();
        let e = bl.process(letters("a", 0), None, true).unwrap();
        assert_eq!(e.sequence_ranges[&0], 0..1);
    }

    #[test]
    fn json_dispatch_follows_the_reference_order() {
        // `sep` + `cls` make a Bert processor whatever `type` says, and all four Roberta
        // fields make a Roberta one.
        let v = json!({"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]});
        assert!(matches!(
            processor_from_json(&v).unwrap(),
            Processor::Bert(_)
        ));
        let v = json!({"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
            "trim_offsets": true, "add_prefix_space": false});
        assert!(matches!(
            processor_from_json(&v).unwrap(),
            Processor::Roberta(_)
        ));
        let err = processor_from_json(&json!({"type": "Magic"})).unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Unsupported);
        assert!(err.message.contains("`Magic`"));
        let err = processor_from_json(&json!({"type": "ByteLevel", "add_prefix_space": true}))
            .unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::InvalidData);
        assert!(err.message.contains("trim_offsets"));
        let err =
            processor_from_json(&json!({"type": "TemplateProcessing", "single": [], "pair": []}))
                .unwrap_err();
        assert!(err.message.contains("special_tokens"));
    }
}
