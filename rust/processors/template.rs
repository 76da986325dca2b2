//! TemplateProcessing: special tokens and type ids placed by a template such as
//! `[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1`.

use crate::encoding::Encoding;
use crate::error::{Error, Result};
use serde_json::Value;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// `$A` (seq 0) or `$B` (seq 1) with the type id its tokens get.
    Sequence { seq: usize, type_id: u32 },
    /// A key of `special_tokens` with the type id its tokens get.
    Special { id: String, type_id: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialToken {
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateProcessing {
    pub single: Vec<Piece>,
    pub pair: Vec<Piece>,
    pub special_tokens: HashMap<String, SpecialToken>,
    added_single: usize,
    added_pair: usize,
    /// The single template with its special tokens' ids looked up once (`None` entries are
    /// the sequence), for `single_ids`; `None` when the template needs a second sequence or
    /// names an unknown special token.
    single_ids_plan: Option<Vec<Option<Vec<u32>>>>,
}

fn u32_of(v: &Value, what: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Error::invalid(format!("{what}: expected a u32, got {v}")))
}

fn parse_template(v: &Value, what: &str) -> Result<Vec<Piece>> {
    let list = v
        .as_array()
        .ok_or_else(|| Error::invalid(format!("{what}: expected a list of pieces")))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let where_ = format!("{what}[{i}]");
        let obj = p.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
            Error::invalid(format!(
                "{where_}: expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}"
            ))
        })?;
        let (kind, body) = obj
            .iter()
            .next()
            .ok_or_else(|| Error::invalid(where_.clone()))?;
        let id = body
            .get("id")
            .ok_or_else(|| Error::invalid(format!("{where_}: missing field `id`")))?;
        let type_id = u32_of(
            body.get("type_id")
                .ok_or_else(|| Error::invalid(format!("{where_}: missing field `type_id`")))?,
            &format!("{where_}.type_id"),
        )?;
        out.push(match kind.as_str() {
            "Sequence" => {
                let seq = match id.as_str() {
                    Some("A") => 0,
                    Some("B") => 1,
                    _ => {
                        return Err(Error::invalid(format!(
                            "{where_}.id: expected \"A\" or \"B\", got {id}"
                        )))
                    }
                };
                Piece::Sequence { seq, type_id }
            }
            "SpecialToken" => Piece::Special {
                id: id
                    .as_str()
                    .ok_or_else(|| Error::invalid(format!("{where_}.id: expected a string")))?
                    .to_owned(),
                type_id,
            },
            other => {
                return Err(Error::invalid(format!(
                    "{where_}: unknown piece kind `{other}`"
                )))
            }
        });
    }
    Ok(out)
}

fn parse_special_tokens(v: &Value) -> Result<HashMap<String, SpecialToken>> {
    const WHAT: &str = "TemplateProcessing.special_tokens";
    let map = v
        .as_object()
        .ok_or_else(|| Error::invalid(format!("{WHAT}: expected an object")))?;
    let mut out = HashMap::with_capacity(map.len());
    for (key, t) in map {
        let where_ = format!("{WHAT}.{key}");
        if !t.get("id").is_some_and(Value::is_string) {
            return Err(Error::invalid(format!(
                "{where_}: missing string field `id`"
            )));
        }
        let ids = t
            .get("ids")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::invalid(format!("{where_}: missing list field `ids`")))?
            .iter()
            .map(|x| u32_of(x, &format!("{where_}.ids")))
            .collect::<Result<Vec<_>>>()?;
        let tokens = t
            .get("tokens")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::invalid(format!("{where_}: missing list field `tokens`")))?
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Error::invalid(format!("{where_}.tokens: expected strings")))
            })
            .collect::<Result<Vec<_>>>()?;
        // The reference loads such an entry and then builds an inconsistent encoding; refuse it.
        if ids.len() != tokens.len() {
            return Err(Error::invalid(format!(
                "{where_}: `ids` and `tokens` must have the same length"
            )));
        }
        out.insert(key.clone(), SpecialToken { ids, tokens });
    }
    Ok(out)
}

impl TemplateProcessing {
    pub fn new(
        single: Vec<Piece>,
        pair: Vec<Piece>,
        special_tokens: HashMap<String, SpecialToken>,
    ) -> Self {
        // Pieces naming an unknown special token count zero, as in the reference.
        let count = |t: &[Piece]| -> usize {
            t.iter()
                .map(|p| match p {
                    Piece::Sequence { .. } => 0,
                    Piece::Special { id, .. } => special_tokens.get(id).map_or(0, |s| s.ids.len()),
                })
                .sum()
        };
        let added_single = count(&single);
        let added_pair = count(&pair);
        let single_ids_plan = single
            .iter()
            .map(|p| match p {
                Piece::Sequence { seq: 0, .. } => Some(None),
                Piece::Sequence { .. } => None,
                Piece::Special { id, .. } => special_tokens.get(id).map(|s| Some(s.ids.clone())),
            })
            .collect();
        TemplateProcessing {
            single,
            pair,
            special_tokens,
            added_single,
            added_pair,
            single_ids_plan,
        }
    }

    /// The ids of a single sequence after this template (`add_special_tokens: false` keeps only
    /// the sequences); `None` when the template cannot run on ids alone.
    pub fn single_ids(&self, ids: &[u32], add_special_tokens: bool) -> Option<Vec<u32>> {
        let plan = self.single_ids_plan.as_ref()?;
        let mut out = Vec::with_capacity(ids.len() + self.added_single);
        for piece in plan {
            match piece {
                None => out.extend_from_slice(ids),
                Some(special) if add_special_tokens => out.extend_from_slice(special),
                Some(_) => {}
            }
        }
        Some(out)
    }

    /// Whether `single_ids` returns `ids` unchanged: the plan holds the sequence exactly once
    /// and every special token it would add is empty or left out.
    pub fn single_ids_unchanged(&self, add_special_tokens: bool) -> bool {
        self.single_ids_plan.as_ref().is_some_and(|plan| {
            plan.iter().filter(|p| p.is_none()).count() == 1
                && plan
                    .iter()
                    .flatten()
                    .all(|special| !add_special_tokens || special.is_empty())
        })
    }

    /// The object must have `single`, `pair` and `special_tokens` (the reference ignores `type`).
    pub fn from_json(v: &Value) -> Result<Self> {
        let field = |name: &str| {
            v.get(name).ok_or_else(|| {
                Error::invalid(format!("TemplateProcessing: missing field `{name}`"))
            })
        };
        let single = parse_template(field("single")?, "TemplateProcessing.single")?;
        let pair = parse_template(field("pair")?, "TemplateProcessing.pair")?;
        let special_tokens = parse_special_tokens(field("special_tokens")?)?;
        Ok(Self::new(single, pair, special_tokens))
    }

    pub fn added_tokens(&self, is_pair: bool) -> usize {
        if is_pair {
            self.added_pair
        } else {
            self.added_single
        }
    }

    /// Lay the inputs and the special tokens out as the template says; the caller merges them.
    pub fn process_encodings(
        &self,
        mut encodings: Vec<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Vec<Encoding>> {
        let template = match encodings.len() {
            1 => &self.single,
            2 => &self.pair,
            n => {
                return Err(Error::other(format!(
                    "TemplateProcessing: expected 1 or 2 encodings, got {n}"
                )))
            }
        };
        // The last use of each input can take it instead of copying it (templates normally
        // use each input once).
        let mut last_use = [None::<usize>; 2];
        for (k, piece) in template.iter().enumerate() {
            if let Piece::Sequence { seq, .. } = piece {
                if let Some(slot) = last_use.get_mut(*seq) {
                    *slot = Some(k);
                }
            }
        }
        let mut out = Vec::with_capacity(template.len());
        for (k, piece) in template.iter().enumerate() {
            match piece {
                Piece::Sequence { seq, type_id } => {
                    let e = encodings.get_mut(*seq).ok_or_else(|| {
                        Error::other(
                            "TemplateProcessing: the single template uses `$B`, but there is no second sequence",
                        )
                    })?;
                    super::set_type_ids(e, *type_id);
                    e.set_sequence_id(*seq);
                    if last_use[*seq] == Some(k) {
                        out.push(std::mem::take(e));
                    } else {
                        out.push(e.clone());
                    }
                }
                Piece::Special { id, type_id } => {
                    if !add_special_tokens {
                        continue;
                    }
                    let tok = self.special_tokens.get(id).ok_or_else(|| {
                        Error::invalid(format!(
                            "TemplateProcessing: missing SpecialToken with id `{id}`"
                        ))
                    })?;
                    let n = tok.ids.len();
                    out.push(Encoding {
                        ids: tok.ids.clone(),
                        type_ids: vec![*type_id; n],
                        tokens: tok.tokens.clone(),
                        words: vec![None; n],
                        offsets: vec![(0, 0); n],
                        special_tokens_mask: vec![1; n],
                        attention_mask: vec![1; n],
                        ..Default::default()
                    });
                }
            }
        }
        Ok(out)
    }
}
