"""The ANN interface (retrieve/ann) with each library, and how the library is chosen."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ctxbase.errors import ValidationError
from ctxbase.retrieve.ann import AnnIndex, AnnSettings, ann_class, settings_from_env
from ctxbase.retrieve.ann.hnsw import HnswlibIndex
from ctxbase.retrieve.ann.usearch_index import UsearchIndex

VARIANTS = {
    "hnswlib": (HnswlibIndex, AnnSettings(library="hnswlib")),
    "usearch-f16": (UsearchIndex, AnnSettings(library="usearch", scalar="f16")),
    "usearch-i8": (UsearchIndex, AnnSettings(library="usearch", scalar="i8")),
}
# recall@20 against exact search on clustered vectors, and read-back error, per variant
MIN_RECALL = {"hnswlib": 0.95, "usearch-f16": 0.95, "usearch-i8": 0.85}
READ_BACK_ERROR = {"hnswlib": 0.0, "usearch-f16": 1e-3, "usearch-i8": 1e-2}


def _clustered(n: int, dim: int = 64, seed: int = 0) -> np.ndarray:
    """Normalised vectors around 40 centres: structured like embeddings, unlike noise."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dim))
    x = centres[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _recall(index: AnnIndex, held: np.ndarray, queries: np.ndarray, k: int) -> float:
    exact = np.argsort(-(queries @ held.T), axis=1)[:, :k]
    hits = 0
    for q, want in zip(queries, exact, strict=True):
        labels, sims = index.search(q, k)
        assert len(labels) == k and np.all(np.diff(sims) <= 1e-6)  # best first
        hits += len(set(labels.tolist()) & set(want.tolist()))
    return hits / (k * len(queries))


def test_search_finds_what_exact_search_finds_after_build_and_appends(variant: str) -> None:
    cls, settings = VARIANTS[variant]
    data = _clustered(3050)
    queries, held = data[:50], data[50:]
    index = cls.build(held[:2000], settings)
    assert index.count == 2000 and index.library == settings.library
    grown = index.add(held[2000:], 2000)  # appended rows get the next labels
    assert grown.count == 3000
    assert _recall(grown, held, queries, 20) >= MIN_RECALL[variant]
    labels, sims = grown.search(held[2500], 1)  # an appended row finds itself
    assert labels.tolist() == [2500] and sims[0] == pytest.approx(1.0, abs=1e-2)


def test_vectors_read_back_as_stored(variant: str) -> None:
    cls, settings = VARIANTS[variant]
    held = _clustered(500)
    index = cls.build(held, settings)
    rows = np.array([3, 499, 0, 250], dtype=np.int64)
    back = index.vectors(rows)
    assert back.dtype == np.float32 and back.shape == (4, held.shape[1])
    assert float(np.abs(back - held[rows]).max()) <= READ_BACK_ERROR[variant]
    assert index.vectors(np.zeros(0, dtype=np.int64)).shape == (0, held.shape[1])


def test_compact_scalars_take_less_memory() -> None:
    held = _clustered(20_000, dim=384)
    cheap = {"expansion_add": 16, "connectivity": 8}  # the sizes, not the graph, matter here
    sizes = {
        name: cls.build(held, s.model_copy(update=cheap)).memory_bytes()
        for name, (cls, s) in VARIANTS.items()
    }
    # float32 vectors alone: 30 MB; float16 about half, int8 a quarter, plus the graph
    assert sizes["usearch-i8"] < sizes["usearch-f16"] < sizes["hnswlib"]
    assert sizes["hnswlib"] >= held.nbytes


def test_the_environment_chooses_the_library_and_scalar() -> None:
    assert settings_from_env({}) == AnnSettings()
    assert ann_class(AnnSettings()) is UsearchIndex  # preferred when installed
    i8 = settings_from_env({"CTXBASE_ANN": "usearch:i8"})
    assert (i8.library, i8.scalar) == ("usearch", "i8")
    assert ann_class(settings_from_env({"CTXBASE_ANN": "hnswlib"})) is HnswlibIndex
    for bad in ("faiss", "usearch:f8", "hnswlib:i8"):
        with pytest.raises(ValidationError) as err:
            settings_from_env({"CTXBASE_ANN": bad})
        assert err.value.field == "CTXBASE_ANN"


def test_the_environment_sets_the_graph() -> None:
    m12 = settings_from_env({"CTXBASE_ANN": "usearch:f16:m=12"})
    assert (m12.library, m12.scalar, m12.connectivity, m12.expansion_add) == (
        "usearch",
        "f16",
        12,
        None,
    )
    both = settings_from_env({"CTXBASE_ANN": "hnswlib:m=8:ea=100"})
    assert (both.library, both.connectivity, both.expansion_add) == ("hnswlib", 8, 100)
    assert settings_from_env({"CTXBASE_ANN": "auto:ea=64"}).expansion_add == 64
    assert settings_from_env({"CTXBASE_ANN": "usearch:m=10"}).scalar == AnnSettings().scalar
    # the built index takes them
    index = UsearchIndex.build(_clustered(200), m12)
    assert index._index.connectivity == 12
    bad = {
        "usearch:f16:m=x": "m='x': not an integer (connectivity)",
        "usearch:m=1": "m=1: input should be greater than or equal to 2",
        "usearch:f16:m=300": "m=300: input should be less than or equal to 256",
        "hnswlib:ea=0": "ea=0: input should be greater than or equal to 1",
        "usearch:f16:ef=9": "unknown setting 'ef=9': use m=<int> or ea=<int>",
        "usearch:f16:m": "unknown setting 'm': use m=<int> or ea=<int>",
    }
    for raw, message in bad.items():
        with pytest.raises(ValidationError) as err:
            settings_from_env({"CTXBASE_ANN": raw})
        assert (err.value.field, str(err.value)) == ("CTXBASE_ANN", f"CTXBASE_ANN: {message}")


def test_without_the_libraries_auto_falls_back_and_a_named_one_says_what_to_install() -> None:
    script = textwrap.dedent(
        """
        import sys
        class Hidden:  # as if neither library were installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("usearch", "hnswlib"):
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, Hidden())
        from ctxbase.errors import ValidationError
        from ctxbase.retrieve.ann import AnnSettings, ann_class, settings_from_env
        print(ann_class(AnnSettings()))
        for name in ("usearch", "hnswlib"):
            try:
                settings_from_env({"CTXBASE_ANN": name})
            except ValidationError as exc:
                print(exc)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0] == "None"  # exact search at every size
    assert "usearch is not installed" in out[1] and "pip install 'ctxbase[ann]'" in out[1]
    assert "hnswlib is not installed" in out[2] and "pip install hnswlib" in out[2]


def test_the_cli_names_a_bad_setting_and_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "CTXBASE_DB": str(tmp_path / "c.db")}
    cli = [sys.executable, "-m", "ctxbase", "--embedder", "hash", "-q"]
    capture = [*cli, "capture", "--session", "s", "--text", "the cache is cold"]
    subprocess.run(capture, capture_output=True, env=env, check=True)
    for value, message in (
        ("usearch:f8", "unknown scalar 'f8': use f16, i8 or f32"),
        ("usearch:f16:m=twelve", "m='twelve': not an integer (connectivity)"),
    ):
        env["CTXBASE_ANN"] = value
        run = subprocess.run([*cli, "search", "cache"], capture_output=True, text=True, env=env)
        assert run.returncode == 2
        assert run.stderr.strip().splitlines() == [f"error: CTXBASE_ANN: {message}"]
