//! Differential-testing helper: runs the WordPiece / WordLevel / Unigram models (and the
//! vocab.txt reader) on requests read as JSON lines from a file, printing one JSON line per
//! request. Used by `tests/model_probe_diff.py` before the Python binding exists.
//!
//! Requests: `{"model": {...}}` or `{"model_file": "tokenizer.json"}` sets the model;
//! `{"text": "..."}` tokenizes with it → `{"ok": [[id, token, start, end], ...]}` or
//! `{"err": "InvalidData"}`; `{"vocab_txt": path, "lowercase": b|null, "strip_accents": b|null}`
//! → `{"ok": document}`; model info is printed after each model as `{"size": n}`.

use piecework::models::{unigram::Unigram, wordlevel::WordLevel, wordpiece::WordPiece, Model};
use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn build(v: &Value) -> piecework::Result<Box<dyn Model>> {
    let ty = v.get("type").and_then(Value::as_str);
    let has = |k: &str| v.get(k).is_some();
    Ok(match ty {
        Some("WordPiece") => Box::new(WordPiece::from_json(v)?),
        Some("WordLevel") => Box::new(WordLevel::from_json(v)?),
        Some("Unigram") => Box::new(Unigram::from_json(v)?),
        _ if v.get("vocab").is_some_and(Value::is_array) => Box::new(Unigram::from_json(v)?),
        _ if has("continuing_subword_prefix") => Box::new(WordPiece::from_json(v)?),
        _ => Box::new(WordLevel::from_json(v)?),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: model_probe REQUESTS.jsonl")?;
    let input = std::io::BufReader::new(std::fs::File::open(path)?);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut model: Option<Box<dyn Model>> = None;
    let mut toks = Vec::new();
    for line in input.lines() {
        let req: Value = serde_json::from_str(&line?)?;
        let resp = if let Some(m) = req.get("model").cloned().or_else(|| {
            let p = req.get("model_file")?.as_str()?;
            let doc: Value = serde_json::from_slice(&std::fs::read(p).ok()?).ok()?;
            doc.get("model").cloned()
        }) {
            match build(&m) {
                Ok(m) => {
                    let r = json!({"size": m.vocab_size()});
                    model = Some(m);
                    r
                }
                Err(e) => {
                    model = None;
                    json!({"err": format!("{:?}", e.kind), "msg": e.message})
                }
            }
        } else if let Some(text) = req.get("text").and_then(Value::as_str) {
            let Some(m) = model.as_ref() else {
                serde_json::to_writer(&mut out, &json!({"err": "no model"}))?;
                out.write_all(b"\n")?;
                continue;
            };
            toks.clear();
            match m.tokenize(text, &mut toks) {
                Ok(()) => {
                    let rows: Vec<Value> = toks
                        .iter()
                        .map(|t| {
                            let s = t
                                .value
                                .as_deref()
                                .or_else(|| m.id_to_token(t.id))
                                .unwrap_or("<no token>");
                            json!([t.id, s, t.offsets.0, t.offsets.1])
                        })
                        .collect();
                    json!({ "ok": rows })
                }
                Err(e) => json!({"err": format!("{:?}", e.kind), "msg": e.message}),
            }
        } else if let Some(p) = req.get("bench").and_then(Value::as_str) {
            // Time the current model over the whitespace-separated words of a file.
            let text = std::fs::read_to_string(p)?;
            let prefix = req.get("prefix").and_then(Value::as_str).unwrap_or("");
            let words: Vec<String> = text
                .split_whitespace()
                .map(|w| format!("{prefix}{w}"))
                .collect();
            let m = model.as_ref().ok_or("no model")?;
            let t0 = std::time::Instant::now();
            let mut n_tok = 0usize;
            for w in &words {
                toks.clear();
                let _ = m.tokenize(w, &mut toks);
                n_tok += toks.len();
            }
            let dt = t0.elapsed().as_secs_f64();
            json!({"words": words.len(), "tokens": n_tok, "seconds": dt,
                   "bytes_per_second": text.len() as f64 / dt})
        } else if let Some(p) = req.get("vocab_txt").and_then(Value::as_str) {
            let bytes = std::fs::read(p)?;
            let lc = req.get("lowercase").and_then(Value::as_bool);
            let sa = req.get("strip_accents").and_then(Value::as_bool);
            match piecework::formats::vocab_txt::bert_tokenizer_json(&bytes, lc, sa) {
                Ok(doc) => json!({ "ok": doc }),
                Err(e) => json!({"err": format!("{:?}", e.kind), "msg": e.message}),
            }
        } else {
            json!({"err": "bad request"})
        };
        serde_json::to_writer(&mut out, &resp)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
