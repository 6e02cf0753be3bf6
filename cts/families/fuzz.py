"""Family "fuzz": seeded random models, expected outputs from a second endpoint.

``--fuzz-count N`` models (default 40: a quarter each of single-operation,
small, large and nested IF/WHILE models, ``nnhal.cts.fuzz_gen``) from ``--seed``.
Each runs first on the *oracle* (``Options.oracle``: a connected client
Device the caller chose; ``nnhal cts`` uses an in-process reference driver
unless ``--oracle ADDR`` names another endpoint) for the expected outputs,
then on the target (skipped when the target reports an operation
unsupported), compared with the tolerance table. The suite itself never
imports a driver. An oracle that is the same implementation as the target
cannot catch its kernel bugs: ``same_implementation`` tells, and the CLI
warns. A failing model is saved as a model file (vector JSON with its inputs
and the oracle's outputs) in ``--fuzz-dir``; ``nnhal run FILE --target ADDR``
replays it and ``nnhal vectors FILE --target ADDR`` re-checks it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nnhal.cts.core import Failure, TestCase, coverage_of, fail, skip
from nnhal.cts.fuzz_gen import CATEGORIES, random_model
from nnhal.cts.paths import run_test_model

from nnhal.errors import HalError
from nnhal.vectors import TestModel, save_vectors

FAMILY = "fuzz"

NO_ORACLE = (
    "no oracle endpoint: the fuzz family needs a second device for its expected outputs "
    "(pytest: --cts-oracle ADDR; `nnhal cts` uses the in-process reference or --oracle ADDR)"
)


def _identity(device: Any) -> tuple[str, str]:
    try:
        return device.getVersionString(), device.getType().name
    except HalError as e:
        return f"<no answer: {e.status.name}>", ""


def same_implementation(target_device: Any, oracle: Any) -> bool:
    """True when both endpoints report the same version string and device type."""
    return _identity(target_device) == _identity(oracle)


def oracle_outputs(oracle: Any, model, inputs) -> list:
    """The oracle's outputs for ``inputs`` (skip when the oracle cannot run the model)."""
    flags = oracle.getSupportedOperations_1_3(model)
    if not all(flags):
        skip(f"the oracle reports {flags.count(False)} operation(s) unsupported")
    prepared = oracle.prepareModel_1_3(model)
    try:
        result = prepared.execute(list(inputs))
    finally:
        prepared.release()
    return [o.copy() for o in result.outputs]


def _save(folder: Path, name: str, test: TestModel) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".json")
    save_vectors(path, [test])
    return path


def _case(seed: int, category: str, name: str, folder: Path):
    def run(target) -> str:
        fm = random_model(seed, category)
        oracle = target.options.oracle
        if oracle is None:
            skip(NO_ORACLE)
        try:
            expected = oracle_outputs(oracle, fm.model, fm.inputs)
        except HalError as e:
            # the oracle is not under test: its failure is an error of the run
            raise RuntimeError(f"the oracle failed: {e} ({fm.description})") from e
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
