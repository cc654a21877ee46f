"""Reference retrievers that need no storage engine, so the harness can be tested alone."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from ctxbase.evaluation.locomo import Conversation, Turn

__all__ = [
    "BM25Retriever",
    "Tokenizer",
    "cjk_bigram_tokenize",
    "simple_tokenize",
    "turn_document",
]

Tokenizer = Callable[[str], list[str]]

_WORD = re.compile(r"[^\W_]+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def simple_tokenize(text: str) -> list[str]:
    """Lowercase runs of letters and digits; CJK text stays in whole unsplit runs."""
    return _WORD.findall(text.lower())


def cjk_bigram_tokenize(text: str) -> list[str]:
    """`simple_tokenize`, with CJK runs cut into overlapping character bigrams.

    A dictionary-free way to match Chinese; single characters stand alone.
    """
    tokens: list[str] = []
    for word in _WORD.findall(text.lower()):
        position = 0
        for run in _CJK_RUN.finditer(word):
            if run.start() > position:
                tokens.append(word[position : run.start()])
            chars = run.group()
            if len(chars) == 1:
                tokens.append(chars)
            else:
                tokens.extend(chars[i : i + 2] for i in range(len(chars) - 1))
            position = run.end()
        if position < len(word):
            tokens.append(word[position:])
    return tokens


def turn_document(turn: Turn) -> str:
    """The text indexed for a turn: speaker, utterance and any image caption."""
    parts = [turn.speaker, turn.text]
    if turn.blip_caption:
        parts.append(turn.blip_caption)
    return " ".join(parts)


@dataclass(slots=True)
class _Index:
    ids: list[str]
    lengths: list[int]
    postings: dict[str, list[tuple[int, int]]]  # term -> (document number, term frequency)
    average_length: float


class BM25Retriever:
    """Okapi BM25 over the turns of each indexed conversation, in memory."""

    def __init__(
        self,
        tokenizer: Tokenizer = simple_tokenize,
        k1: float = 1.2,
        b: float = 0.75,
        name: str = "bm25",
        document: Callable[[Turn], str] = turn_document,
    ) -> None:
        self.name = name
        self.tokenizer = tokenizer
        self.k1 = k1
        self.b = b
        self.document = document
        self._indexes: dict[str, _Index] = {}

    def index(self, conv: Conversation) -> None:
        ids: list[str] = []
        lengths: list[int] = []
        postings: dict[str, list[tuple[int, int]]] = {}
        for number, turn in enumerate(conv.turns):
            tokens = self.tokenizer(self.document(turn))
            ids.append(turn.dia_id)
            lengths.append(len(tokens))
            for term, frequency in Counter(tokens).items():
                postings.setdefault(term, []).append((number, frequency))
        average = sum(lengths) / len(lengths) if lengths else 0.0
        self._indexes[conv.conv_id] = _Index(ids, lengths, postings, average)

    def search(self, conv_id: str, question: str, k: int) -> list[str]:
        index = self._indexes[conv_id]
        count = len(index.ids)
        scores: dict[int, float] = {}
        # Repeated query terms count once, as in most BM25 engines.
        for term in dict.fromkeys(self.tokenizer(question)):
            postings = index.postings.get(term)
            if not postings:
                continue
            # The "+1" form of idf keeps weights positive for very common terms.
            idf = math.log(1.0 + (count - len(postings) + 0.5) / (len(postings) + 0.5))
            for number, frequency in postings:
                norm = 1.0 - self.b + self.b * index.lengths[number] / (index.average_length or 1)
                weight = frequency * (self.k1 + 1.0) / (frequency + self.k1 * norm)
                scores[number] = scores.get(number, 0.0) + idf * weight
        # Ties keep conversation order so results are deterministic.
        ranked = sorted(scores, key=lambda number: (-scores[number], number))
        return [index.ids[number] for number in ranked[:k]]
