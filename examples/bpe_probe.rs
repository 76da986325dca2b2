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
            let mut total = std::time::Duration::ZERO;
            for line in stdin.lock().lines() {
                let word: String = serde_json::from_str(&line?)?;
                toks.clear();
                let t = std::time::Instant::now();
                let r = bpe.tokenize(&word, &mut toks);
                total += t.elapsed();
                let r = match r {
                    Ok(()) => json!(toks
                        .iter()
                        .map(|t| json!([t.id, t.offsets.0, t.offsets.1]))
                        .collect::<Vec<_>>()),
                    Err(e) => json!({"error": e.message}),
                };
                writeln!(out, "{r}")?;
            }
            eprintln!("tokenize total {:.3}s", total.as_secs_f64());
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
            let mut total = std::time::Duration::ZERO;
            for line in stdin.lock().lines() {
                let text: String = serde_json::from_str(&line?)?;
                ps.clear();
                let t = std::time::Instant::now();
                let r = m.segment(&text, &mut ps);
                total += t.elapsed();
                let r = match r {
                    Ok(()) => json!(ps
                        .iter()
                        .map(|p| json!([p.id, p.start, p.end]))
                        .collect::<Vec<_>>()),
                    Err(e) => json!({"error": e.message}),
                };
                writeln!(out, "{r}")?;
            }
            eprintln!("segment total {:.3}s", total.as_secs_f64());
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
        "bench" => {
            // bench <tokenizer.json> <text file>: ByteLevel pre-tokenization, then the model on
            // each word, timed separately.
            let path = args.get(2).ok_or("missing tokenizer.json")?;
            let text = std::fs::read_to_string(args.get(3).ok_or("missing text file")?)?;
            let v: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
            let bpe = Bpe::from_json(&v["model"])?;
            let bl = ByteLevel {
                add_prefix_space: false,
                trim_offsets: false,
                use_regex: true,
            };
            for round in 0..3 {
                let t = std::time::Instant::now();
                let mut pts =
                    PreTokenizedString::from_splits(vec![
                        NormalizedString::from(text.as_str()).into()
                    ]);
                bl.pre_tokenize(&mut pts)?;
                let t_pre = t.elapsed();
                let t = std::time::Instant::now();
                let mut toks: Vec<Token> = Vec::new();
                for s in &pts.splits {
                    bpe.tokenize(s.normalized.get(), &mut toks)?;
                }
                let t_model = t.elapsed();
                let t = std::time::Instant::now();
                let ns = NormalizedString::from(text.as_str()).split(
                    &piecework::byte_level::Gpt2Split,
                    piecework::text::SplitBehavior::Isolated,
                )?;
                eprintln!(
                    "NormalizedString::split alone {:?} ({} pieces)",
                    t.elapsed(),
                    ns.len()
                );
                let t = std::time::Instant::now();
                let n = piecework::byte_level::gpt2_split(&text).len();
                eprintln!(
                    "round {round}: split only {:?} ({n} pieces), pre-tokenize {:?} ({} words), model {:?} ({} tokens)",
                    t.elapsed(),
                    t_pre,
                    pts.splits.len(),
                    t_model,
                    toks.len()
                );
            }
        }
        _ => return Err("usage: bpe_probe hf|sp|bl|bench ...".into()),
    }
    Ok(())
}
