"""The test families and the spec library they share.

Each family is a module with ``collect(library, options) -> list[TestCase]``;
``FAMILIES`` maps the names ``--families`` takes to those modules, in the
order a run goes through them. Collecting never talks to the target, so the
test ids of a run depend only on the suite and its options (an expectations
file stays valid); capabilities are probed by the tests themselves, once
(``Target.capability``), and a family the target lacks is skipped with the
probe's reason.

``Library`` is what the families draw their models from, built once per
run: the spec library expanded into generated test models
(``nnhal.cts.specs`` + ``nnhal.cts.variations``) and, unless turned off,
the shipped NNAPI corpus (``data/nnapi/``: 5,978 models of Android's
generated tests, Apache-2.0, see ``data/nnapi/NOTICE``; ``nnhal.cts.corpus``), whose test
ids carry the prefix ``nnapi/``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType

from nnhal.cts.corpus import load_corpus, validation_picks
from nnhal.cts.dsl import SpecDef
from nnhal.cts.specs import load_library
from nnhal.cts.variations import GeneratedModel, expand

__all__ = ["DEFAULT_FAMILIES", "FAMILIES", "Library", "family_module"]

#: family name -> module (under nnhal.cts.families), in run order
FAMILIES: dict[str, str] = {
    "basic": "basic",
    "generated": "generated",
    "execution": "execution",
    "model-validation": "model_validation",
    "request-validation": "request_validation",
    "qos": "qos",
    "control-flow": "control_flow",
    "burst": "burst",
    "fenced": "fenced",
    "caching": "caching",
    "memory-domain": "memory_domain",
    "extensions": "extensions",
    "fuzz": "fuzz",
    "vectors": "vectors",
}
#: what runs without --families ("vectors" joins when --vectors is given)
DEFAULT_FAMILIES = tuple(f for f in FAMILIES if f != "vectors")  # noqa: RUF100


def family_module(name: str) -> ModuleType:
    return importlib.import_module(f"nnhal.cts.families.{FAMILIES[name]}")


@dataclass
class Library:
    """The spec library, expanded: every generated test model, and what failed to load."""

    specs: list[SpecDef] = field(default_factory=list)
    models: list[GeneratedModel] = field(default_factory=list)
    #: (spec or module, message)
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: the shipped NNAPI corpus (empty when turned off)
    corpus: list[GeneratedModel] = field(default_factory=list)

    @classmethod
    def load(cls, extra: tuple[str, ...] = (), corpus: bool = True) -> Library:
        specs, errors = load_library(extra)
        lib = cls(specs=specs, errors=list(errors))
        if corpus:
            lib.corpus, corpus_errors = load_corpus()
            lib.errors.extend(corpus_errors)
        for s in specs:
            try:
                lib.models.extend(expand(s))
            except Exception as e:  # noqa: BLE001 - a broken spec is reported, not fatal
                lib.errors.append((s.name, f"{type(e).__name__}: {e}"))
        return lib

    def all_models(self) -> list[GeneratedModel]:
        """Every test model: the spec library's, then the corpus's (generated, path families)."""
        return self.models + self.corpus

    def path_models(self) -> list[GeneratedModel]:
        """The burst and fenced families' models: every spec-library model, and the corpus's
        models without a graph variation (every data type of every spec; graph variations
        change the graph, not the requests, and run in the generated family)."""
        return self.models + [m for m in self.corpus if not m.graph]

    def validation_models(self) -> list[GeneratedModel]:
        """Models the validation families mutate: the spec library's data-type models, plus
        from the corpus, for every operation, one float and one quantized model whose
        (operation, type) the spec library does not have already."""
        return self.data_type_models() + validation_picks(self.corpus, self.data_type_models())

    def spec_bases(self) -> list[tuple[str, GeneratedModel]]:
        """(key, model): one model per spec for qos and request validation; the spec
        library's first base example (key: the spec), the corpus's first model without a
        graph variation (key: ``nnapi/<spec>``)."""
        chosen: dict[str, GeneratedModel] = {}
        for m in self.base_models():
            if not m.test.expectFailure:
                chosen.setdefault(m.spec, m)
        for m in self.corpus:
            if not m.graph and not m.test.expectFailure:
                chosen.setdefault(f"nnapi/{m.spec}", m)
        return list(chosen.items())

    def base_models(self) -> list[GeneratedModel]:
        """One model per spec and example: the unvaried ones."""
        return [m for m in self.models if m.variation == "base"]

    def data_type_models(self) -> list[GeneratedModel]:
        """Base and data-type variations, without graph variations."""
        return [m for m in self.models if not m.graph]
