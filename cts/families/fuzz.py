"""Family "fuzz": seeded random models against the reference executor.

``--fuzz-count N`` models (default 40: a quarter each of single-operation,
small, large and nested IF/WHILE models, ``nnhal.cts.fuzz_gen``) from ``--seed``.
Each runs on the reference (the driver's own executor, in this process,
imported lazily) for the expected outputs, then on the target (skipped when
the target reports an operation unsupported), compared with the tolerance
table. A failing model is saved as a model file (vector JSON with its inputs
and the reference outputs) in ``--fuzz-dir``; ``nnhal run FILE --target
ADDR`` replays it and ``nnhal vectors FILE --target ADDR`` re-checks it.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from nnhal.cts.core import Failure, TestCase, coverage_of, fail
from nnhal.cts.fuzz_gen import CATEGORIES, random_model
from nnhal.cts.paths import run_test_model

from nnhal.vectors import TestModel, save_vectors

FAMILY = "fuzz"


_REFERENCE_LOCK = threading.Lock()


def reference_outputs(model, inputs):
    """The driver's executor in this process (default profile): the expected outputs.

    One at a time: the reference is a library here, not a server, and its
    first use loads the operation registry.
    """
    from nnhal.driver.device import Device  # lazily: only the fuzz family needs the reference

    with _REFERENCE_LOCK:
        prepared = Device().prepareModel_1_3(model)
        return prepared.compiled.run(inputs)


def _save(folder: Path, name: str, test: TestModel) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".json")
    save_vectors(path, [test])
    return path


def _case(seed: int, category: str, name: str, folder: Path):
    def run(target) -> str:
        fm = random_model(seed, category)
        try:
            expected = [o.copy() for o in reference_outputs(fm.model, fm.inputs)]
        except Exception as e:
            raise RuntimeError(f"fuzz generator or reference: {e} ({fm.description})") from e
        main = fm.model.main
        test = TestModel(
            name=name,
            model=fm.model,
            inputs=list(fm.inputs),
            expected=expected,
            expected_shapes=[tuple(e.shape) for e in expected],
            output_types=[main.operands[i].type for i in main.outputIndexes],
            ignored=[False] * len(expected),
        )
        try:
            run_test_model(target, test, path="sync")
        except Failure as e:
            path = _save(folder, name, test)
            fail(
                f"{e} [{fm.description}; saved as {path}: replay with nnhal run {path} "
                f"--target {target.address}]"
            )
        return fm.description

    return run


def collect(library, options) -> list[TestCase]:
    cases = []
    for k in range(options.fuzz_count):
        category = CATEGORIES[k % len(CATEGORIES)]
        seed = options.seed + k // len(CATEGORIES)
        name = f"{FAMILY}/{category}/{seed}"
        model = random_model(seed, category).model
        cases.append(
            TestCase(
                name,
                FAMILY,
                _case(seed, category, name, Path(options.fuzz_dir)),
                coverage=coverage_of([model]),
            )
        )
    return cases
