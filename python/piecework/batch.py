"""`TokenBatch`: the ids of many texts as one flat buffer plus row splits.

Row ``i`` is ``ids[row_splits[i]:row_splits[i + 1]]``. ``ids`` and ``row_splits`` are numpy
views of the Rust buffers (through DLPack, no copy); numpy is imported only when they are
asked for. ``__arrow_c_array__`` hands the same buffers to Arrow (``pyarrow.array(batch)``) as a
``large_list<uint32>`` without needing pyarrow here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _core

if TYPE_CHECKING:
    import numpy as np


class TokenBatch:
    """Flat ids of a batch; see the module documentation."""

    __slots__ = ("_b",)

    def __init__(self, batch: _core.TokenBatch) -> None:
        self._b = batch

    def __len__(self) -> int:
        return len(self._b)

    def __getitem__(self, i: int) -> list[int]:
        return self._b.row(i)

    def __repr__(self) -> str:
        return f"TokenBatch(rows={len(self)}, tokens={self._b.num_tokens})"

    @property
    def num_tokens(self) -> int:
        return self._b.num_tokens

    @property
    def ids(self) -> np.ndarray:
        """All ids, row after row: a zero-copy ``uint32`` numpy array."""
        import numpy as np

        return np.from_dlpack(self._b.ids_buffer)

    @property
    def row_splits(self) -> np.ndarray:
        """Row boundaries (length ``len(self) + 1``): a zero-copy ``int64`` numpy array."""
        import numpy as np

        return np.from_dlpack(self._b.row_splits_buffer)

    def lengths(self) -> np.ndarray:
        """The number of ids of each row."""
        import numpy as np

        return np.diff(self.row_splits)

    def to_list(self) -> list[list[int]]:
        return self._b.to_list()

    def to_numpy(self, padded: bool = True, pad_id: int = 0) -> Any:
        """A ``(rows, longest)`` uint32 matrix padded on the right with ``pad_id`` (or, with
        ``padded=False``, a list of per-row views into the flat buffer)."""
        import numpy as np

        ids, splits = self.ids, self.row_splits
        if not padded:
            return [ids[splits[i] : splits[i + 1]] for i in range(len(self))]
        lengths = np.diff(splits)
        width = int(lengths.max()) if len(lengths) else 0
        out = np.full((len(self), width), pad_id, dtype=np.uint32)
        # Scatter every id to (row, column) in one vectorised step.
        rows = np.repeat(np.arange(len(self)), lengths)
        cols = np.arange(len(ids)) - np.repeat(splits[:-1], lengths)
        out[rows, cols] = ids
        return out

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        return self._b.__arrow_c_array__(requested_schema)
