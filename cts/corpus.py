"""The shipped NNAPI corpus: Android's generated test models as package data.

``data/nnapi/`` holds 5,978 test models in 466 files (the models and golden
outputs CTS and VTS run against every NN HAL driver; Apache-2.0, see
``data/nnapi/NOTICE``; the format is ``data/nnapi/README.md``, read by
``nnhal.vectors``). Every HAL 1.3 operation except IF and WHILE has models
here; the spec library adds those two.

- ``load_corpus()`` gives them as ``GeneratedModel`` records (origin
  ``nnapi``; the variation split into its data-type and graph parts), plus
  a (file, message) entry for a file that cannot be read;
- ``validation_picks(corpus, have)`` chooses the corpus models the
  validation families mutate: for every (operation, float or quantized
  operand type) the models in ``have`` leave out, one model without a graph
  variation, so every operation gets its mutations and its invalid requests
  without mutating all 5,978 models.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nnhal.cts.core import coverage_of
from nnhal.cts.variations import GeneratedModel

from nnhal.vectors import find_vector_files, load_vectors

__all__ = ["CORPUS_DIR", "load_corpus", "validation_picks"]

CORPUS_DIR = Path(__file__).resolve().parent / "data" / "nnapi"

#: parts of a corpus variation name that change the graph, not the data types
_GRAPH_PARTS = ("all_tensors_as_inputs", "all_inputs_as_internal")

#: operand types whose (operation, type) pairs the validation picks cover
_FLOAT = ("TENSOR_FLOAT32",)
_QUANT = ("TENSOR_QUANT8_ASYMM", "TENSOR_QUANT8_ASYMM_SIGNED")


def _split(variation: str) -> tuple[str, str]:
    graph = [p for p in _GRAPH_PARTS if p in variation]
    data = variation
    for p in graph:
        data = data.replace(p, "")
    data = "_".join(x for x in data.split("_") if x) or "base"
    return data, "_".join(graph)


def load_corpus(folder: Path = CORPUS_DIR) -> tuple[list[GeneratedModel], list[tuple[str, str]]]:
    """Every corpus model, and (file, message) for each file that could not be read."""
    models: list[GeneratedModel] = []
    errors: list[tuple[str, str]] = []
    try:
        files = find_vector_files([str(folder)])
    except ValueError as e:
        return [], [(f"nnapi/{folder.name}", str(e))]
    for f in files:
        try:
            tests = load_vectors(f)
        except ValueError as e:
            errors.append((f"nnapi/{f.name}", str(e)))
            continue
        for t in tests:
            variation = t.name.split("/", 1)[1] if "/" in t.name else "base"
            data_type, graph = _split(variation)
            spec = t.spec or t.name.split("/", 1)[0]
            models.append(GeneratedModel(spec, variation, data_type, graph, t, origin="nnapi"))
    return models, errors


def validation_picks(
    corpus: Sequence[GeneratedModel], have: Sequence[GeneratedModel]
) -> list[GeneratedModel]:
    """One corpus model per (operation, float32 or quant8 type) that ``have`` leaves out."""
    covered = {pair for m in have for pair in coverage_of([m.test.model])}
    picks: list[GeneratedModel] = []
    for m in corpus:
        if m.graph or m.test.expectFailure or m.test.model.relaxComputationFloat32toFloat16:
            continue
        pairs = set(coverage_of([m.test.model]))
        wanted = {p for p in pairs if p[1] in _FLOAT + _QUANT} - covered
        if wanted:
            picks.append(m)
            covered |= pairs
    return picks
