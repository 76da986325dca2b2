use piecework::tokenizer::InputSequence;
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json = std::fs::read_to_string(&args[1]).unwrap();
    let tok = piecework::Tokenizer::from_json_str(&json).unwrap();
    let text = std::fs::read_to_string("/work/shared/data/corpora/big.txt").unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).take(20000).collect();
    let n: usize = lines.iter().map(|l| l.len()).sum();
    for round in 0..3 {
        let t = Instant::now();
        let mut out = Vec::new();
        for l in &lines { out.clear(); tok.encode_ids(l, false, &mut out).unwrap(); }
        let a = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for l in &lines { out.clear(); tok.encode_ids(l, true, &mut out).unwrap(); }
        let b = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for l in &lines { let _ = tok.encode(InputSequence::Raw(l), None, true).unwrap(); }
        let c = t.elapsed().as_secs_f64();
        println!("round {round}: ids {:.1} MB/s, ids+special {:.1}, encode {:.1}", n as f64/a/1e6, n as f64/b/1e6, n as f64/c/1e6);
    }
}
