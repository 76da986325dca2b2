"""A drop-in for the common surface of ``sentencepiece.SentencePieceProcessor``.

Results are those of the sentencepiece library (ids, pieces, decoding); all work happens in
the Rust core, this class only picks the entry point from the argument's shape.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from ._core import _FastEncode, _SentencePiece
from .batch import TokenBatch

__all__ = ["SentencePieceProcessor"]


def _is_sequence(x: Any) -> bool:
    return hasattr(x, "__len__") and not isinstance(x, (str, bytes))


def _text(x: Any) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else x


def _texts(items: list[Any]) -> list[str]:
    """A batch as the Rust side takes it: a list of str as it is; only bytes need decoding."""
    return items if all(type(t) is str for t in items) else [_text(t) for t in items]


def _encode(
    sp: _SentencePiece,
    options: tuple[Any, bool, bool, bool, bool],
    input: Any,
    out_type: Any = None,
    add_bos: bool | None = None,
    add_eos: bool | None = None,
    reverse: bool | None = None,
    emit_unk_piece: bool | None = None,
    enable_sampling: bool = False,
    **_defaults: Any,
) -> Any:
    """`SentencePieceProcessor.Encode` given the processor's core and constructor options (a
    function of those alone, so the fast callable can hold it without holding the processor)."""
    if enable_sampling:
        raise ValueError("piecework: enable_sampling is not supported")
    d_out, d_bos, d_eos, d_reverse, d_unk = options
    out_type = d_out if out_type is None else out_type
    add_bos = d_bos if add_bos is None else add_bos
    add_eos = d_eos if add_eos is None else add_eos
    reverse = d_reverse if reverse is None else reverse
    emit_unk_piece = d_unk if emit_unk_piece is None else emit_unk_piece
    if isinstance(input, list):
        texts = _texts(input)
        if out_type is int:
            return sp.encode_ids_batch(texts, add_bos, add_eos, reverse)
        if out_type is str:
            return sp.encode_pieces_batch(texts, add_bos, add_eos, reverse, emit_unk_piece)
    else:
        text = _text(input)
        if out_type is int:
            return sp.encode_ids(text, add_bos, add_eos, reverse)
        if out_type is str:
            return sp.encode_pieces(text, add_bos, add_eos, reverse, emit_unk_piece)
    raise ValueError(f"unsupported out_type={out_type!r} (int or str)")


def _encode_as_ids(
    sp: _SentencePiece, options: tuple[Any, bool, bool, bool, bool], input: Any, **kwargs: Any
) -> Any:
    """`SentencePieceProcessor.EncodeAsIds`, as `_encode` is `Encode`."""
    return _encode(sp, options, input, out_type=int, **kwargs)


class SentencePieceProcessor:
    """Load a SentencePiece ``.model`` (file or serialized bytes) and encode/decode like
    ``sentencepiece.SentencePieceProcessor``."""

    def __init__(
        self,
        model_file: str | os.PathLike[str] | None = None,
        model_proto: bytes | None = None,
        out_type: Any = int,
        add_bos: bool = False,
        add_eos: bool = False,
        reverse: bool = False,
        emit_unk_piece: bool = False,
    ) -> None:
        self._sp: _SentencePiece | None = None
        self._out_type = out_type
        self._add_bos = add_bos
        self._add_eos = add_eos
        self._reverse = reverse
        self._emit_unk_piece = emit_unk_piece
        if model_file or model_proto:
            self.Load(model_file=model_file, model_proto=model_proto)

    # ---- loading ----

    def Load(self, model_file: Any = None, model_proto: bytes | None = None) -> bool:
        if model_file and model_proto:
            raise ValueError("model_file and model_proto must be exclusive.")
        if model_proto:
            return self.LoadFromSerializedProto(model_proto)
        if model_file:
            return self.LoadFromFile(model_file)
        raise ValueError("Either model_file or model_proto must be specified.")

    def LoadFromFile(self, filename: Any) -> bool:
        with open(os.fspath(filename), "rb") as f:
            data = f.read()
        self._set_model(_SentencePiece.from_model_bytes(data))
        return True

    def LoadFromSerializedProto(self, serialized: Any) -> bool:
        if hasattr(serialized, "SerializeToString"):
            serialized = serialized.SerializeToString()
        self._set_model(_SentencePiece.from_model_bytes(bytes(serialized)))
        return True

    @classmethod
    def from_spm(cls, text: str, **options: Any) -> SentencePieceProcessor:
        """Load a ``.spm`` text vocabulary (piecework extension). Options: ``model_type``,
        ``add_dummy_prefix``, ``remove_extra_whitespaces``, ``byte_fallback``,
        ``escape_whitespaces``, ``treat_whitespace_as_suffix``, ``precompiled_charsmap``."""
        self = cls()
        self._set_model(_SentencePiece.from_spm_text(text, **options))
        return self

    # Instance attributes that shadow `Encode`/`encode` with the fast callable, and the ones
    # that shadow `EncodeAsIds`/`encode_as_ids`.
    _FAST_NAMES = ("Encode", "encode")
    _FAST_IDS_NAMES = ("EncodeAsIds", "encode_as_ids")

    def _set_model(self, sp: _SentencePiece) -> None:
        self._sp = sp
        d = self.__dict__
        for name in self._FAST_NAMES + self._FAST_IDS_NAMES:
            d.pop(name, None)
        if self._add_bos or self._add_eos or self._reverse:
            return
        # With default options, `encode(text)` is answered in Rust without entering the
        # Python methods below (a builtin function, called without an argument tuple); every
        # other call still goes through them. The fallback holds the core and the options,
        # not the processor: no cycle, so a dropped processor is freed at once.
        options = self._options()
        if self._out_type is int:
            fast = _FastEncode(sp, functools.partial(_encode, sp, options)).function()
            for name in self._FAST_NAMES:
                d[name] = fast
        fast_ids = _FastEncode(sp, functools.partial(_encode_as_ids, sp, options)).function()
        for name in self._FAST_IDS_NAMES:
            # A subclass that overrides one keeps its override.
            if getattr(type(self), name) is getattr(SentencePieceProcessor, name):
                d[name] = fast_ids

    @property
    def _core(self) -> _SentencePiece:
        if self._sp is None:
            raise RuntimeError("no model is loaded")
        return self._sp

    # ---- encoding ----

    def Encode(self, input: Any, *args: Any, **kwargs: Any) -> Any:
        """Arguments as sentencepiece's: ``out_type``, ``add_bos``, ``add_eos``, ``reverse``,
        ``emit_unk_piece``, ``enable_sampling`` (see `_encode`)."""
        # (With default options the common call, one str, never gets here: see `_set_model`.)
        return _encode(self._core, self._options(), input, *args, **kwargs)

    def _options(self) -> tuple[Any, bool, bool, bool, bool]:
        return (self._out_type, self._add_bos, self._add_eos, self._reverse, self._emit_unk_piece)

    def EncodeAsIds(self, input: Any, **kwargs: Any) -> Any:
        return self.Encode(input, out_type=int, **kwargs)

    def EncodeAsPieces(self, input: Any, **kwargs: Any) -> Any:
        return self.Encode(input, out_type=str, **kwargs)

    def encode_with_offsets(self, input: str) -> tuple[list[int], list[str], list[tuple[int, int]]]:
        """``(ids, pieces, offsets)``; offsets are UTF-8 byte spans of ``input``, as in
        sentencepiece's serialized ``SentencePieceText`` (piecework extension)."""
        return self._core.encode_with_offsets(_text(input))

    # ---- batches for data pipelines (piecework extensions, as on `Tokenizer`) ----

    def _batch_args(
        self,
        texts: Sequence[str | bytes],
        add_bos: bool | None,
        add_eos: bool | None,
        reverse: bool | None,
    ) -> tuple[list[str], bool, bool, bool]:
        return (
            _texts(list(texts)),
            self._add_bos if add_bos is None else add_bos,
            self._add_eos if add_eos is None else add_eos,
            self._reverse if reverse is None else reverse,
        )

    def encode_batch_ids(
        self,
        texts: Sequence[str | bytes],
        add_bos: bool | None = None,
        add_eos: bool | None = None,
        reverse: bool | None = None,
    ) -> list[list[int]]:
        """The ids of many texts, encoded in parallel: ``encode(texts, out_type=int)``."""
        return self._core.encode_ids_batch(*self._batch_args(texts, add_bos, add_eos, reverse))

    def encode_batch_flat(
        self,
        texts: Sequence[str | bytes],
        add_bos: bool | None = None,
        add_eos: bool | None = None,
        reverse: bool | None = None,
    ) -> TokenBatch:
        """The ids of many texts as one flat buffer plus row splits, encoded in parallel:
        zero-copy to numpy (`.ids`, `.row_splits`, `.to_numpy()`) and to Arrow
        (`pyarrow.array(batch)`), as `Tokenizer.encode_batch_flat`."""
        return TokenBatch(
            self._core.encode_ids_flat(*self._batch_args(texts, add_bos, add_eos, reverse))
        )

    # ---- decoding ----

    def Decode(self, input: Any, out_type: Any = str, **_ignored: Any) -> Any:
        if out_type is not str:
            raise ValueError(f"unsupported out_type={out_type!r} (str)")
        sp = self._core
        if input is None or (isinstance(input, (str, bytes)) and len(input) == 0):
            input = []
        if not _is_sequence(input):
            input = [input]
        if hasattr(input, "tolist"):
            input = input.tolist()
        is_batch = len(input) > 0 and _is_sequence(input[0])
        if is_batch:
            pieces = False
            for item in input:
                if _is_sequence(item) and len(item) > 0:
                    pieces = isinstance(item[0], (str, bytes))
                    break
            if pieces:
                return sp.decode_pieces_batch([[_text(p) for p in seq] for seq in input])
            return sp.decode_ids_batch([list(seq) for seq in input])
        if len(input) > 0 and isinstance(input[0], (str, bytes)):
            return sp.decode_pieces([_text(p) for p in input])
        return sp.decode_ids(list(input))

    def DecodeIds(self, input: Any, **kwargs: Any) -> Any:
        return self.Decode(input, **kwargs)

    def DecodePieces(self, input: Any, **kwargs: Any) -> Any:
        return self.Decode(input, **kwargs)

    # ---- vocabulary ----

    def GetPieceSize(self) -> int:
        return self._core.get_piece_size()

    def IdToPiece(self, id: Any) -> Any:
        return self._core.id_to_piece(id)

    def PieceToId(self, piece: Any) -> Any:
        return self._core.piece_to_id(piece)

    def GetScore(self, id: Any) -> Any:
        return self._core.get_score(id)

    def IsUnknown(self, id: Any) -> Any:
        return self._core.is_unknown(id)

    def IsControl(self, id: Any) -> Any:
        return self._core.is_control(id)

    def IsUnused(self, id: Any) -> Any:
        return self._core.is_unused(id)

    def IsByte(self, id: Any) -> Any:
        return self._core.is_byte(id)

    def unk_id(self) -> int:
        return self._core.unk_id()

    def bos_id(self) -> int:
        return self._core.bos_id()

    def eos_id(self) -> int:
        return self._core.eos_id()

    def pad_id(self) -> int:
        return self._core.pad_id()

    def serialized_model_proto(self) -> bytes:
        return self._core.serialized_model_proto() if self._sp is not None else b""

    def to_spm(self) -> str:
        """The vocabulary as ``.spm`` text (piecework extension)."""
        return self._core.to_spm_text()

    def __len__(self) -> int:
        return self.GetPieceSize()

    def __getitem__(self, piece: Any) -> Any:
        return self.PieceToId(piece)

    # ---- pickling ----

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_sp", None)
        for name in self._FAST_NAMES + self._FAST_IDS_NAMES:
            state.pop(name, None)
        state["model_proto"] = self.serialized_model_proto()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        proto = state.pop("model_proto", b"")
        self.__dict__.update(state)
        self._sp = None
        if proto:
            self.LoadFromSerializedProto(proto)

    # ---- aliases, as sentencepiece defines them ----

    Tokenize = Encode
    Detokenize = Decode
    encode = Encode
    tokenize = Encode
    encode_as_ids = EncodeAsIds
    encode_as_pieces = EncodeAsPieces
    decode = Decode
    detokenize = Decode
    decode_ids = DecodeIds
    decode_pieces = DecodePieces
    load = Load
    load_from_file = LoadFromFile
    load_from_serialized_proto = LoadFromSerializedProto
    get_piece_size = GetPieceSize
    piece_size = GetPieceSize
    vocab_size = GetPieceSize
    id_to_piece = IdToPiece
    piece_to_id = PieceToId
    get_score = GetScore
    is_unknown = IsUnknown
    is_control = IsControl
    is_unused = IsUnused
    is_byte = IsByte
