//! The `.spm` plain-text vocabulary: one line per id, in id order,
//! `<base64 of the UTF-8 piece> <score> <type>`. The score is the f32 its decimal denotes
//! (parsed straight to f32, so the shortest round-trip decimal gives back the same bits); the
//! type is sentencepiece's piece type number (1 NORMAL … 6 BYTE).

use crate::error::{Error, Result};
use crate::sentencepiece::vocab::{PieceEntry, PieceType};
use base64::Engine;

/// Largest `.spm` accepted (the `.model` limit; a line is about as long as a proto entry).
const MAX_SPM_BYTES: usize = 256 << 20;

/// Parse a `.spm` text. Lines end at `\n` (a `\r` before it is dropped); blank lines are
/// allowed only at the end.
pub fn parse_spm(text: &str) -> Result<Vec<PieceEntry>> {
    use crate::formats::sentencepiece::{MAX_PIECES, MAX_PIECE_BYTES};
    if text.len() > MAX_SPM_BYTES {
        return Err(Error::invalid(format!(
            ".spm: {} bytes exceeds the {MAX_SPM_BYTES}-byte limit",
            text.len()
        )));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut pieces = Vec::new();
    let mut blank_seen_at: Option<usize> = None;
    for (i, raw) in text.split('\n').enumerate() {
        let line_no = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            blank_seen_at.get_or_insert(line_no);
            continue;
        }
        if let Some(b) = blank_seen_at {
            return Err(Error::invalid(format!(
                ".spm line {b}: blank line inside the vocabulary (ids are line positions)"
            )));
        }
        if pieces.len() >= MAX_PIECES {
            return Err(Error::invalid(format!(
                ".spm: more than {MAX_PIECES} pieces"
            )));
        }
        let mut fields = line.split_ascii_whitespace();
        let (Some(p64), Some(score), Some(kind), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(Error::invalid(format!(
                ".spm line {line_no}: expected `base64(piece) score type`"
            )));
        };
        let bytes = b64.decode(p64).map_err(|e| {
            Error::invalid(format!(
                ".spm line {line_no}: piece is not valid base64 ({e})"
            ))
        })?;
        if bytes.is_empty() {
            return Err(Error::invalid(format!(".spm line {line_no}: empty piece")));
        }
        if bytes.len() > MAX_PIECE_BYTES {
            return Err(Error::invalid(format!(
                ".spm line {line_no}: piece of {} bytes exceeds the {MAX_PIECE_BYTES}-byte limit",
                bytes.len()
            )));
        }
        let piece = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(format!(".spm line {line_no}: piece is not UTF-8")))?;
        let score: f32 = score.parse().map_err(|_| {
            Error::invalid(format!(
                ".spm line {line_no}: score `{score}` is not a number"
            ))
        })?;
        let kind = kind
            .parse::<i32>()
            .ok()
            .and_then(PieceType::from_i32)
            .ok_or_else(|| {
                Error::invalid(format!(".spm line {line_no}: unknown piece type `{kind}`"))
            })?;
        pieces.push(PieceEntry { piece, score, kind });
    }
    Ok(pieces)
}

/// Write pieces as `.spm` text, one line per id, each ending in `\n`.
pub fn write_spm(pieces: &[PieceEntry]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = String::with_capacity(pieces.len() * 24);
    for p in pieces {
        out.push_str(&b64.encode(p.piece.as_bytes()));
        out.push(' ');
        // `{:?}` is Rust's shortest round-trip form ("0.0", "-1.5", "1e-7").
        out.push_str(&format!("{:?}", p.score));
        out.push(' ');
        out.push_str(&(p.kind as i32).to_string());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_example() {
        let v = parse_spm("PHBhZD4= 0.0 3\nPGVvcz4= 0.0 3\r\nPGJvcz4= -1.5 1\n\n").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].piece, "<pad>");
        assert_eq!(v[1].piece, "<eos>");
        assert_eq!(v[2].kind, PieceType::Normal);
        assert_eq!(v[2].score, -1.5);
    }

    #[test]
    fn scores_round_trip_bit_for_bit() {
        let scores = [
            0.0f32,
            -0.0,
            -1.5,
            1e-7,
            -1e9,
            f32::MIN_POSITIVE,
            -13.123457,
            3.4028235e38,
        ];
        let pieces: Vec<_> = scores
            .iter()
            .enumerate()
            .map(|(i, &s)| PieceEntry {
                piece: format!("p{i} ▁\n"),
                score: s,
                kind: PieceType::UserDefined,
            })
            .collect();
        let back = parse_spm(&write_spm(&pieces)).unwrap();
        for (a, b) in pieces.iter().zip(&back) {
            assert_eq!(a.score.to_bits(), b.score.to_bits());
            assert_eq!(a.piece, b.piece);
            assert_eq!(a.kind, b.kind);
        }
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse_spm("YQ== 0.0").is_err());
        assert!(parse_spm("YQ== x 1").is_err());
        assert!(parse_spm("YQ== 0 7").is_err());
        assert!(parse_spm("!!!! 0 1").is_err());
        assert!(parse_spm(" 0 1").is_err());
        assert!(parse_spm("YQ== 0 1\n\nYg== 0 1").is_err());
        assert!(parse_spm("/w== 0 1").is_err()); // 0xFF is not UTF-8
    }
}
