//! Throughput of one normalizer or pre-tokenizer over the lines of a file.
//! Usage: component_bench <normalizer|pre_tokenizer> '<config json>' <file> [repeats]

use piecework::text::{NormalizedString, PreTokenizedString};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: component_bench <normalizer|pre_tokenizer> '<json>' <file> [repeats]");
        std::process::exit(2);
    }
    let cfg: serde_json::Value = serde_json::from_str(&args[2]).unwrap_or_default();
    let text = std::fs::read_to_string(&args[3]).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let repeats: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(3);
    let bytes: usize = lines.iter().map(|l| l.len()).sum::<usize>() * repeats;
    let start = Instant::now();
    let mut pieces = 0usize;
    if args[1] == "normalizer" {
        let n = match piecework::normalizers::from_json(&cfg) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        for _ in 0..repeats {
            for l in &lines {
                let mut ns = NormalizedString::from(*l);
                if n.normalize(&mut ns).is_ok() {
                    pieces += ns.len();
                }
            }
        }
    } else {
        let p = match piecework::pre_tokenizers::from_json(&cfg) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        };
        for _ in 0..repeats {
            for l in &lines {
                let mut pts =
                    PreTokenizedString::from_splits(vec![NormalizedString::from(*l).into()]);
                if p.pre_tokenize(&mut pts).is_ok() {
                    pieces += pts.splits.len();
                }
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{:.1} MB/s ({} bytes in {:.3}s, checksum {pieces})",
        bytes as f64 / secs / 1e6,
        bytes,
        secs
    );
}
