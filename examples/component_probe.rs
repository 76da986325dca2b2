//! Run one normalizer or pre-tokenizer on texts, for differential tests against the reference.
//!
//! stdin: first line `{"kind": "normalizer" | "pre_tokenizer", "config": {...}}`, then one JSON
//! string per line. stdout: one JSON line per text:
//! normalizer → `{"normalized": s, "offsets": [[start, end], ...]}` (for each normalized char,
//! the original range in code points, as token offsets would report it);
//! pre_tokenizer → `{"splits": [[piece, [start, end]], ...]}` (code point offsets);
//! a failure → `{"error": message}`.

use piecework::text::{ByteToCharOffsets, NormalizedString, PreTokenizedString};
use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn main() {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let head: Value = match lines.next() {
        Some(Ok(l)) => serde_json::from_str(&l).unwrap_or(Value::Null),
        _ => return,
    };
    let kind = head["kind"].as_str().unwrap_or("").to_owned();
    let cfg = &head["config"];
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let norm = if kind == "normalizer" {
        Some(piecework::normalizers::from_json(cfg))
    } else {
        None
    };
    let pre = if kind == "pre_tokenizer" {
        Some(piecework::pre_tokenizers::from_json(cfg))
    } else {
        None
    };
    for line in lines {
        let Ok(line) = line else { break };
        let text: String = serde_json::from_str(&line).unwrap_or_default();
        let conv = ByteToCharOffsets::new(&text);
        let to_chars = |o: (usize, usize)| conv.convert(o).unwrap_or(o);
        let v = match (&norm, &pre) {
            (Some(Err(e)), _) | (_, Some(Err(e))) => json!({"error": e.message}),
            (Some(Ok(n)), _) => {
                let mut ns = NormalizedString::from(text.as_str());
                match n.normalize(&mut ns) {
                    Err(e) => json!({"error": e.message}),
                    Ok(()) => {
                        let shift = ns.offsets_original().0;
                        let offs: Vec<(usize, usize)> = ns
                            .get()
                            .char_indices()
                            .map(|(b, c)| {
                                let r = ns
                                    .convert_normalized_range(b..b + c.len_utf8())
                                    .unwrap_or(b..b + c.len_utf8());
                                to_chars((shift + r.start, shift + r.end))
                            })
                            .collect();
                        json!({"normalized": ns.get(), "offsets": offs})
                    }
                }
            }
            (None, Some(Ok(p))) => {
                let mut pts =
                    PreTokenizedString::from_splits(vec![
                        NormalizedString::from(text.as_str()).into()
                    ]);
                match p.pre_tokenize(&mut pts) {
                    Err(e) => json!({"error": e.message}),
                    Ok(()) => {
                        let splits: Vec<Value> = pts
                            .splits
                            .iter()
                            .map(|s| {
                                json!([
                                    s.normalized.get(),
                                    to_chars(s.normalized.offsets_original())
                                ])
                            })
                            .collect();
                        json!({ "splits": splits })
                    }
                }
            }
            _ => json!({"error": format!("unknown kind {kind:?}")}),
        };
        let _ = writeln!(out, "{v}");
    }
}
