//! tokenizer.json → the pipeline. Each component parses its own object; this file reads the
//! top level, infers untyped models, and names the field on every error.

use crate::added_vocabulary::AddedToken;
use crate::encoding::{PaddingParams, TruncationParams};
use crate::error::{Error, Result, ResultExt};
use crate::models::{
    bpe::Bpe, unigram::Unigram, wordlevel::WordLevel, wordpiece::WordPiece, ModelWrapper,
};
use crate::tokenizer::{Core, Tokenizer};
use serde_json::Value;

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|x| !x.is_null())
}

/// The model's type: the `type` field, or inferred as the reference infers it.
pub fn model_type(m: &Value) -> Result<&'static str> {
    let obj = m
        .as_object()
        .ok_or_else(|| Error::invalid("model: expected an object"))?;
    if let Some(t) = obj.get("type") {
        return match t.as_str() {
            Some("BPE") => Ok("BPE"),
            Some("WordPiece") => Ok("WordPiece"),
            Some("WordLevel") => Ok("WordLevel"),
            Some("Unigram") => Ok("Unigram"),
            Some(other) => Err(Error::unsupported(format!(
                "model.type: model `{other}` is not supported"
            ))),
            None => Err(Error::invalid("model.type: expected a string")),
        };
    }
    let vocab = obj.get("vocab");
    let list_vocab = vocab.is_some_and(Value::is_array);
    if obj.contains_key("merges") {
        return Ok(if list_vocab { "Unigram" } else { "BPE" });
    }
    if list_vocab {
        return Ok("Unigram");
    }
    if vocab.is_some_and(Value::is_object) {
        let has = |k: &str| obj.contains_key(k);
        if has("unk_token") && has("continuing_subword_prefix") && has("max_input_chars_per_word") {
            return Ok("WordPiece");
        }
        if has("unk_token") {
            return Ok("WordLevel");
        }
    }
    Err(Error::invalid(
        "model: cannot tell the model type (no `type` field, and the fields fit no model)",
    ))
}

pub fn build_model(m: &Value) -> Result<ModelWrapper> {
    Ok(match model_type(m)? {
        "BPE" => ModelWrapper::Bpe(Box::new(Bpe::from_json(m).context("model")?)),
        "WordPiece" => ModelWrapper::WordPiece(WordPiece::from_json(m)?),
        "WordLevel" => ModelWrapper::WordLevel(WordLevel::from_json(m)?),
        _ => ModelWrapper::Unigram(Unigram::from_json(m)?),
    })
}

pub(crate) fn build(v: Value) -> Result<(Core, Option<PaddingParams>, Option<TruncationParams>)> {
    build_with_model(v, None)
}

/// `build`, with the model given already built (then the document's `model` is not read).
pub(crate) fn build_with_model(
    v: Value,
    model: Option<ModelWrapper>,
) -> Result<(Core, Option<PaddingParams>, Option<TruncationParams>)> {
    let obj = v
        .as_object()
        .ok_or_else(|| Error::invalid("tokenizer.json: expected a JSON object"))?;
    if let Some(ver) = obj.get("version") {
        if ver.as_str() != Some("1.0") {
            return Err(Error::invalid(format!(
                "version: unknown tokenizer version {ver}"
            )));
        }
    }
    let model = match model {
        Some(m) => m,
        None => build_model(
            obj.get("model")
                .ok_or_else(|| Error::invalid("model: missing"))?,
        )?,
    };
    let normalizer = present(obj.get("normalizer"))
        .map(|x| crate::normalizers::from_json(x).context("normalizer"))
        .transpose()?;
    let pre_tokenizer = present(obj.get("pre_tokenizer"))
        .map(|x| crate::pre_tokenizers::from_json(x).context("pre_tokenizer"))
        .transpose()?;
    let post_processor = present(obj.get("post_processor"))
        .map(|x| crate::processors::from_json(x).context("post_processor"))
        .transpose()?;
    let decoder = present(obj.get("decoder"))
        .map(|x| crate::decoders::from_json(x).context("decoder"))
        .transpose()?;
    let padding = present(obj.get("padding"))
        .map(|x| PaddingParams::from_json(x).context("padding"))
        .transpose()?;
    let truncation = present(obj.get("truncation"))
        .map(|x| TruncationParams::from_json(x).context("truncation"))
        .transpose()?;
    let mut added: Vec<AddedToken> = Vec::new();
    if let Some(list) = present(obj.get("added_tokens")) {
        let list = list
            .as_array()
            .ok_or_else(|| Error::invalid("added_tokens: expected a list"))?;
        for (i, t) in list.iter().enumerate() {
            added.push(AddedToken::from_json(t, &format!("added_tokens[{i}]"))?.1);
        }
    }
    let core = Tokenizer::new_core(
        normalizer,
        pre_tokenizer,
        model,
        post_processor,
        decoder,
        added,
        v,
    )?;
    Ok((core, padding, truncation))
}
