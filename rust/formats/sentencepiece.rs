//! The SentencePiece `ModelProto` (a `.model` file), read and written with prost.
//!
//! Only the fields that change tokenization are declared; prost skips every other field, as
//! the reference's protobuf runtime does. Before prost sees the bytes, a cheap scan of the top
//! level checks the wire format and counts the pieces, so a hostile file is refused before
//! anything proportional to its claims is allocated (limits: 128 MiB, 4 million pieces, 4096
//! bytes per piece).

use crate::error::{Error, Result};
use crate::sentencepiece::vocab::{PieceEntry, PieceType};
use prost::Message;

/// Largest `.model` accepted.
pub const MAX_MODEL_BYTES: usize = 128 << 20;
/// Most pieces accepted.
pub const MAX_PIECES: usize = 4_000_000;
/// Longest piece accepted, in UTF-8 bytes.
pub const MAX_PIECE_BYTES: usize = 4096;

#[derive(Clone, PartialEq, Message)]
pub struct SentencePieceProto {
    #[prost(string, optional, tag = "1")]
    pub piece: Option<String>,
    #[prost(float, optional, tag = "2")]
    pub score: Option<f32>,
    #[prost(int32, optional, tag = "3")]
    pub r#type: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TrainerSpecProto {
    #[prost(int32, optional, tag = "3")]
    pub model_type: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub vocab_size: Option<i32>,
    #[prost(bool, optional, tag = "24")]
    pub treat_whitespace_as_suffix: Option<bool>,
    #[prost(bool, optional, tag = "35")]
    pub byte_fallback: Option<bool>,
    #[prost(string, optional, tag = "44")]
    pub unk_surface: Option<String>,
    #[prost(string, optional, tag = "45")]
    pub unk_piece: Option<String>,
    #[prost(string, optional, tag = "46")]
    pub bos_piece: Option<String>,
    #[prost(string, optional, tag = "47")]
    pub eos_piece: Option<String>,
    #[prost(string, optional, tag = "48")]
    pub pad_piece: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NormalizerSpecProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub precompiled_charsmap: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "3")]
    pub add_dummy_prefix: Option<bool>,
    #[prost(bool, optional, tag = "4")]
    pub remove_extra_whitespaces: Option<bool>,
    #[prost(bool, optional, tag = "5")]
    pub escape_whitespaces: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SampleProto {
    #[prost(string, optional, tag = "1")]
    pub input: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub expected: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SelfTestDataProto {
    #[prost(message, repeated, tag = "1")]
    pub samples: Vec<SampleProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(message, repeated, tag = "1")]
    pub pieces: Vec<SentencePieceProto>,
    #[prost(message, optional, tag = "2")]
    pub trainer_spec: Option<TrainerSpecProto>,
    #[prost(message, optional, tag = "3")]
    pub normalizer_spec: Option<NormalizerSpecProto>,
    #[prost(message, optional, tag = "4")]
    pub self_test_data: Option<SelfTestDataProto>,
    #[prost(message, optional, tag = "5")]
    pub denormalizer_spec: Option<NormalizerSpecProto>,
}

/// `TrainerSpec.ModelType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelType {
    Unigram = 1,
    Bpe = 2,
    Word = 3,
    Char = 4,
}

impl ModelType {
    pub fn from_i32(v: i32) -> Option<ModelType> {
        Some(match v {
            1 => ModelType::Unigram,
            2 => ModelType::Bpe,
            3 => ModelType::Word,
            4 => ModelType::Char,
            _ => return None,
        })
    }
}

impl PieceType {
    pub fn from_i32(v: i32) -> Option<PieceType> {
        Some(match v {
            1 => PieceType::Normal,
            2 => PieceType::Unknown,
            3 => PieceType::Control,
            4 => PieceType::UserDefined,
            5 => PieceType::Unused,
            6 => PieceType::Byte,
            _ => return None,
        })
    }
}

/// The normalizer settings of a model, with the proto defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizerSettings {
    pub name: String,
    pub precompiled_charsmap: Vec<u8>,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    pub escape_whitespaces: bool,
}

impl Default for NormalizerSettings {
    fn default() -> Self {
        NormalizerSettings {
            name: String::new(),
            precompiled_charsmap: Vec::new(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
        }
    }
}

impl NormalizerSettings {
    fn from_proto(p: &NormalizerSpecProto) -> Self {
        NormalizerSettings {
            name: p.name.clone().unwrap_or_default(),
            precompiled_charsmap: p.precompiled_charsmap.clone().unwrap_or_default(),
            add_dummy_prefix: p.add_dummy_prefix.unwrap_or(true),
            remove_extra_whitespaces: p.remove_extra_whitespaces.unwrap_or(true),
            escape_whitespaces: p.escape_whitespaces.unwrap_or(true),
        }
    }
}

/// Everything piecework needs from a `.model`, validated.
#[derive(Debug, Clone)]
pub struct ModelData {
    pub pieces: Vec<PieceEntry>,
    pub model_type: ModelType,
    pub byte_fallback: bool,
    pub treat_whitespace_as_suffix: bool,
    /// `TrainerSpec.unk_surface` when present (decoding of `<unk>`), else `None` (" ⁇ ").
    pub unk_surface: Option<String>,
    pub unk_piece: String,
    pub bos_piece: String,
    pub eos_piece: String,
    pub pad_piece: String,
    pub normalizer: NormalizerSettings,
    /// Present only when it has a non-empty charsmap (the reference ignores it otherwise).
    pub denormalizer: Option<NormalizerSettings>,
    /// `(input, expected pieces joined by ' ')` the reference checks at load time.
    pub self_test: Vec<(String, String)>,
}

fn nonempty_or(v: &Option<String>, default: &str) -> String {
    match v {
        Some(s) if !s.is_empty() => s.clone(),
        _ => default.to_string(),
    }
}

/// Read one varint at `*pos`; `None` when truncated or longer than 10 bytes.
fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Walk the top level of a ModelProto, checking tags, varints and lengths, and count field 1
/// (the pieces) without allocating anything.
fn prescan(buf: &[u8]) -> Result<usize> {
    let mut pos = 0;
    let mut pieces = 0usize;
    while pos < buf.len() {
        let key = read_varint(buf, &mut pos).ok_or_else(|| {
            Error::invalid(format!(
                "ModelProto: truncated or bad varint tag at byte {pos}"
            ))
        })?;
        let field = key >> 3;
        let wire = key & 7;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return Err(Error::invalid(format!(
                "ModelProto: invalid field number {field} at byte {pos}"
            )));
        }
        let name = match field {
            1 => "pieces",
            2 => "trainer_spec",
            3 => "normalizer_spec",
            4 => "self_test_data",
            5 => "denormalizer_spec",
            _ => "unknown field",
        };
        if field <= 5 && wire != 2 {
            return Err(Error::invalid(format!(
                "ModelProto.{name}: wire type {wire} where a length-delimited message is required"
            )));
        }
        match wire {
            0 => {
                read_varint(buf, &mut pos).ok_or_else(|| {
                    Error::invalid(format!("ModelProto field {field}: truncated or bad varint"))
                })?;
            }
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                if buf.len() - pos < n {
                    return Err(Error::invalid(format!(
                        "ModelProto field {field}: truncated fixed-size value"
                    )));
                }
                pos += n;
            }
            2 => {
                let len = read_varint(buf, &mut pos).ok_or_else(|| {
                    Error::invalid(format!("ModelProto.{name}: truncated or bad length varint"))
                })?;
                if len > (buf.len() - pos) as u64 {
                    return Err(Error::invalid(format!(
                        "ModelProto.{name}: length {len} runs past the end of the data"
                    )));
                }
                pos += len as usize;
                if field == 1 {
                    pieces += 1;
                    if pieces > MAX_PIECES {
                        return Err(Error::invalid(format!(
                            "ModelProto.pieces: more than {MAX_PIECES} pieces"
                        )));
                    }
                }
            }
            // Groups are legal protobuf; leave them to prost's skipping.
            3 | 4 => return Ok(pieces),
            _ => {
                return Err(Error::invalid(format!(
                    "ModelProto field {field}: invalid wire type {wire}"
                )))
            }
        }
    }
    Ok(pieces)
}

/// Parse and validate a `.model` (serialized `ModelProto`).
pub fn parse_model(bytes: &[u8]) -> Result<ModelData> {
    if bytes.len() > MAX_MODEL_BYTES {
        return Err(Error::invalid(format!(
            "SentencePiece model: {} bytes exceeds the {MAX_MODEL_BYTES}-byte limit",
            bytes.len()
        )));
    }
    let count = prescan(bytes)?;
    let proto = match decode_plain(bytes, count) {
        Some(p) => p,
        None => ModelProto::decode(bytes)
            .map_err(|e| Error::invalid(format!("SentencePiece model: {e}")))?,
    };
    model_data_from_proto(proto)
}

/// A varint of at most five bytes that fits in 32 bits (a length, a tag, an `int32` that
/// is not negative), else `None`.
#[inline]
fn varint32(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let mut v: u32 = 0;
    for i in 0..5 {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if i == 4 && b > 0x0f {
            return None;
        }
        v |= u32::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// One length-delimited field's bytes at `*pos` (after its tag).
#[inline]
fn delimited<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let len = varint32(buf, pos)? as usize;
    let out = buf.get(*pos..pos.checked_add(len)?)?;
    *pos += len;
    Some(out)
}

/// One `SentencePiece` message whose fields are each a piece (tag 1), a score (2) and a
/// type (3) at most once, with their wire types; `None` for anything else.
#[inline]
fn decode_piece(buf: &[u8]) -> Option<SentencePieceProto> {
    let mut p = SentencePieceProto::default();
    let mut pos = 0;
    while pos < buf.len() {
        match varint32(buf, &mut pos)? {
            0x0a if p.piece.is_none() => {
                let b = delimited(buf, &mut pos)?;
                p.piece = Some(std::str::from_utf8(b).ok()?.to_owned());
            }
            0x15 if p.score.is_none() => {
                let b: [u8; 4] = buf.get(pos..pos + 4)?.try_into().ok()?;
                pos += 4;
                p.score = Some(f32::from_le_bytes(b));
            }
            0x18 if p.r#type.is_none() => {
                // Up to 2^31 - 1: what prost reads as the same non-negative `int32`.
                let v = varint32(buf, &mut pos)?;
                p.r#type = Some(i32::try_from(v).ok()?);
            }
            _ => return None,
        }
    }
    Some(p)
}

/// prost's decoding of a `ModelProto` for the plain layout every trainer writes: the pieces
/// read directly (one pass, no generic field dispatch), the four settings messages each at
/// most once and decoded by prost. `None` (and the caller decodes with prost, which gives
/// the same value or its own error) for anything else: an unknown or repeated field, another
/// wire type, a piece message with other fields, a varint longer than 32 bits, bad UTF-8.
/// `count`: the number of pieces (`prescan`'s), for the vector's capacity.
fn decode_plain(buf: &[u8], count: usize) -> Option<ModelProto> {
    let mut m = ModelProto {
        pieces: Vec::with_capacity(count),
        ..ModelProto::default()
    };
    let mut pos = 0;
    while pos < buf.len() {
        let tag = varint32(buf, &mut pos)?;
        let b = delimited(buf, &mut pos)?;
        match tag {
            0x0a => m.pieces.push(decode_piece(b)?),
            0x12 if m.trainer_spec.is_none() => {
                m.trainer_spec = Some(TrainerSpecProto::decode(b).ok()?);
            }
            0x1a if m.normalizer_spec.is_none() => {
                m.normalizer_spec = Some(NormalizerSpecProto::decode(b).ok()?);
            }
            0x22 if m.self_test_data.is_none() => {
                m.self_test_data = Some(SelfTestDataProto::decode(b).ok()?);
            }
            0x2a if m.denormalizer_spec.is_none() => {
                m.denormalizer_spec = Some(NormalizerSpecProto::decode(b).ok()?);
            }
            _ => return None,
        }
    }
    Some(m)
}

fn model_data_from_proto(proto: ModelProto) -> Result<ModelData> {
    if proto.pieces.len() > MAX_PIECES {
        return Err(Error::invalid(format!(
            "ModelProto.pieces: more than {MAX_PIECES} pieces"
        )));
    }
    let mut pieces = Vec::with_capacity(proto.pieces.len());
    for (i, p) in proto.pieces.into_iter().enumerate() {
        let piece = p.piece.unwrap_or_default();
        if piece.is_empty() {
            return Err(Error::invalid(format!(
                "ModelProto.pieces[{i}].piece: empty piece (SP-003)"
            )));
        }
        if piece.len() > MAX_PIECE_BYTES {
            return Err(Error::invalid(format!(
                "ModelProto.pieces[{i}].piece: {} bytes exceeds the {MAX_PIECE_BYTES}-byte limit",
                piece.len()
            )));
        }
        let t = p.r#type.unwrap_or(1);
        let kind = PieceType::from_i32(t).ok_or_else(|| {
            Error::invalid(format!(
                "ModelProto.pieces[{i}].type: unknown piece type {t}"
            ))
        })?;
        pieces.push(PieceEntry {
            piece,
            score: p.score.unwrap_or(0.0),
            kind,
        });
    }
    let ts = proto.trainer_spec.unwrap_or_default();
    let mt = ts.model_type.unwrap_or(1);
    let model_type = ModelType::from_i32(mt).ok_or_else(|| {
        Error::unsupported(format!("TrainerSpec.model_type: unknown model type `{mt}`"))
    })?;
    let normalizer = proto
        .normalizer_spec
        .as_ref()
        .map(NormalizerSettings::from_proto)
        .unwrap_or_default();
    let denormalizer = proto
        .denormalizer_spec
        .as_ref()
        .map(NormalizerSettings::from_proto)
        .filter(|d| !d.precompiled_charsmap.is_empty());
    let self_test = proto
        .self_test_data
        .map(|s| {
            s.samples
                .into_iter()
                .map(|x| (x.input.unwrap_or_default(), x.expected.unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    Ok(ModelData {
        pieces,
        model_type,
        byte_fallback: ts.byte_fallback.unwrap_or(false),
        treat_whitespace_as_suffix: ts.treat_whitespace_as_suffix.unwrap_or(false),
        unk_surface: ts.unk_surface.clone(),
        unk_piece: nonempty_or(&ts.unk_piece, "<unk>"),
        bos_piece: nonempty_or(&ts.bos_piece, "<s>"),
        eos_piece: nonempty_or(&ts.eos_piece, "</s>"),
        pad_piece: nonempty_or(&ts.pad_piece, "<pad>"),
        normalizer,
        denormalizer,
        self_test,
    })
}

/// Serialize a model built from a vocabulary (a `.spm`) back to a `ModelProto`.
pub fn write_model(data: &ModelData) -> Vec<u8> {
    let spec = |n: &NormalizerSettings| NormalizerSpecProto {
        name: Some(n.name.clone()),
        precompiled_charsmap: if n.precompiled_charsmap.is_empty() {
            None
        } else {
            Some(n.precompiled_charsmap.clone())
        },
        add_dummy_prefix: Some(n.add_dummy_prefix),
        remove_extra_whitespaces: Some(n.remove_extra_whitespaces),
        escape_whitespaces: Some(n.escape_whitespaces),
    };
    let proto = ModelProto {
        pieces: data
            .pieces
            .iter()
            .map(|p| SentencePieceProto {
                piece: Some(p.piece.clone()),
                score: Some(p.score),
                r#type: Some(p.kind as i32),
            })
            .collect(),
        trainer_spec: Some(TrainerSpecProto {
            model_type: Some(data.model_type as i32),
            vocab_size: Some(data.pieces.len().min(i32::MAX as usize) as i32),
            treat_whitespace_as_suffix: Some(data.treat_whitespace_as_suffix),
            byte_fallback: Some(data.byte_fallback),
            unk_surface: data.unk_surface.clone(),
            unk_piece: Some(data.unk_piece.clone()),
            bos_piece: Some(data.bos_piece.clone()),
            eos_piece: Some(data.eos_piece.clone()),
            pad_piece: Some(data.pad_piece.clone()),
        }),
        normalizer_spec: Some(spec(&data.normalizer)),
        self_test_data: None,
        denormalizer_spec: data.denormalizer.as_ref().map(spec),
    };
    proto.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(p: &str, score: f32, t: i32) -> SentencePieceProto {
        SentencePieceProto {
            piece: Some(p.into()),
            score: Some(score),
            r#type: Some(t),
        }
    }

    fn tiny() -> Vec<u8> {
        ModelProto {
            pieces: vec![piece("<unk>", 0.0, 2), piece("a", -1.0, 1)],
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn defaults_follow_the_proto() {
        let d = parse_model(&tiny()).unwrap();
        assert_eq!(d.model_type, ModelType::Unigram);
        assert!(d.normalizer.add_dummy_prefix);
        assert!(d.normalizer.remove_extra_whitespaces);
        assert!(d.normalizer.escape_whitespaces);
        assert!(!d.byte_fallback);
        assert_eq!(d.unk_piece, "<unk>");
        assert_eq!(d.pieces[1].kind, PieceType::Normal);
        assert_eq!(d.pieces[1].score, -1.0);
    }

    /// `decode_plain` where it answers, against prost: the same message, or no answer where
    /// prost fails. Compared as re-encoded bytes (NaN scores compare equal so).
    fn plain_agrees(bytes: &[u8]) -> bool {
        let Some(fast) = decode_plain(bytes, 0) else {
            return false;
        };
        let general = ModelProto::decode(bytes).expect("decode_plain answered, prost failed");
        assert_eq!(fast.encode_to_vec(), general.encode_to_vec());
        true
    }

    #[test]
    fn plain_decoding_is_prosts() {
        let full = ModelProto {
            pieces: vec![
                piece("<unk>", 0.0, 2),
                piece("▁a", -1.5, 1),
                piece("é", f32::NAN, 4),
                SentencePieceProto::default(),
                SentencePieceProto {
                    piece: Some("b".into()),
                    ..Default::default()
                },
            ],
            trainer_spec: Some(TrainerSpecProto {
                model_type: Some(2),
                byte_fallback: Some(true),
                unk_piece: Some("<u>".into()),
                ..Default::default()
            }),
            normalizer_spec: Some(NormalizerSpecProto {
                name: Some("nmt_nfkc".into()),
                precompiled_charsmap: Some(vec![1, 2, 3]),
                add_dummy_prefix: Some(false),
                ..Default::default()
            }),
            self_test_data: Some(SelfTestDataProto {
                samples: vec![SampleProto {
                    input: Some("x".into()),
                    expected: Some("▁x".into()),
                }],
            }),
            denormalizer_spec: Some(NormalizerSpecProto::default()),
        }
        .encode_to_vec();
        assert!(plain_agrees(&full));
        assert!(plain_agrees(&tiny()));
        // Every real and generated `.model` of the shared data takes the plain path.
        let dir = crate::test_data_dir();
        let mut files = 0;
        let mut stack = vec![std::path::PathBuf::from(&dir)];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|x| x == "model")
                    || path.to_string_lossy().ends_with(".model.v3")
                {
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    if ModelProto::decode(&bytes[..]).is_ok() {
                        assert!(plain_agrees(&bytes), "{}", path.display());
                        files += 1;
                    }
                }
            }
        }
        eprintln!("{files} model files");
        // Mutated messages: a byte changed, inserted or dropped, or the message cut.
        let mut next = crate::test_rng(0x0DEC_0DE0_9A17_0001);
        let (mut answered, mut refused) = (0, 0);
        for round in 0..20_000 {
            let mut b = if round % 2 == 0 { full.clone() } else { tiny() };
            for _ in 0..1 + next() % 3 {
                let i = (next() as usize) % b.len();
                match next() % 4 {
                    0 => b[i] = next() as u8,
                    1 => b.insert(i, next() as u8),
                    2 => {
                        b.remove(i);
                    }
                    _ => b.truncate(i),
                }
                if b.is_empty() {
                    break;
                }
            }
            if plain_agrees(&b) {
                answered += 1;
            } else {
                refused += 1;
            }
        }
        assert!(answered > 1000 && refused > 1000, "{answered} {refused}");
    }

    #[test]
    fn rejects_malformed_input() {
        let good = tiny();
        // Every cut inside the first piece's field leaves it short.
        let first = 2 + good[1] as usize;
        for cut in 1..first {
            assert!(parse_model(&good[..cut]).is_err(), "prefix {cut}");
        }
        // A varint that never ends.
        assert!(
            parse_model(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
                .is_err()
        );
        // A length past the end.
        assert!(parse_model(&[0x0a, 0x7f, 0x0a]).is_err());
        // Field 1 with the wrong wire type.
        assert!(parse_model(&[0x08, 0x01]).is_err());
        // An empty piece (SP-003).
        let m = ModelProto {
            pieces: vec![piece("", 0.0, 1)],
            ..Default::default()
        };
        let e = parse_model(&m.encode_to_vec()).unwrap_err();
        assert!(e.message.contains("empty"));
        // An unknown type value.
        let m = ModelProto {
            pieces: vec![piece("a", 0.0, 9)],
            ..Default::default()
        };
        assert!(parse_model(&m.encode_to_vec())
            .unwrap_err()
            .message
            .contains("type"));
        // An oversize piece.
        let m = ModelProto {
            pieces: vec![piece(&"x".repeat(MAX_PIECE_BYTES + 1), 0.0, 1)],
            ..Default::default()
        };
        assert!(parse_model(&m.encode_to_vec()).is_err());
    }

    #[test]
    fn random_corruption_never_panics() {
        let mut next = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        let good = tiny();
        for _ in 0..2000 {
            let mut b = good.clone();
            for _ in 0..(next() % 4 + 1) {
                let i = (next() % b.len() as u64) as usize;
                b[i] = next() as u8;
            }
            if next() % 3 == 0 {
                b.truncate((next() % b.len() as u64) as usize);
            }
            // Either outcome is fine; reaching here without a panic is the point, and an
            // accepted model must still load into a processor or fail cleanly.
            if let Ok(d) = parse_model(&b) {
                let _ = crate::sentencepiece::SentencePiece::from_data(d);
            }
        }
    }

    #[test]
    fn round_trips_through_write_model() {
        let d = parse_model(&tiny()).unwrap();
        let again = parse_model(&write_model(&d)).unwrap();
        assert_eq!(again.pieces, d.pieces);
        assert_eq!(again.normalizer, d.normalizer);
    }
}
