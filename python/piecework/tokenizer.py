"""The `Tokenizer` class: the surface of `tokenizers.Tokenizer`, over the Rust core.

Everything per text (and so per token) happens in Rust with the GIL released; this module only
reads files, picks a loader and forwards calls.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any, Union

from . import _core, _tiktoken
from ._core import Encoding, UnsupportedModelError
from .batch import TokenBatch

__all__ = ["Tokenizer", "detect_kind"]

PathLike = Union[str, "os.PathLike[str]"]
InputSequence = str | Sequence[str]
EncodeInput = InputSequence | tuple[InputSequence, InputSequence] | list[InputSequence]

# An entry of a tekken.json `vocab` (keys unescaped: structure, never inside a JSON string).
_TEKKEN_ENTRY = re.compile(rb'\{\s*"rank"\s*:\s*[0-9]+\s*,\s*"token_bytes"\s*:')

# One line of a `.spm` text vocabulary: base64 of the piece, the score, the piece type.
_SPM_LINE = re.compile(rb"^[A-Za-z0-9+/]+={0,2}[ \t]+[^ \t\r\n]+[ \t]+[0-9]+\r?$")


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at `pos`: (value, next position); (-1, pos) when malformed."""
    value = 0
    for shift in range(0, 64, 7):
        if pos >= len(data):
            return -1, pos
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
    return -1, pos


def _looks_like_model_proto(data: bytes) -> bool:
    """A SentencePiece ModelProto starts with its pieces (field 1, length-delimited), each a
    message whose own field 1 is the piece string. Checking the first entries is enough to
    tell it from text (a text file starting with a blank line also starts with 0x0A)."""
    pos = 0
    checked = 0
    while pos < len(data) and checked < 4:
        if data[pos] != 0x0A:
            return checked > 0
        length, start = _read_varint(data, pos + 1)
        if length < 0 or start + length > len(data):
            return False
        # The entry: field 1 (piece, wire type 2) first, its length inside the entry.
        if length < 2 or data[start] != 0x0A:
            return False
        plen, pstart = _read_varint(data, start + 1)
        if plen < 0 or pstart + plen > start + length:
            return False
        pos = start + length
        checked += 1
    return checked > 0


def _looks_like_spm_text(data: bytes) -> bool:
    lines = [ln for ln in data[:4096].split(b"\n")[:8] if ln.strip()]
    if len(data) > 4096 and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    return bool(lines) and all(_SPM_LINE.match(ln) for ln in lines)


def detect_kind(data: bytes) -> str:
    """What a tokenizer file holds, by its content (never by its name):
    ``"tokenizer.json"``, ``"tekken"`` (Mistral's tekken.json), ``"sentencepiece"`` (a protobuf .model), ``"spm"`` (the text
    vocabulary ``base64 score type``), ``"tiktoken"`` (lines ``base64 rank``) or
    ``"vocab.txt"`` (one WordPiece token per line)."""
    head = data[:64].lstrip(b" \t\r\n")
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:].lstrip(b" \t\r\n")
    if head.startswith(b"{"):
        return "tekken" if _TEKKEN_ENTRY.search(data, 0, 1 << 16) else "tokenizer.json"
    if _looks_like_model_proto(data):
        return "sentencepiece"
    if _looks_like_spm_text(data):
        return "spm"
    if _tiktoken.looks_like_tiktoken(data):
        return "tiktoken"
    return "vocab.txt"


def _read(path_or_bytes: PathLike | bytes | bytearray | memoryview) -> bytes:
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    with open(os.fspath(path_or_bytes), "rb") as f:
        return f.read()


def _core_constructor(name: str) -> Any:
    ctor = getattr(_core.Tokenizer, name, None)
    if ctor is None:
        raise UnsupportedModelError(f"this build of piecework has no `{name}` loader")
    return ctor


def _unpickle(cls: type[Tokenizer], state: tuple[Any, ...]) -> Tokenizer:
    """A pickled `Tokenizer` (or subclass) again, from `Tokenizer.__getstate__`'s state."""
    new = cls.__new__(cls)
    new.__setstate__(state)
    return new


class Tokenizer(_core.Tokenizer):
    """A tokenizer: text in, `Encoding` out, exactly as `tokenizers.Tokenizer` does it.

    Build one with `from_file`, `from_str`, `from_buffer`, `from_wordpiece_vocab`,
    `from_sentencepiece` or `from_spm_vocab`. The vocabulary is immutable and shared between
    copies; padding and truncation are per object and may be changed while other threads encode.

    The object is the core's (a subclass with no `__dict__`): the per-text calls (`encode`,
    `encode_ids`, `decode`) and the vocabulary and configuration methods are the core's own,
    with the same signatures and defaults, so a call costs no Python frame.
    """

    __slots__ = ("_source",)

    def __init__(self, tokenizer: _core.Tokenizer, _source: tuple[Any, ...] | None = None):
        if not isinstance(tokenizer, _core.Tokenizer):
            raise TypeError(
                "Tokenizer() takes a piecework._core.Tokenizer; use Tokenizer.from_file"
            )
        self._assign(tokenizer)
        # How to rebuild a tokenizer that was not loaded from JSON (for pickling): (kind, data,
        # options). None for tokenizer.json.
        self._source = _source

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_file(cls, path: PathLike) -> Tokenizer:
        """Load any supported file, recognised by its content: a tokenizer.json, Mistral's
        tekken.json, a SentencePiece
        .model (protobuf, whatever its name), a .spm text vocabulary, one of OpenAI's published
        .tiktoken files or a BERT vocab.txt."""
        data = _read(path)
        kind = detect_kind(data)
        if kind == "tokenizer.json":
            return cls.from_buffer(data)
        if kind == "tekken":
            return cls.from_tekken(data)
        if kind == "sentencepiece":
            return cls.from_sentencepiece(data)
        if kind == "spm":
            return cls._from_spm_bytes(data, {})
        if kind == "tiktoken":
            return cls.from_tiktoken(data)
        return cls._from_vocab_bytes(data, None, None)

    @classmethod
    def from_str(cls, json: str) -> Tokenizer:
        """Load a tokenizer.json document given as a string."""
        return cls(_core.Tokenizer.from_str(json))

    @classmethod
    def from_buffer(cls, buffer: bytes | bytearray | memoryview) -> Tokenizer:
        """Load a tokenizer.json document given as UTF-8 bytes."""
        return cls(_core.Tokenizer.from_buffer(bytes(buffer)))

    @classmethod
    def from_wordpiece_vocab(
        cls,
        path: PathLike | bytes,
        lowercase: bool | None = None,
        strip_accents: bool | None = None,
    ) -> Tokenizer:
        """A BERT tokenizer from a vocab.txt. `lowercase=None` guesses the casing from the
        vocabulary; `strip_accents=None` follows `lowercase`."""
        return cls._from_vocab_bytes(_read(path), lowercase, strip_accents)

    @classmethod
    def from_tiktoken(  # type: ignore[override]  # the core's takes the parsed parts
        cls,
        path_or_bytes: PathLike | bytes,
        pattern: str | None = None,
        special_tokens: dict[str, int] | None = None,
    ) -> Tokenizer:
        """A tokenizer from a .tiktoken vocabulary (lines ``base64 rank``), encoding as
        tiktoken does. The file holds neither the split pattern (tiktoken's regex syntax) nor
        the special tokens: for OpenAI's published files (r50k_base, p50k_base, cl100k_base,
        o200k_base, recognised by content) they default to tiktoken's; otherwise give them."""
        data = _read(path_or_bytes)
        name = _tiktoken.known_encoding(data)
        if name is not None:
            _, known_pattern, known_specials = _tiktoken.ENCODINGS[name]
            pattern = known_pattern if pattern is None else pattern
            special_tokens = known_specials if special_tokens is None else special_tokens
        if pattern is None:
            raise _core.TokenizerError(
                "from_tiktoken: this .tiktoken file is not one of OpenAI's published encodings; "
                "give its split `pattern` (tiktoken's `pat_str`)"
            )
        specials = sorted((special_tokens or {}).items(), key=lambda kv: kv[1])
        core = _core_constructor("from_tiktoken")(data, pattern, specials)
        return cls(core, ("tiktoken", data, {"pattern": pattern, "special_tokens": specials}))

    @classmethod
    def from_tekken(cls, path_or_bytes: PathLike | bytes) -> Tokenizer:
        """A tokenizer from Mistral's tekken.json, encoding as mistral-common's `Tekkenizer`:
        ids are the ranks plus the number of special tokens, which come first;
        `add_special_tokens=True` puts `<s>` before each sequence (`encode(s, bos=True,
        eos=False)`). Special tokens written in a text are read as text, as there (they are
        given by id); saved as tokenizer.json, they become added tokens that are matched."""
        data = _read(path_or_bytes)
        core = _core_constructor("from_tekken")(data)
        return cls(core, ("tekken", data, {}))

    @classmethod
    def from_sentencepiece(cls, path_or_bytes: PathLike | bytes) -> Tokenizer:
        """A tokenizer from a SentencePiece .model (protobuf), as sentencepiece runs it."""
        data = _read(path_or_bytes)
        core = _core_constructor("from_sentencepiece")(data)
        return cls(core, ("sentencepiece", data, {}))

    @classmethod
    def from_spm_vocab(
        cls,
        path: PathLike | bytes,
        *,
        model_type: str = "bpe",
        add_dummy_prefix: bool = False,
        remove_extra_whitespaces: bool = False,
        byte_fallback: bool = True,
    ) -> Tokenizer:
        """A tokenizer from a .spm text vocabulary (lines ``base64(piece) score type``); the
        file carries no settings, so they are given here."""
        if model_type not in ("bpe", "unigram", "word", "char"):
            raise _core.TokenizerError(
                f"Unknown `model_type`: `{model_type}`. Use one of `bpe`, `unigram`, `word` or `char`"
            )
        opts = {
            "model_type": model_type,
            "add_dummy_prefix": bool(add_dummy_prefix),
            "remove_extra_whitespaces": bool(remove_extra_whitespaces),
            "byte_fallback": bool(byte_fallback),
        }
        return cls._from_spm_bytes(_read(path), opts)

    @classmethod
    def _from_vocab_bytes(
        cls, data: bytes, lowercase: bool | None, strip_accents: bool | None
    ) -> Tokenizer:
        core = _core_constructor("from_vocab_txt")(data, lowercase, strip_accents)
        return cls(
            core, ("vocab.txt", data, {"lowercase": lowercase, "strip_accents": strip_accents})
        )

    @classmethod
    def _from_spm_bytes(cls, data: bytes, opts: dict[str, Any]) -> Tokenizer:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _core.InvalidDataError(f".spm vocabulary is not UTF-8: {e}") from None
        core = _core_constructor("from_spm_text")(text, **opts)
        return cls(core, ("spm", data, dict(opts)))

    # ----------------------------------------------------------------- serialization
    def save(self, path: PathLike, pretty: bool = True) -> None:
        """Write the tokenizer.json document to `path`."""
        text = self.to_str(pretty)
        with open(os.fspath(path), "w", encoding="utf-8", newline="") as f:
            f.write(text)

    def __reduce__(self) -> tuple[Any, ...]:
        # One path for every protocol (copyreg's for protocols 0 and 1 cannot make the core).
        return (_unpickle, (type(self), self.__getstate__()))

    def __getstate__(self) -> tuple[Any, ...]:
        if self._source is None:
            return ("json", self.to_str(False))
        kind, data, opts = self._source
        return (kind, data, opts, self.padding, self.truncation)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        if state[0] == "json":
            other = Tokenizer.from_str(state[1])
        else:
            kind, data, opts, padding, truncation = state
            if kind == "sentencepiece":
                other = Tokenizer.from_sentencepiece(data)
            elif kind == "spm":
                other = Tokenizer._from_spm_bytes(data, opts)
            elif kind == "vocab.txt":
                other = Tokenizer._from_vocab_bytes(data, opts["lowercase"], opts["strip_accents"])
            elif kind == "tekken":
                other = Tokenizer.from_tekken(data)
            elif kind == "tiktoken":
                other = Tokenizer.from_tiktoken(data, opts["pattern"], dict(opts["special_tokens"]))
            else:
                raise _core.InvalidDataError(f"unknown pickled tokenizer kind {kind!r}")
            other.no_padding()
            other.no_truncation()
            if padding is not None:
                other.enable_padding(**padding)
            if truncation is not None:
                other.enable_truncation(**truncation)
        self._assign(other)
        self._source = other._source

    def __copy__(self) -> Tokenizer:
        # The core is immutable and shared; the configuration becomes independent. A subclass
        # stays itself (its __init__ may take other arguments, so it is not called).
        new = type(self).__new__(type(self))
        new._assign(self)
        new._source = self._source
        return new

    def __deepcopy__(self, memo: dict[int, Any]) -> Tokenizer:
        return self.__copy__()

    # ----------------------------------------------------------------- encoding
    def encode_batch(
        self,
        inputs: Iterable[EncodeInput],
        is_pretokenized: bool = False,
        add_special_tokens: bool = True,
    ) -> list[Encoding]:
        """Encode many inputs in parallel; each is a sequence or a `(first, pair)` tuple/list.
        A batch of str builds each `Encoding`'s fields other than the ids on first read."""
        return super().encode_batch(inputs, is_pretokenized, add_special_tokens)

    def encode_batch_fast(
        self,
        inputs: Iterable[EncodeInput],
        is_pretokenized: bool = False,
        add_special_tokens: bool = True,
    ) -> list[Encoding]:
        """Same as `encode_batch` (offsets are only built when read anyway)."""
        return super().encode_batch(inputs, is_pretokenized, add_special_tokens)

    def encode_batch_ids(
        self, texts: Sequence[str], add_special_tokens: bool = True
    ) -> list[list[int]]:
        """The ids of many texts, encoded in parallel, without padding."""
        return super().encode_batch_ids(list(texts), add_special_tokens)

    def encode_batch_flat(  # type: ignore[override]  # the core's batch, wrapped
        self, texts: Sequence[str], add_special_tokens: bool = True
    ) -> TokenBatch:
        """The ids of many texts as one flat buffer plus row splits, without padding: zero-copy
        to numpy (`.ids`, `.row_splits`, `.to_numpy()`) and to Arrow (`pyarrow.array(batch)`)."""
        return TokenBatch(super().encode_batch_flat(list(texts), add_special_tokens))

    def count_tokens(
        self, text_or_texts: str | Sequence[str], add_special_tokens: bool = True
    ) -> int | list[int]:
        """How many tokens a text (or each text of a list) encodes to, without padding."""
        if isinstance(text_or_texts, str):
            return self.count_tokens_batch([text_or_texts], add_special_tokens)[0]
        return self.count_tokens_batch(list(text_or_texts), add_special_tokens)

    def __repr__(self) -> str:
        kind = "tokenizer.json" if self._source is None else self._source[0]
        return f"<piecework.Tokenizer from {kind}, vocab size {self.get_vocab_size()}>"
