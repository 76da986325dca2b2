//! A small driver for differential checks of the BPE models against the Python oracles
//! (see tests/test_bpe.py and the helper scripts): reads JSON strings, one per line, on stdin
//! and writes, per line, the JSON list of `[id, start, end]` (byte offsets).
//!
//! Usage:
//!   bpe_probe hf <tokenizer.json>            model-level tokens of each word
//!   bpe_probe sp <pieces.json>               sentencepiece BPE of each normalized string;
//!                                            pieces.json = {"pieces": [[piece, score, type]],
//!                                            "unk_id": n, "byte_fallback": bool}
//!   bpe_probe bl                             ByteLevel pre-tokenizer splits of each text
//!                                            (add_prefix_space=false): `[[piece, start, end]]`

use piecework::byte_level::ByteLevel;
use piecework::models::{bpe::Bpe, Model, Token};
use piecework::pre_tokenizers::PreTokenizer;
use piecework::sentencepiece::bpe::SpBpe;
use piecework::sentencepiece::vocab::{PieceEntry, PieceType, Segmenter, SpPiece};
use piecework::text::{NormalizedString, PreTokenizedString};
use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    match mode {
        "hf" => {
            let path = args.get(2).ok_or("missing tokenizer.json")?;
            let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
            let bpe = Bpe::from_json(&v["model"])?;
            let mut toks: Vec<Token> = Vec::new();
            for line in stdin.lock().lines() {
                let word: String = serde_json::from_str(&line?)?;
                toks.clear();
                let r = match bpe.tokenize(&word, &mut toks) {
                    Ok(()) => json!(toks
                        .iter()
                        .map(|t| json!([t.id, t.offsets.0, t.offsets.1]))
                        .collect::<Vec<_>>()),
                    Err(e) => json!({"error": e.message}),
                };
                writeln!(out, "{r}")?;
            }
        }
        "sp" => {
            let path = args.get(2).ok_or("missing pieces.json")?;
            let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
            let pieces: Vec<PieceEntry> = v["pieces"]
                .as_array()
                .ok_or("pieces")?
                .iter()
                .map(|p| PieceEntry {
                    piece: p[0].as_str().unwrap_or("").to_owned(),
                    score: p[1].as_f64().unwrap_or(0.0) as f32,
                    kind: match p[2].as_i64().unwrap_or(1) {
                        2 => PieceType::Unknown,
                        3 => PieceType::Control,
                        4 => PieceType::UserDefined,
                        5 => PieceType::Unused,
                        6 => PieceType::Byte,
                        _ => PieceType::Normal,
                    },
                })
                .collect();
            let t = std::time::Instant::now();
            let m = SpBpe::new(
                &pieces,
                v["unk_id"].as_u64().unwrap_or(0) as u32,
                v["byte_fallback"].as_bool().unwrap_or(false),
            )?;
            eprintln!("built in {:?}", t.elapsed());
            let mut ps: Vec<SpPiece> = Vec::new();
            for line in stdin.lock().lines() {
                let text: String = serde_json::from_str(&line?)?;
                ps.clear();
                let r = match m.segment(&text, &mut ps) {
                    Ok(()) => json!(ps
                        .iter()
                        .map(|p| json!([p.id, p.start, p.end]))
                        .collect::<Vec<_>>()),
                    Err(e) => json!({"error": e.message}),
                };
                writeln!(out, "{r}")?;
            }
        }
        "bl" => {
            let bl = ByteLevel {
                add_prefix_space: false,
                trim_offsets: false,
                use_regex: true,
            };
            for line in stdin.lock().lines() {
                let text: String = serde_json::from_str(&line?)?;
                let mut pts =
                    PreTokenizedString::from_splits(vec![
                        NormalizedString::from(text.as_str()).into()
                    ]);
                let r = match bl.pre_tokenize(&mut pts) {
                    Ok(()) => json!(pts
                        .splits
                        .iter()
                        .map(|s| {
                            let (a, b) = s.normalized.offsets_original();
                            json!([s.normalized.get(), a, b])
                        })
                        .collect::<Vec<_>>()),
                    Err(e) => json!({"error": e.message}),
                };
                writeln!(out, "{r}")?;
            }
        }
        _ => return Err("usage: bpe_probe hf|sp|bl ...".into()),
    }
    Ok(())
}
