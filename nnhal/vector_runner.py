"""Running test models (``nnhal.vectors``) against a device, as the vectors README says.

One test model goes: support query (``explainSupportedOperations``) ->
``prepareModel_1_3`` -> execute with the stored inputs and output buffers
sized by the expected shapes -> compare every output that is not ignored.

- *skipped* means only one thing: the device reported an operation of the
  model unsupported (the reasons go in the result), also for ``expectFailure``
  models (failing to prepare an unsupported operation proves nothing);
- an ``expectFailure`` model passes when the support query, preparing or
  executing fails with an error status, and fails when everything succeeds;
- anything else that goes wrong is *failed*, with the message.

The device is any object with the client ``Device`` methods
(``nnhal.client.Device``): a server's (``connect_device``) or the in-process
driver behind a real gRPC server (``nnhal.tools.local.local_device``).
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nnhal.errors import HalError
from nnhal.tolerance import check_multinomial, compare
from nnhal.vectors import TestModel

__all__ = [
    "VectorResult",
    "compare_outputs",
    "connect_device",
    "dump_name",
    "output_dtypes",
    "run_test_model",
    "run_vectors",
    "summary_line",
    "write_report",
]

log = logging.getLogger(__name__)

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class VectorResult:
    name: str
    result: str  # "passed" | "failed" | "skipped"
    error: str | None = None  # why it failed / was skipped / the expected failure seen
    worst_error: float | None = None  # largest absolute element error over compared outputs
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        worst: float | str | None = self.worst_error
        if worst is not None and not math.isfinite(worst):
            worst = "inf"  # JSON has no Infinity
        return {
            "name": self.name,
            "source": self.source,
            "result": self.result,
            "error": self.error,
            "worstError": worst,
        }


def dump_name(name: str) -> str:
    """The file stem ``--dump-outputs`` uses for a test model."""
    return name.replace("/", "__")


def _status(e: HalError) -> str:
    return str(e)  # "<STATUS>: message"


def output_dtypes(test: TestModel) -> list[np.dtype | None] | None:
    """``execute``'s ``output_dtypes`` for a test model: for each output of a vendor
    extension operand type, the dtype of its expected value (the vector file stores it);
    None where the operand type has its own layout, and None when no output needs one."""
    from nnhal._client_io import extension_output_dtypes

    return extension_output_dtypes(test.model, test.expected)


def run_test_model(
    device: Any,
    test: TestModel,
    *,
    dump_dir: Path | None = None,
    loop_timeout_ns: int | None = None,
) -> VectorResult:
    """Run one test model on ``device`` (a client Device) and judge the result."""

    def result(kind: str, error: str | None = None, worst: float | None = None) -> VectorResult:
        return VectorResult(test.name, kind, error, worst, test.source)

    expect_failure = test.expectFailure
    try:
        supported, reasons = device.explainSupportedOperations(test.model)
    except HalError as e:
        if expect_failure:
            return result(PASSED, f"expected failure: getSupportedOperations_1_3: {_status(e)}")
        return result(FAILED, f"getSupportedOperations_1_3: {_status(e)}")
    # Unsupported is "skipped" even for expectFailure models: a device that cannot
    # run an operation says nothing about whether it rejects the invalid use of it.
    if not all(supported):
        why = "; ".join(
            f"operation {i}: {reasons.get(i, reasons.get(str(i), 'not supported'))}"
            for i, ok in enumerate(supported)
            if not ok
        )
        return result(SKIPPED, f"not supported by the device: {why}")

    try:
        prepared = device.prepareModel_1_3(test.model)
    except HalError as e:
        if expect_failure:
            return result(PASSED, f"expected failure: prepareModel_1_3: {_status(e)}")
        return result(FAILED, f"prepareModel_1_3: {_status(e)}")
    try:
        try:
            run = prepared.execute(
                test.inputs,
                output_shapes=test.expected_shapes,
                output_dtypes=output_dtypes(test),
                loop_timeout_ns=loop_timeout_ns,
            )
        except HalError as e:
            if expect_failure:
                return result(PASSED, f"expected failure: execute: {_status(e)}")
            return result(FAILED, f"execute: {_status(e)}")
    finally:
        try:
            prepared.release()
        except Exception:  # a failed release must not hide the verdict
            log.warning("%s: releasing the prepared model failed", test.name, exc_info=True)

    outputs = list(run.outputs)
    if dump_dir is not None:
        np.savez(
            Path(dump_dir) / f"{dump_name(test.name)}.npz",
            **{f"out{k}": np.asarray(a) for k, a in enumerate(outputs)},
        )
    if expect_failure:
        return result(FAILED, "expected a failure, but prepare and execute succeeded")
    if len(outputs) != len(test.expected):
        return result(FAILED, f"got {len(outputs)} outputs, expected {len(test.expected)}")

    problems, worst = compare_outputs(test, outputs)
    if problems:
        return result(FAILED, "; ".join(problems), worst)
    return result(PASSED, None, worst)


def compare_outputs(test: TestModel, outputs: Sequence[Any]) -> tuple[list[str], float | None]:
    """Every output that is not ignored against the vector's expected value, by the
    tolerance rules: (what differs, one message per output; the worst error seen)."""
    worst: float | None = None
    problems = []
    for k, (exp, act) in enumerate(zip(test.expected, outputs)):
        if exp is None or test.ignored[k]:
            continue
        if test.expectedMultinomialDistributionTolerance > 0 and test.inputs[0] is not None:
            ok, err, msg = check_multinomial(
                test.inputs[0], act, test.expectedMultinomialDistributionTolerance
            )
            msg = f"output {k}: {msg}"
        else:
            ok, err, msg = compare(exp, act, test.output_types[k], test, output_index=k)
        worst = err if worst is None else max(worst, err)
        if not ok:
            problems.append(msg)
    return problems, worst


def run_vectors(
    device: Any,
    tests: Sequence[TestModel],
    *,
    progress: bool = True,
    dump_dir: Path | None = None,
    loop_timeout_ns: int | None = None,
) -> list[VectorResult]:
    """Run every test model in order; one result each. Never raises for a single model."""
    from tqdm import tqdm

    if dump_dir is not None:
        Path(dump_dir).mkdir(parents=True, exist_ok=True)
    results = []
    bar = tqdm(total=len(tests), file=sys.stderr, disable=not progress, unit="model")
    try:
        for t in tests:
            try:
                r = run_test_model(device, t, dump_dir=dump_dir, loop_timeout_ns=loop_timeout_ns)
            except Exception as e:  # noqa: BLE001 - transport faults etc. fail this model only
                r = VectorResult(t.name, FAILED, f"{type(e).__name__}: {e}", None, t.source)
            results.append(r)
            bar.update(1)
            if r.result == FAILED:
                bar.set_postfix_str(f"failed: {sum(x.result == FAILED for x in results)}")
    finally:
        bar.close()
    return results


def summary_line(results: Iterable[VectorResult]) -> str:
    results = list(results)
    n = {k: sum(r.result == k for r in results) for k in (PASSED, FAILED, SKIPPED)}
    return f"{n[PASSED]} passed, {n[FAILED]} failed, {n[SKIPPED]} skipped"


def write_report(path: str | Path, results: Iterable[VectorResult]) -> None:
    """The ``--json-report`` file: summary counts and one entry per test model."""
    results = list(results)
    doc = {
        "summary": summary_line(results),
        "results": [r.to_json() for r in results],
    }
    Path(path).write_text(json.dumps(doc, indent=1), encoding="utf-8")


@contextmanager
def connect_device(
    address: str, timeout: float = 10.0, security: Any = None, device: str | None = None
) -> Iterator[Any]:
    """A client Device connected to ``address`` (its ``device``, default the first), closed
    on exit (``security``: TLS, token)."""
    from nnhal.client import connect

    dev = connect(address, timeout=timeout, security=security, device=device or None)
    try:
        yield dev
    finally:
        dev.close()
