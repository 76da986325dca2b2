//! The result of encoding one input (or one pair), field for field what `tokenizers` returns.
//! Offsets are code point offsets into the original input.
//!
//! The operations here (merging a pair, truncating with a stride into overflowing parts,
//! padding) reproduce the reference's observable results exactly, including its corner cases:
//! which overflowing combinations a merge produces, that right padding leaves the sequence
//! ranges alone, and that truncation forgets them.

use crate::error::{Error, Result};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ops::Range;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    pub tokens: Vec<String>,
    pub words: Vec<Option<u32>>,
    pub offsets: Vec<(usize, usize)>,
    pub special_tokens_mask: Vec<u32>,
    pub attention_mask: Vec<u32>,
    pub overflowing: Vec<Encoding>,
    /// Which tokens belong to which input sequence (0 or 1); absent for a single sequence that
    /// never went through a post-processor.
    pub sequence_ranges: HashMap<usize, Range<usize>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Left,
    Right,
}

impl Direction {
    /// The spelling tokenizer.json uses ("Left" / "Right").
    fn from_json_name(v: &Value, field: &str) -> Result<Self> {
        match v.as_str() {
            Some("Left") => Ok(Direction::Left),
            Some("Right") => Ok(Direction::Right),
            _ => Err(Error::invalid(format!(
                "`{field}`: expected \"Left\" or \"Right\", got {v}"
            ))),
        }
    }
    fn json_name(self) -> &'static str {
        match self {
            Direction::Left => "Left",
            Direction::Right => "Right",
        }
    }
    /// The spelling the Python API uses ("left" / "right").
    pub fn from_python_name(s: &str) -> Option<Self> {
        match s {
            "left" => Some(Direction::Left),
            "right" => Some(Direction::Right),
            _ => None,
        }
    }
    pub fn python_name(self) -> &'static str {
        match self {
            Direction::Left => "left",
            Direction::Right => "right",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationStrategy {
    LongestFirst,
    OnlyFirst,
    OnlySecond,
}

impl TruncationStrategy {
    /// The spelling the Python API uses.
    pub fn python_name(self) -> &'static str {
        match self {
            TruncationStrategy::LongestFirst => "longest_first",
            TruncationStrategy::OnlyFirst => "only_first",
            TruncationStrategy::OnlySecond => "only_second",
        }
    }
    pub fn from_python_name(s: &str) -> Option<Self> {
        match s {
            "longest_first" => Some(TruncationStrategy::LongestFirst),
            "only_first" => Some(TruncationStrategy::OnlyFirst),
            "only_second" => Some(TruncationStrategy::OnlySecond),
            _ => None,
        }
    }
    fn json_name(self) -> &'static str {
        match self {
            TruncationStrategy::LongestFirst => "LongestFirst",
            TruncationStrategy::OnlyFirst => "OnlyFirst",
            TruncationStrategy::OnlySecond => "OnlySecond",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruncationParams {
    pub direction: Direction,
    pub max_length: usize,
    pub strategy: TruncationStrategy,
    pub stride: usize,
}

impl Default for TruncationParams {
    fn default() -> Self {
        TruncationParams {
            direction: Direction::Right,
            max_length: 512,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaddingStrategy {
    BatchLongest,
    Fixed(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaddingParams {
    pub strategy: PaddingStrategy,
    pub direction: Direction,
    pub pad_to_multiple_of: Option<usize>,
    pub pad_id: u32,
    pub pad_type_id: u32,
    pub pad_token: String,
}

impl Default for PaddingParams {
    fn default() -> Self {
        PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            direction: Direction::Right,
            pad_to_multiple_of: None,
            pad_id: 0,
            pad_type_id: 0,
            pad_token: "[PAD]".into(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json `truncation` / `padding` fields

fn required<'a>(v: &'a Value, field: &str, what: &str) -> Result<&'a Value> {
    v.get(field)
        .ok_or_else(|| Error::invalid(format!("{what}: missing field `{field}`")))
}

fn as_usize(v: &Value, field: &str, what: &str) -> Result<usize> {
    v.as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "{what}: `{field}` must be a non-negative integer, got {v}"
            ))
        })
}

fn as_u32(v: &Value, field: &str, what: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Error::invalid(format!("{what}: `{field}` must be a u32, got {v}")))
}

impl TruncationParams {
    /// Read the `truncation` object of a tokenizer.json (`direction` may be absent: Right).
    pub fn from_json(v: &Value) -> Result<Self> {
        const WHAT: &str = "truncation";
        if !v.is_object() {
            return Err(Error::invalid(format!(
                "{WHAT}: expected an object, got {v}"
            )));
        }
        let direction = match v.get("direction") {
            None => Direction::Right,
            Some(d) => Direction::from_json_name(d, "truncation.direction")?,
        };
        let max_length = as_usize(required(v, "max_length", WHAT)?, "max_length", WHAT)?;
        let strategy = match required(v, "strategy", WHAT)?.as_str() {
            Some("LongestFirst") => TruncationStrategy::LongestFirst,
            Some("OnlyFirst") => TruncationStrategy::OnlyFirst,
            Some("OnlySecond") => TruncationStrategy::OnlySecond,
            _ => {
                return Err(Error::invalid(format!(
                    "{WHAT}: `strategy` must be \"LongestFirst\", \"OnlyFirst\" or \"OnlySecond\", got {}",
                    v["strategy"]
                )))
            }
        };
        let stride = as_usize(required(v, "stride", WHAT)?, "stride", WHAT)?;
        Ok(TruncationParams {
            direction,
            max_length,
            strategy,
            stride,
        })
    }

    /// The object the reference writes (its field order).
    pub fn to_json(&self) -> Value {
        json!({
            "direction": self.direction.json_name(),
            "max_length": self.max_length,
            "strategy": self.strategy.json_name(),
            "stride": self.stride,
        })
    }
}

impl PaddingParams {
    /// Read the `padding` object of a tokenizer.json. Every field but `pad_to_multiple_of` is
    /// required, as in the reference.
    pub fn from_json(v: &Value) -> Result<Self> {
        const WHAT: &str = "padding";
        if !v.is_object() {
            return Err(Error::invalid(format!(
                "{WHAT}: expected an object, got {v}"
            )));
        }
        let s = required(v, "strategy", WHAT)?;
        let strategy = match s {
            Value::String(name) if name == "BatchLongest" => PaddingStrategy::BatchLongest,
            Value::Object(map) if map.len() == 1 && map.contains_key("Fixed") => {
                PaddingStrategy::Fixed(as_usize(&map["Fixed"], "strategy.Fixed", WHAT)?)
            }
            other => {
                return Err(Error::invalid(format!(
                    "{WHAT}: `strategy` must be \"BatchLongest\" or {{\"Fixed\": n}}, got {other}"
                )))
            }
        };
        let direction =
            Direction::from_json_name(required(v, "direction", WHAT)?, "padding.direction")?;
        let pad_to_multiple_of = match v.get("pad_to_multiple_of") {
            None | Some(Value::Null) => None,
            Some(n) => Some(as_usize(n, "pad_to_multiple_of", WHAT)?),
        };
        let pad_id = as_u32(required(v, "pad_id", WHAT)?, "pad_id", WHAT)?;
        let pad_type_id = as_u32(required(v, "pad_type_id", WHAT)?, "pad_type_id", WHAT)?;
        let pad_token = required(v, "pad_token", WHAT)?
            .as_str()
            .ok_or_else(|| Error::invalid(format!("{WHAT}: `pad_token` must be a string")))?
            .to_owned();
        Ok(PaddingParams {
            strategy,
            direction,
            pad_to_multiple_of,
            pad_id,
            pad_type_id,
            pad_token,
        })
    }

    /// The object the reference writes (its field order).
    pub fn to_json(&self) -> Value {
        let strategy = match self.strategy {
            PaddingStrategy::BatchLongest => json!("BatchLongest"),
            PaddingStrategy::Fixed(n) => json!({ "Fixed": n }),
        };
        json!({
            "strategy": strategy,
            "direction": self.direction.json_name(),
            "pad_to_multiple_of": self.pad_to_multiple_of,
            "pad_id": self.pad_id,
            "pad_type_id": self.pad_type_id,
            "pad_token": self.pad_token,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

impl Encoding {
    pub fn with_capacity(n: usize) -> Self {
        Encoding {
            ids: Vec::with_capacity(n),
            type_ids: Vec::with_capacity(n),
            tokens: Vec::with_capacity(n),
            words: Vec::with_capacity(n),
            offsets: Vec::with_capacity(n),
            special_tokens_mask: Vec::with_capacity(n),
            attention_mask: Vec::with_capacity(n),
            overflowing: Vec::new(),
            sequence_ranges: HashMap::new(),
        }
    }

    /// An encoding of `ids` whose other fields are placeholders of the same length: type id
    /// 0, not special, attended, empty token strings (no allocation), offsets (0, 0), no
    /// word. Truncation, post-processors and padding only move fields around, insert special
    /// tokens and set type ids from lengths and ids, so running them on this gives the real
    /// ids, type ids, masks, sequence ranges and overflowing layout without building any
    /// token string or offset. (The ByteLevel and Roberta processors read token strings, but
    /// only to trim offsets.)
    pub fn placeholders(ids: Vec<u32>) -> Self {
        let n = ids.len();
        Encoding {
            ids,
            type_ids: vec![0; n],
            tokens: vec![String::new(); n],
            words: vec![None; n],
            offsets: vec![(0, 0); n],
            special_tokens_mask: vec![0; n],
            attention_mask: vec![1; n],
            ..Encoding::default()
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// How many input sequences this encoding holds (1 when nothing says otherwise).
    pub fn n_sequences(&self) -> usize {
        if self.sequence_ranges.is_empty() {
            1
        } else {
            self.sequence_ranges.len()
        }
    }

    /// Mark every token as belonging to sequence `sequence_id`.
    pub fn set_sequence_id(&mut self, sequence_id: usize) {
        self.sequence_ranges.insert(sequence_id, 0..self.len());
    }

    /// The token range of one sequence; the whole encoding when it is not recorded.
    fn sequence_range(&self, sequence_id: usize) -> Range<usize> {
        self.sequence_ranges
            .get(&sequence_id)
            .cloned()
            .unwrap_or(0..self.len())
    }

    pub fn word_ids(&self) -> &[Option<u32>] {
        &self.words
    }

    /// For each token, the sequence it belongs to (None for special tokens between them).
    pub fn sequence_ids(&self) -> Vec<Option<usize>> {
        let len = self.len();
        let mut out = vec![None; len];
        for seq in 0..self.n_sequences() {
            let r = self.sequence_range(seq);
            let (s, e) = (r.start.min(len), r.end.min(len));
            if s < e {
                out[s..e].iter_mut().for_each(|x| *x = Some(seq));
            }
        }
        out
    }

    /// The sequence holding token `token`. As in the reference, `token == len()` still answers
    /// `Some(0)` for an encoding without recorded sequences.
    pub fn token_to_sequence(&self, token: usize) -> Option<usize> {
        if token > self.len() {
            None
        } else if self.sequence_ranges.is_empty() {
            Some(0)
        } else {
            // Ranges never overlap, so the first hit is the only one; pick the smallest id for
            // determinism anyway.
            self.sequence_ranges
                .iter()
                .filter(|(_, r)| r.contains(&token))
                .map(|(id, _)| *id)
                .min()
        }
    }

    /// The tokens `[start, end)` of word `word` in sequence `sequence_id`.
    pub fn word_to_tokens(&self, word: u32, sequence_id: usize) -> Option<(usize, usize)> {
        let r = self.sequence_range(sequence_id);
        let words = self.words.get(r.clone())?;
        let (mut start, mut end) = (None::<usize>, None::<usize>);
        // Words are non-decreasing, so the scan stops at the first larger word (None sorts
        // before every word and never stops it).
        for (i, w) in words.iter().enumerate() {
            if *w > Some(word) {
                break;
            }
            if *w == Some(word) {
                // Indices only grow: the first hit starts the span, the last one ends it.
                start.get_or_insert(i);
                end = Some(i + 1);
            }
        }
        Some((r.start + start?, r.start + end?))
    }

    /// The character span of word `word` in sequence `sequence_id`.
    pub fn word_to_chars(&self, word: u32, sequence_id: usize) -> Option<(usize, usize)> {
        let (start, end) = self.word_to_tokens(word, sequence_id)?;
        if end == 0 {
            return None;
        }
        Some((self.offsets.get(start)?.0, self.offsets.get(end - 1)?.1))
    }

    /// `(sequence, offsets)` of token `token`.
    pub fn token_to_chars(&self, token: usize) -> Option<(usize, (usize, usize))> {
        Some((self.token_to_sequence(token)?, *self.offsets.get(token)?))
    }

    /// `(sequence, word)` of token `token`.
    pub fn token_to_word(&self, token: usize) -> Option<(usize, u32)> {
        Some((self.token_to_sequence(token)?, (*self.words.get(token)?)?))
    }

    /// The first token of sequence `sequence_id` whose span contains character `pos`.
    pub fn char_to_token(&self, pos: usize, sequence_id: usize) -> Option<usize> {
        let r = self.sequence_range(sequence_id);
        self.offsets
            .get(r.clone())?
            .iter()
            .position(|&(s, e)| pos >= s && pos < e)
            .map(|i| r.start + i)
    }

    pub fn char_to_word(&self, pos: usize, sequence_id: usize) -> Option<u32> {
        let t = self.char_to_token(pos, sequence_id)?;
        Some(self.token_to_word(t)?.1)
    }

    /// A copy of tokens `[start, stop)` without overflowing parts or sequence ranges.
    fn slice(&self, start: usize, stop: usize) -> Encoding {
        Encoding {
            ids: self.ids[start..stop].to_vec(),
            type_ids: self.type_ids[start..stop].to_vec(),
            tokens: self.tokens[start..stop].to_vec(),
            words: self.words[start..stop].to_vec(),
            offsets: self.offsets[start..stop].to_vec(),
            special_tokens_mask: self.special_tokens_mask[start..stop].to_vec(),
            attention_mask: self.attention_mask[start..stop].to_vec(),
            overflowing: Vec::new(),
            sequence_ranges: HashMap::new(),
        }
    }

    fn check_lengths(&self) -> Result<()> {
        let n = self.ids.len();
        if self.type_ids.len() != n
            || self.tokens.len() != n
            || self.words.len() != n
            || self.offsets.len() != n
            || self.special_tokens_mask.len() != n
            || self.attention_mask.len() != n
        {
            return Err(Error::other("encoding fields have different lengths"));
        }
        Ok(())
    }

    /// Keep at most `max_len` tokens; what is cut goes to `overflowing` in windows of
    /// `max_len` tokens that overlap by `stride`. The windows advance from the kept side
    /// (from the start for Right, from the end for Left). Any previous overflowing parts and
    /// the sequence ranges are dropped, as in the reference. `max_len == 0` moves everything
    /// (with its overflowing parts) into one overflowing entry.
    pub fn truncate(&mut self, max_len: usize, stride: usize, direction: Direction) -> Result<()> {
        let len = self.len();
        if max_len >= len {
            return Ok(());
        }
        if max_len == 0 {
            let all = std::mem::take(self);
            self.overflowing.push(all);
            return Ok(());
        }
        if stride >= max_len {
            return Err(Error::other(format!(
                "`stride` must be strictly less than `max_len={max_len}` (note that `max_len` may be shorter than the max length of the original model, as it subtracts the number of special characters"
            )));
        }
        self.check_lengths()?;
        let step = max_len - stride;
        let mut parts: Vec<(usize, usize)> = Vec::new();
        match direction {
            Direction::Right => {
                let mut start = 0;
                loop {
                    let stop = (start + max_len).min(len);
                    parts.push((start, stop));
                    if stop == len {
                        break;
                    }
                    start += step;
                }
            }
            Direction::Left => {
                // Window ends walk down from `len` by `step`; the last window reaches 0.
                let mut stop = len;
                loop {
                    let start = stop.saturating_sub(max_len);
                    parts.push((start, stop));
                    if start == 0 || stop <= step {
                        break;
                    }
                    stop -= step;
                }
            }
        }
        let mut first = self.slice(parts[0].0, parts[0].1);
        first.overflowing = parts[1..].iter().map(|&(s, e)| self.slice(s, e)).collect();
        *self = first;
        Ok(())
    }

    /// Append `pair` to this encoding. Overflowing parts combine as in the reference: each of
    /// ours with the pair and with each of the pair's, then ours with each of the pair's.
    /// With `growing_offsets`, the pair's offsets are shifted past our last offset.
    pub fn merge_with(&mut self, pair: Encoding, growing_offsets: bool) {
        let mut overflowings = Vec::new();
        for mine in &self.overflowing {
            let mut e = mine.clone();
            e.merge_with(pair.clone(), growing_offsets);
            overflowings.push(e);
            for theirs in &pair.overflowing {
                let mut e = mine.clone();
                e.merge_with(theirs.clone(), growing_offsets);
                overflowings.push(e);
            }
        }
        for theirs in &pair.overflowing {
            let mut e = self.clone();
            e.merge_with(theirs.clone(), growing_offsets);
            overflowings.push(e);
        }

        let base = self.len();
        for (id, r) in pair.sequence_ranges {
            self.sequence_ranges
                .insert(id, base + r.start..base + r.end);
        }
        let shift = if growing_offsets {
            self.offsets.last().map_or(0, |o| o.1)
        } else {
            0
        };
        self.ids.extend(pair.ids);
        self.type_ids.extend(pair.type_ids);
        self.tokens.extend(pair.tokens);
        self.words.extend(pair.words);
        self.offsets.extend(
            pair.offsets
                .into_iter()
                .map(|(s, e)| (s + shift, e + shift)),
        );
        self.special_tokens_mask.extend(pair.special_tokens_mask);
        self.attention_mask.extend(pair.attention_mask);
        self.overflowing = overflowings;
    }

    /// Merge several encodings, left to right, into a new one.
    pub fn merge(encodings: impl IntoIterator<Item = Encoding>, growing_offsets: bool) -> Self {
        let encodings: Vec<Encoding> = encodings.into_iter().collect();
        // Room for every token up front: one allocation per field instead of regrowths.
        let mut out = Encoding::with_capacity(encodings.iter().map(Encoding::len).sum());
        for e in encodings {
            out.merge_with(e, growing_offsets);
        }
        out
    }

    /// Pad to `target_length` (overflowing parts too). Pad tokens are special, unattended,
    /// wordless and have (0, 0) offsets. Left padding shifts the sequence ranges; right
    /// padding leaves them as they are.
    pub fn pad(
        &mut self,
        target_length: usize,
        pad_id: u32,
        pad_type_id: u32,
        pad_token: &str,
        direction: Direction,
    ) {
        for o in &mut self.overflowing {
            o.pad(target_length, pad_id, pad_type_id, pad_token, direction);
        }
        let len = self.len();
        if len >= target_length {
            return;
        }
        let n = target_length - len;
        let left = direction == Direction::Left;
        grow(&mut self.ids, n, pad_id, left);
        grow(&mut self.type_ids, n, pad_type_id, left);
        grow(&mut self.tokens, n, pad_token.to_owned(), left);
        grow(&mut self.words, n, None, left);
        grow(&mut self.attention_mask, n, 0, left);
        grow(&mut self.special_tokens_mask, n, 1, left);
        grow(&mut self.offsets, n, (0, 0), left);
        if left {
            for r in self.sequence_ranges.values_mut() {
                *r = r.start + n..r.end + n;
            }
        }
    }
}

/// `n` copies of `x` before (`left`) or after the items of `v`.
fn grow<T: Clone>(v: &mut Vec<T>, n: usize, x: T, left: bool) {
    if left {
        v.splice(0..0, std::iter::repeat_n(x, n));
    } else {
        v.extend(std::iter::repeat_n(x, n));
    }
}

/// The ids `Encoding::pad(target_length, pad_id, .., direction)` leaves, padded in place
/// (the same growth as `pad` applies to its `ids`).
pub fn pad_ids(ids: &mut Vec<u32>, target_length: usize, pad_id: u32, direction: Direction) {
    if let Some(n) = target_length.checked_sub(ids.len()).filter(|&n| n > 0) {
        grow(ids, n, pad_id, direction == Direction::Left);
    }
}

impl PaddingParams {
    /// The length `pad_encodings` pads a batch to when its longest encoding has `longest`
    /// tokens.
    pub fn target(&self, longest: usize) -> usize {
        let mut target = match self.strategy {
            PaddingStrategy::Fixed(n) => n,
            PaddingStrategy::BatchLongest => longest,
        };
        if let Some(m) = self.pad_to_multiple_of {
            if m > 0 && target % m > 0 {
                target += m - target % m;
            }
        }
        target
    }
}

/// Truncate a single encoding or a pair so that together they fit `params.max_length`.
pub fn truncate_encodings(
    mut encoding: Encoding,
    mut pair: Option<Encoding>,
    params: &TruncationParams,
) -> Result<(Encoding, Option<Encoding>)> {
    let (stride, dir) = (params.stride, params.direction);
    if params.max_length == 0 {
        encoding.truncate(0, stride, dir)?;
        if let Some(p) = pair.as_mut() {
            p.truncate(0, stride, dir)?;
        }
        return Ok((encoding, pair));
    }
    let total = encoding.len() + pair.as_ref().map_or(0, Encoding::len);
    if total <= params.max_length {
        return Ok((encoding, pair));
    }
    let to_remove = total - params.max_length;
    match params.strategy {
        TruncationStrategy::LongestFirst => match pair.as_mut() {
            Some(p) => {
                let max = params.max_length;
                let (mut n1, mut n2) = (encoding.len(), p.len());
                let swapped = n1 > n2;
                if swapped {
                    std::mem::swap(&mut n1, &mut n2);
                }
                // n1 is the shorter one: keep it whole if the longer one can take the cut,
                // otherwise split the budget in two halves (the odd token to the longer).
                n2 = if n1 > max { n1 } else { n1.max(max - n1) };
                if n1 + n2 > max {
                    n1 = max / 2;
                    n2 = n1 + max % 2;
                }
                if swapped {
                    std::mem::swap(&mut n1, &mut n2);
                }
                encoding.truncate(n1, stride, dir)?;
                p.truncate(n2, stride, dir)?;
            }
            None => encoding.truncate(total - to_remove, stride, dir)?,
        },
        TruncationStrategy::OnlyFirst | TruncationStrategy::OnlySecond => {
            let target = if params.strategy == TruncationStrategy::OnlyFirst {
                &mut encoding
            } else {
                pair.as_mut()
                    .ok_or_else(|| Error::other("Truncation error: Second sequence not provided"))?
            };
            let n = target.len();
            if n > to_remove {
                target.truncate(n - to_remove, stride, dir)?;
            } else {
                return Err(Error::other(
                    "Truncation error: Sequence to truncate too short to respect the provided max_length",
                ));
            }
        }
    }
    Ok((encoding, pair))
}

/// Pad a batch: to the longest (or a fixed length), rounded up to `pad_to_multiple_of`.
pub fn pad_encodings(encodings: &mut [Encoding], params: &PaddingParams) -> Result<()> {
    let Some(longest) = encodings.iter().map(Encoding::len).max() else {
        return Ok(());
    };
    let target = params.target(longest);
    for e in encodings.iter_mut() {
        e.pad(
            target,
            params.pad_id,
            params.pad_type_id,
            &params.pad_token,
            params.direction,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per letter of `s`, word i, offsets (i, i+1), type id `ty`.
    pub(crate) fn letters(s: &str, ty: u32) -> Encoding {
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

    fn text(e: &Encoding) -> String {
        e.tokens.concat()
    }

    #[test]
    fn truncate_right_windows_overlap_by_stride() {
        // 7 tokens, windows of 3 advancing by 3 - 1 = 2 from the start: abc, cde, efg.
        let mut e = letters("abcdefg", 0);
        e.truncate(3, 1, Direction::Right).unwrap();
        assert_eq!(text(&e), "abc");
        let over: Vec<_> = e.overflowing.iter().map(text).collect();
        assert_eq!(over, ["cde", "efg"]);
        assert_eq!(e.overflowing[1].offsets, [(4, 5), (5, 6), (6, 7)]);
    }

    #[test]
    fn truncate_left_keeps_the_end_and_walks_back() {
        let mut e = letters("abcdefg", 0);
        e.truncate(3, 1, Direction::Left).unwrap();
        assert_eq!(text(&e), "efg");
        let over: Vec<_> = e.overflowing.iter().map(text).collect();
        assert_eq!(over, ["cde", "abc"]);
        // Without stride the last window is short: the first tokens left over.
        let mut e = letters("abcdefg", 0);
        e.truncate(3, 0, Direction::Left).unwrap();
        let over: Vec<_> = e.overflowing.iter().map(text).collect();
        assert_eq!(
            (text(&e).as_str(), over),
            ("efg", vec!["bcd".to_string(), "a".into()])
        );
    }

    #[test]
    fn truncate_forgets_sequence_ranges_and_old_overflowing() {
        let mut e = letters("abcd", 0);
        e.set_sequence_id(0);
        e.overflowing.push(letters("z", 0));
        e.truncate(2, 0, Direction::Right).unwrap();
        assert!(e.sequence_ranges.is_empty());
        assert_eq!(e.overflowing.len(), 1);
        assert_eq!(text(&e.overflowing[0]), "cd");
    }

    #[test]
    fn truncate_noop_and_zero() {
        let mut e = letters("ab", 0);
        e.set_sequence_id(0);
        let before = e.clone();
        e.truncate(2, 5, Direction::Right).unwrap(); // long enough: stride not even checked
        assert_eq!(e, before);
        e.truncate(0, 0, Direction::Right).unwrap();
        assert!(e.is_empty());
        assert_eq!(e.overflowing, vec![before]);
    }

    #[test]
    fn truncate_stride_too_large_is_an_error() {
        let mut e = letters("abcdef", 0);
        let err = e.truncate(2, 2, Direction::Right).unwrap_err();
        assert!(err
            .message
            .contains("`stride` must be strictly less than `max_len=2`"));
    }

    #[test]
    fn merge_shifts_ranges_and_optionally_offsets() {
        let mut a = letters("ab", 0);
        a.set_sequence_id(0);
        let mut b = letters("cde", 1);
        b.set_sequence_id(1);
        let mut grown = a.clone();
        grown.merge_with(b.clone(), true);
        assert_eq!(grown.offsets[2..], [(2, 3), (3, 4), (4, 5)]);
        a.merge_with(b, false);
        assert_eq!(a.offsets[2..], [(0, 1), (1, 2), (2, 3)]);
        assert_eq!(a.sequence_ranges[&1], 2..5);
        assert_eq!(
            a.sequence_ids(),
            [Some(0), Some(0), Some(1), Some(1), Some(1)]
        );
        assert_eq!(a.type_ids, [0, 0, 1, 1, 1]);
        assert_eq!(a.n_sequences(), 2);
    }

    #[test]
    fn merge_combines_overflowing_parts() {
        // Ours (a | a2) with theirs (b | b2): a2+b (which itself overflows into a2+b2),
        // a2+b2, then a+b2.
        let mut a = letters("a", 0);
        a.overflowing.push(letters("x", 0));
        let mut b = letters("b", 1);
        b.overflowing.push(letters("y", 1));
        a.merge_with(b, false);
        assert_eq!(text(&a), "ab");
        let over: Vec<_> = a.overflowing.iter().map(text).collect();
        assert_eq!(over, ["xb", "xy", "ay"]);
        assert_eq!(a.overflowing[0].overflowing.len(), 1);
        assert_eq!(text(&a.overflowing[0].overflowing[0]), "xy");
        assert!(a.overflowing[1].overflowing.is_empty());
    }

    #[test]
    fn pad_right_and_left() {
        let mut e = letters("ab", 0);
        e.set_sequence_id(0);
        e.overflowing.push(letters("c", 0));
        let mut r = e.clone();
        r.pad(4, 9, 2, "[PAD]", Direction::Right);
        assert_eq!(r.ids[2..], [9, 9]);
        assert_eq!(r.type_ids, [0, 0, 2, 2]);
        assert_eq!(r.attention_mask, [1, 1, 0, 0]);
        assert_eq!(r.special_tokens_mask, [0, 0, 1, 1]);
        assert_eq!(r.words[2..], [None, None]);
        assert_eq!(r.offsets[2..], [(0, 0), (0, 0)]);
        assert_eq!(r.sequence_ranges[&0], 0..2);
        assert_eq!(r.overflowing[0].len(), 4);
        let mut l = e.clone();
        l.pad(4, 9, 2, "[PAD]", Direction::Left);
        assert_eq!(l.tokens, ["[PAD]", "[PAD]", "a", "b"]);
        assert_eq!(l.sequence_ranges[&0], 2..4);
        assert_eq!(l.sequence_ids(), [None, None, Some(0), Some(0)]);
        let mut short = e.clone();
        short.pad(1, 9, 2, "[PAD]", Direction::Left);
        assert_eq!(short.len(), 2);
    }

    #[test]
    fn pad_batch_longest_and_multiple() {
        let mut batch = vec![letters("abcde", 0), letters("ab", 0)];
        let mut p = PaddingParams {
            pad_to_multiple_of: Some(4),
            ..Default::default()
        };
        pad_encodings(&mut batch, &p).unwrap();
        assert!(batch.iter().all(|e| e.len() == 8));
        p.strategy = PaddingStrategy::Fixed(3);
        p.pad_to_multiple_of = Some(0);
        let mut batch = vec![letters("ab", 0)];
        pad_encodings(&mut batch, &p).unwrap();
        assert_eq!(batch[0].len(), 3);
        pad_encodings(&mut [], &p).unwrap();
    }

    fn lens(first: usize, second: usize, max: usize) -> (usize, usize) {
        let params = TruncationParams {
            max_length: max,
            ..Default::default()
        };
        let a = letters(&"a".repeat(first), 0);
        let b = letters(&"b".repeat(second), 1);
        let (a, b) = truncate_encodings(a, Some(b), &params).unwrap();
        (a.len(), b.unwrap().len())
    }

    #[test]
    fn longest_first_cuts_the_longer_then_halves() {
        assert_eq!(lens(2, 8, 7), (2, 5)); // the short one fits whole
        assert_eq!(lens(8, 2, 7), (5, 2));
        assert_eq!(lens(4, 4, 7), (3, 4)); // both cut: odd token to the second
        assert_eq!(lens(8, 4, 7), (4, 3)); // ... to the longer one
        assert_eq!(lens(9, 9, 0), (0, 0));
        assert_eq!(lens(3, 3, 7), (3, 3));
    }

    #[test]
    fn only_first_only_second_and_errors() {
        let params = TruncationParams {
            max_length: 5,
            strategy: TruncationStrategy::OnlySecond,
            ..Default::default()
        };
        let (a, b) =
            truncate_encodings(letters("abc", 0), Some(letters("defgh", 1)), &params).unwrap();
        assert_eq!((a.len(), b.as_ref().map(Encoding::len)), (3, Some(2)));
        // The cut part comes back in windows of the kept length: fg, h.
        let over: Vec<_> = b.unwrap().overflowing.iter().map(text).collect();
        assert_eq!(over, ["fg", "h"]);
        let err = truncate_encodings(letters("abcdef", 0), None, &params).unwrap_err();
        assert_eq!(
            err.message,
            "Truncation error: Second sequence not provided"
        );
        let err =
            truncate_encodings(letters("abcde", 0), Some(letters("fg", 1)), &params).unwrap_err();
        assert!(err.message.contains("too short"));
        let only_first = TruncationParams {
            strategy: TruncationStrategy::OnlyFirst,
            ..params
        };
        let (a, _) =
            truncate_encodings(letters("abcdef", 0), Some(letters("gh", 1)), &only_first).unwrap();
        assert_eq!(text(&a), "abc");
    }

    #[test]
    fn lookups() {
        let mut a = letters("ab", 0);
        a.words = vec![Some(0), Some(0)];
        let mut b = letters("cde", 1);
        b.words = vec![Some(0), None, Some(1)];
        a.set_sequence_id(0);
        b.set_sequence_id(1);
        a.merge_with(b, false);
        assert_eq!(a.word_to_tokens(0, 0), Some((0, 2)));
        assert_eq!(a.word_to_tokens(1, 1), Some((4, 5)));
        assert_eq!(a.word_to_tokens(5, 0), None);
        assert_eq!(a.word_to_chars(0, 0), Some((0, 2)));
        assert_eq!(a.char_to_token(1, 1), Some(3));
        assert_eq!(a.char_to_token(1, 0), Some(1));
        assert_eq!(a.char_to_token(7, 0), None);
        assert_eq!(a.token_to_sequence(3), Some(1));
        assert_eq!(a.token_to_word(3), None);
        assert_eq!(a.token_to_word(4), Some((1, 1)));
        assert_eq!(a.token_to_chars(2), Some((1, (0, 1))));
        assert_eq!(a.char_to_word(2, 1), Some(1));
        let single = letters("ab", 0);
        assert_eq!(single.token_to_sequence(2), Some(0));
        assert_eq!(single.token_to_sequence(3), None);
        assert_eq!(single.sequence_ids(), [Some(0), Some(0)]);
    }

    #[test]
    fn params_json_round_trip_and_errors() {
        let t = serde_json::json!({"max_length": 8, "strategy": "OnlySecond", "stride": 2});
        let p = TruncationParams::from_json(&t).unwrap();
        assert_eq!(p.direction, Direction::Right);
        assert_eq!(p.strategy, TruncationStrategy::OnlySecond);
        assert_eq!(TruncationParams::from_json(&p.to_json()).unwrap(), p);
        assert!(TruncationParams::from_json(
            &serde_json::json!({"max_length": 8, "strategy": "LongestFirst"})
        )
        .unwrap_err()
        .message
        .contains("stride"));
        let pad = serde_json::json!({"strategy": {"Fixed": 16}, "direction": "Left",
            "pad_id": 1, "pad_type_id": 0, "pad_token": "<pad>"});
        let p = PaddingParams::from_json(&pad).unwrap();
        assert_eq!(p.strategy, PaddingStrategy::Fixed(16));
        assert_eq!(p.pad_to_multiple_of, None);
        assert_eq!(PaddingParams::from_json(&p.to_json()).unwrap(), p);
        assert_eq!(p.to_json()["strategy"], serde_json::json!({"Fixed": 16}));
        assert_eq!(
            PaddingParams::default().to_json()["strategy"],
            "BatchLongest"
        );
        let bad = serde_json::json!({"strategy": "Longest", "direction": "Left",
            "pad_id": 1, "pad_type_id": 0, "pad_token": "<pad>"});
        assert!(PaddingParams::from_json(&bad)
            .unwrap_err()
            .message
            .contains("strategy"));
    }
}
