"""Measure the script classes the reference's UnicodeScripts pre-tokenizer uses (its own
old script table plus its Han/Any adjustments) over every code point, by probing
`pre_tokenize_str`. Only equality between classes is observable, and that is all the
pre-tokenizer needs. Prints a Rust range table: (first, last, class), class 0 = Any.

Run: python3 rust/pre_tokenizers/gen_scripts.py > rust/pre_tokenizers/scripts_table.rs
"""

from tokenizers import pre_tokenizers

PT = pre_tokenizers.UnicodeScripts()
CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def one_piece(s):
    return len(PT.pre_tokenize_str(s)) == 1


def main():
    # Any: neutral between two Latin letters and between two Greek letters.
    is_any = {}
    for c in CPS:
        ch = chr(c)
        is_any[c] = one_piece("a" + ch + "a") and one_piece("\u03b1" + ch + "\u03b1")
    # Runs of consecutive non-Any code points with the same class.
    runs = []  # [first, last]
    for c in CPS:
        if is_any[c]:
            continue
        if runs and runs[-1][1] == c - 1 and one_piece(chr(c - 1) + chr(c)):
            runs[-1][1] = c
        else:
            runs.append([c, c])
    # Name each run's class by comparing with one representative per known class.
    reps = []  # representative code point per class id - 1
    table = []
    for first, last in runs:
        cls = None
        for i, r in enumerate(reps):
            if one_piece(chr(r) + chr(first)):
                cls = i + 1
                break
        if cls is None:
            reps.append(first)
            cls = len(reps)
        if table and table[-1][2] == cls and table[-1][1] == first - 1:
            table[-1][1] = last
        else:
            table.append([first, last, cls])
    out = [
        "//! Script classes of the UnicodeScripts pre-tokenizer, measured from the reference",
        "//! (tokenizers 0.22.1) by `gen_scripts.py` beside this file (generated; do not edit).",
        "//! `(first, last, class)`; a code point in no range is class 0, `Any` (never splits).",
        "",
        f"pub static SCRIPT_CLASSES: [(u32, u32, u16); {len(table)}] = [",
    ]
    out += [f"    (0x{a:X}, 0x{b:X}, {k})," for a, b, k in table]
    out.append("];")
    print("\n".join(out))


if __name__ == "__main__":
    main()
