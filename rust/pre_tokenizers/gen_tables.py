"""Measure, over every code point, the character classes the reference (tokenizers 0.22.1)
uses, by running its components on probe strings. Prints Rust range tables.

Run: python3 rust/pre_tokenizers/gen_tables.py > rust/pre_tokenizers/tables.rs
"""

from tokenizers import normalizers, pre_tokenizers

CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def ranges(flags):
    out, start, prev = [], None, None
    for c in CPS:
        if flags.get(c):
            if start is not None and c == prev + 1:
                prev = c
                continue
            if start is not None:
                out.append((start, prev))
            start = prev = c
    if start is not None:
        out.append((start, prev))
    return out


def classify_whitespace_regex():
    """Whitespace pre-tokenizer: regex `\\w+|[^\\w\\s]+`. Probe "a" + c + "\\n" for each c:
    one piece "ac" -> c is \\w; pieces "a", "c" -> c is [^\\w\\s]; only "a" -> c is \\s."""
    pt = pre_tokenizers.Whitespace()
    word, space = {}, {}
    chunk = 4096
    for i in range(0, len(CPS), chunk):
        cps = CPS[i : i + chunk]
        text = "".join("a" + chr(c) + "\n" for c in cps)
        pieces = pt.pre_tokenize_str(text)
        # Each probe occupies 3 code points; group pieces by probe index.
        by_probe = {}
        for s, (a, b) in pieces:
            by_probe.setdefault(a // 3, []).append((s, a, b))
        for k, c in enumerate(cps):
            got = by_probe.get(k, [])
            if len(got) == 1 and got[0][0] == "a" + chr(c):
                word[c] = True
            elif len(got) == 2:
                pass
            elif len(got) == 1 and got[0][0] == "a":
                space[c] = True
            else:
                raise SystemExit(f"unexpected probe result for U+{c:04X}: {got}")
    return word, space


def classify_std():
    """std's is_whitespace (WhitespaceSplit), is_numeric (Digits) and to_lowercase
    (Lowercase) as compiled into the reference."""
    ws_pt = pre_tokenizers.WhitespaceSplit()
    dig = pre_tokenizers.Digits(individual_digits=True)
    low = normalizers.Lowercase()
    ws, num, lower = {}, {}, {}
    chunk = 4096
    for i in range(0, len(CPS), chunk):
        cps = CPS[i : i + chunk]
        # "a" c "a": whitespace c splits it in two.
        text = "".join("a" + chr(c) + "a" for c in cps)
        pieces = ws_pt.pre_tokenize_str(text)
        covered = set()
        for _, (a, b) in pieces:
            covered.update(range(a, b))
        for k, c in enumerate(cps):
            if 3 * k + 1 not in covered:
                ws[c] = True
        # Digits individual: each numeric char is its own piece.
        text = "".join("a" + chr(c) for c in cps)
        pieces = dig.pre_tokenize_str(text)
        singles = {a for s, (a, b) in pieces if b - a == 1}
        for k, c in enumerate(cps):
            if 2 * k + 1 in singles:
                num[c] = True
        for c in cps:
            lc = low.normalize_str(chr(c))
            if lc != chr(c):
                lower[c] = lc
    return ws, num, lower


def emit_rust(d):
    """Render the measured classes as `tables.rs`."""
    out = [
        "//! Character tables measured from the reference (tokenizers 0.22.1) over every code",
        "//! point by `gen_tables.py` beside this file (generated; do not edit by hand).",
        "//! They pin the Unicode version of the `regex` crate's `\\\\w`/`\\\\s` and of the Rust",
        "//! std the reference was compiled with, which may differ from ours.",
        "",
    ]

    def table(name, rs, doc):
        out.append(f"/// {doc}")
        out.append(f"pub static {name}: [(u32, u32); {len(rs)}] = [")
        for a, b in rs:
            out.append(f"    (0x{a:X}, 0x{b:X}),")
        out.append("];")
        out.append("")

    table("REGEX_WORD", d["word"], "`\\w` of the Whitespace pre-tokenizer's regex.")
    table("REGEX_SPACE", d["space"], "`\\s` of the Whitespace pre-tokenizer's regex.")
    table("STD_NUMERIC", d["num"], "`char::is_numeric`.")
    lower = sorted((int(k), v) for k, v in d["lower"].items())
    out.append("/// `char::to_lowercase` for every char it changes: (char, first, second or NUL).")
    out.append(f"pub static STD_LOWER: [(u32, u32, u32); {len(lower)}] = [")
    for k, v in lower:
        second = ord(v[1]) if len(v) > 1 else 0
        assert len(v) <= 2
        out.append(f"    (0x{k:X}, 0x{ord(v[0]):X}, 0x{second:X}),")
    out.append("];")
    out.append("")
    out.append(
        """use crate::text::unicode::in_ranges;

/// `\\w` as the reference's Whitespace regex sees it.
#[inline]
pub fn is_regex_word(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || c == '_'
    } else {
        in_ranges(&REGEX_WORD, c)
    }
}

/// `\\s` as the reference's Whitespace regex sees it.
#[inline]
pub fn is_regex_space(c: char) -> bool {
    if c.is_ascii() {
        matches!(c, '\\t' | '\\n' | '\\u{b}' | '\\u{c}' | '\\r' | ' ')
    } else {
        in_ranges(&REGEX_SPACE, c)
    }
}

/// `char::is_numeric` of the reference's std.
#[inline]
pub fn is_std_numeric(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_digit()
    } else {
        in_ranges(&STD_NUMERIC, c)
    }
}

/// `char::to_lowercase` of the reference's std: one or two chars.
#[inline]
pub fn std_lowercase(c: char) -> (char, Option<char>) {
    if c.is_ascii() {
        return (c.to_ascii_lowercase(), None);
    }
    match STD_LOWER.binary_search_by_key(&(c as u32), |e| e.0) {
        Ok(i) => {
            let (_, a, b) = STD_LOWER[i];
            (
                char::from_u32(a).unwrap_or(c),
                if b == 0 { None } else { char::from_u32(b) },
            )
        }
        Err(_) => (c, None),
    }
}"""
    )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    word, space = classify_whitespace_regex()
    ws, num, lower = classify_std()
    assert ranges(ws) == ranges(space), "std whitespace differs from regex \\s"
    print(
        emit_rust(
            {
                "word": ranges(word),
                "space": ranges(space),
                "num": ranges(num),
                "lower": {str(k): v for k, v in lower.items()},
            }
        ),
        end="",
    )
