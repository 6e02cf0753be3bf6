"""Seed corpora: valid models, requests and op-package configs to start mutating from.

- ``seed_models()``: (model, inputs) pairs: every test model of the CTS spec
  library (``cts/specs``, about 700, always in the repository), seeded
  control-flow models of ``nnhal.cts.fuzz_gen`` and, when ``FUZZ_VECTORS`` names
  the NNAPI vectors folder (or is ``1``: ``$NNHAL_VECTORS``, else
  ``../shared/nnapi-vectors``), the 5,978 conformance models too (they cover
  all 102 operations; the long runs use them, CI does not depend on them).
- ``model_messages()`` / ``config_files()``: the byte inputs of the proto and
  loader targets (``nnhal.tools.fuzz.targets`` documents their layout).
- ``write_corpus(target, folder)``: those seeds as files, for atheris.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nnhal import convert as cv
from nnhal import convert_legacy as legacy
from nnhal.types import Model

#: the repository checkout: the fuzz harness seeds from its examples and tests
ROOT = Path(__file__).resolve().parents[2]
SHARED_SEEDS = ROOT.parent / "shared" / "seeds"


@dataclass(frozen=True)
class Seed:
    name: str
    model: Model
    inputs: tuple[np.ndarray, ...]


def _vector_folder() -> Path | None:
    value = os.environ.get("FUZZ_VECTORS", "")
    if not value or value == "0":
        return None
    if value != "1":
        return Path(value)
    env = os.environ.get("NNHAL_VECTORS")
    return Path(env) if env else ROOT.parent / "shared" / "nnapi-vectors"


@functools.lru_cache(maxsize=1)
def seed_models() -> tuple[Seed, ...]:
    from nnhal.cts.fuzz_gen import random_model
    from nnhal.cts.specs import load_library
    from nnhal.cts.variations import expand

    seeds: list[Seed] = []
    specs, _errors = load_library()
    for spec_def in specs:
        for generated in expand(spec_def):
            test = generated.test
            if not test.expectFailure:
                seeds.append(Seed(test.name, test.model, tuple(test.inputs)))
    for n in range(24):
        fm = random_model(n, "control")
        seeds.append(Seed(f"fuzz_gen/control/{n}", fm.model, tuple(fm.inputs)))
    folder = _vector_folder()
    if folder is not None and folder.is_dir():
        from nnhal.vectors import find_vector_files, load_vectors

        for path in find_vector_files([folder]):
            for test in load_vectors(path):
                if not test.expectFailure:
                    seeds.append(Seed(test.name, test.model, tuple(test.inputs)))
    return tuple(seeds)


@functools.lru_cache(maxsize=1)
def model_messages() -> tuple[bytes, ...]:
    """Inputs of ``proto_target``: a kind byte, then the serialized message."""
    from nnhal.tools.fuzz.targets import MESSAGE_KINDS

    kinds = {name: i for i, name in enumerate(MESSAGE_KINDS)}
    out: list[bytes] = []
    for n, seed in enumerate(seed_models()):
        out.append(bytes([kinds["model_1_3"]]) + cv.model_to_pb(seed.model).SerializeToString())
        if not seed.model.referenced and n % 3 == 0:
            for kind, encode in (
                ("model_1_2", legacy.model_to_v1_2_pb),
                ("model_1_1", legacy.model_to_v1_1_pb),
                ("model_1_0", legacy.model_to_v1_0_pb),
            ):
                try:
                    out.append(bytes([kinds[kind]]) + encode(seed.model).SerializeToString())
                except ValueError:
                    pass  # a 1.3-only feature: no such legacy form
        if n % 2 == 0:
            from nnhal.tools.fuzz.models import request_for

            request = request_for(seed.model, seed.inputs)
            prefix = bytes([kinds["request_1_3"], n >> 8 & 0xFF, n & 0xFF])
            out.append(prefix + cv.request_to_pb(request).SerializeToString())
            prefix = bytes([kinds["request_1_0"], n >> 8 & 0xFF, n & 0xFF])
            out.append(prefix + legacy.request_to_v1_0_pb(request).SerializeToString())
    return tuple(out)


def _config_paths() -> list[Path]:
    paths: list[Path] = []
    for folder in (ROOT / "tests" / "data" / "op_packages", ROOT / "examples"):
        for suffix in ("*.xml", "*.json", "*.ini"):
            paths.extend(p for p in folder.rglob(suffix) if p.name not in ("model.json",))
    return sorted(p for p in paths if p.name != "expected.json")


def _snippets(text: str, start: str, end: str) -> list[str]:
    """Examples embedded in the vendor documentation seeds (from ``start`` to ``end``)."""
    out, pos = [], 0
    while True:
        i = text.find(start, pos)
        if i < 0:
            return out
        j = text.find(end, i)
        if j < 0:
            return out
        out.append(text[i : j + len(end)])
        pos = j + len(end)


@functools.lru_cache(maxsize=1)
def config_files() -> tuple[bytes, ...]:
    """Inputs of ``loader_target``: a syntax byte (0 xml, 1 json, 2 ini), then the file."""
    syntax = {".xml": 0, ".json": 1, ".ini": 2}
    out = [bytes([syntax[p.suffix]]) + p.read_bytes() for p in _config_paths()]
    if SHARED_SEEDS.is_dir():  # the vendor documents: their example configs
        for path in sorted(SHARED_SEEDS.glob("*.txt")):
            text = path.read_text("utf-8", "replace")
            for snippet in _snippets(text, "<OpDefCollection", "</OpDefCollection>"):
                out.append(b"\x00" + snippet.encode())
            for snippet in _snippets(text, '{\n    "UdoPackage_0"', "\n}"):
                out.append(b"\x01" + snippet.encode())
            if "op.pattern" in text or "[" in text and "input0.name" in text:
                out.append(b"\x02" + text.encode())
    return tuple(out)


def seeds_for(target: str) -> tuple[bytes, ...]:
    """The starting inputs of one target (byte strings)."""
    if target in ("proto",):
        return model_messages()
    if target == "loaders":
        return config_files()
    if target == "grpc":
        from nnhal.tools.fuzz.live import seed_calls

        return seed_calls()
    return tuple(bytes([i]) * 64 for i in range(8))  # generated targets: any bytes do


def write_corpus(target: str, folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    seeds = seeds_for(target)
    for i, data in enumerate(seeds):
        (folder / f"seed-{i:05d}").write_bytes(data)
    return len(seeds)
