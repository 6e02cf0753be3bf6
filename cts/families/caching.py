"""Family "caching": compilation caching (hal13.md §1.2 and §5.9).

Always run (they hold whether or not the target caches):

- ``prepare-with-cache-arguments``: prepareModel_1_3 given one model cache
  and one data cache file and a token must still prepare a working model,
  whatever the target needs (cache arguments never change the outcome of a
  preparation); local targets only, since cache files are paths;
- ``prepareModelFromCache-unsupported``: when getNumberOfCacheFilesNeeded is
  (0, 0), prepareModelFromCache_1_3 must be exactly GENERAL_FAILURE.

When the target caches (N, M) files (and is on this host), on a model with
constants (fully_connected in the first data type the target supports, or
another base model it supports): ``save-and-retrieve`` (NONE, or GENERAL_FAILURE for "cannot cache
this model", and then correct results), ``retrieve-wrong-number`` (a handle
missing: INVALID_ARGUMENT or GENERAL_FAILURE), ``corrupted-model-cache``,
``appended-model-cache``, ``wrong-token`` and ``other-model-cache``
(exactly GENERAL_FAILURE: a tampered security-sensitive cache must never be
used), ``corrupted-data-cache`` (any status, but NONE exactly when a model
comes back). Otherwise these are skipped with the reason.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from nnhal.cts.core import TestCase, check, fail, skip
from nnhal.cts.paths import check_success, execute, layout

from nnhal import convert as cv
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.client import PreparedModel
from nnhal.errors import HalError
from nnhal.types import ErrorStatus
from nnhal.vectors import TestModel

FAMILY = "caching"
TOKEN = bytes(range(32))


def _candidates(library) -> list[TestModel]:
    """Models with constants to cache, in the order tried: fully_connected in each data type
    (float32, float16, quant8 asymm and signed), then every other base model."""
    models = [m for m in library.data_type_models() if not m.test.expectFailure]
    first = [m for m in models if m.spec == "fully_connected"]
    rest = [m for m in models if m.variation == "base" and m.spec != "fully_connected"]
    return [m.test for m in first + rest]


class _Chooser:
    """The first candidate the target supports, found by asking it once per run."""

    def __init__(self, candidates: list[TestModel]) -> None:
        self.candidates = candidates

    def __call__(self, target) -> TestModel:
        def find() -> TestModel | None:
            for test in self.candidates:
                try:
                    flags = target.device.getSupportedOperations_1_3(test.model)
                except HalError:
                    continue
                if flags and all(flags):
                    return test
            return None

        test = target.cached("caching-model", find)
        if test is None:
            skip("the target supports none of the spec library's models to cache")
        return test


def _model(library) -> _Chooser | None:
    candidates = _candidates(library)
    return _Chooser(candidates) if candidates else None


def _handles(folder: Path, prefix: str, count: int) -> list[list[str]]:
    paths = []
    for k in range(count):
        p = folder / f"{prefix}{k}"
        p.touch()
        paths.append([str(p)])
    return paths


def _prepare(target, test: TestModel, model_cache, data_cache, token: bytes):
    message = dpb.PrepareModelRequest_1_3(
        model=cv.model_to_pb(test.model),
        preference=1,
        priority=1,
        modelCache=[tpb.CacheHandle(paths=h) for h in model_cache],
        dataCache=[tpb.CacheHandle(paths=h) for h in data_cache],
        token=token,
    )
    reply = target.device.stub.prepareModel_1_3(message)
    return ErrorStatus(reply.status), reply.message, reply.preparedModel


def _works(target, test: TestModel, prepared_id: int) -> None:
    prepared = PreparedModel(target.device, prepared_id, test.model)
    plan = layout(test)
    try:
        check_success(test, plan, execute(target, prepared, plan.request, "sync"), measure=False)
    finally:
        plan.close()
        prepared.release()


def _from_cache(target, model_cache, data_cache, token: bytes) -> tuple[ErrorStatus, int, str]:
    try:
        p = target.device.prepareModelFromCache_1_3(model_cache, data_cache, token)
        return ErrorStatus.NONE, p.id, ""
    except HalError as e:
        return e.status, 0, e.message


def _with_cache_arguments(choose: _Chooser | None):
    def run(target) -> None:
        if choose is None:
            skip("the spec library has no model to prepare")
        test = choose(target)
        if not target.is_local:
            skip("cache files are paths on the target's host; the target is not on this host")
        target.require_supported(test.model)
        with tempfile.TemporaryDirectory(prefix="nnhal-cts-cache-") as d:
            folder = Path(d)
            status, message, prepared = _prepare(
                target, test, _handles(folder, "model", 1), _handles(folder, "data", 1), TOKEN
            )
            check(
                status == ErrorStatus.NONE and prepared,
                f"prepareModel_1_3 with cache "
                f"arguments: {status.name} ({message}); they must not change the outcome",
            )
            _works(target, test, prepared)

    return run


def _unsupported(target) -> None:
    counts = target.device.getNumberOfCacheFilesNeeded()
    if counts != (0, 0):
        skip(f"the target caches {counts} files; the supported-caching tests apply")
    status, _, message = _from_cache(target, [], [], TOKEN)
    check(
        status == ErrorStatus.GENERAL_FAILURE,
        f"prepareModelFromCache_1_3 without caching "
        f"support: expected GENERAL_FAILURE, got {status.name} ({message})",
    )


def _saved(target, test, folder: Path, token: bytes = TOKEN, tag: str = "") -> tuple[list, list]:
    num_model, num_data = target.capability("caching").detail
    model_cache = _handles(folder, f"{tag}model", num_model)
    data_cache = _handles(folder, f"{tag}data", num_data)
    status, message, prepared = _prepare(target, test, model_cache, data_cache, token)
    check(
        status == ErrorStatus.NONE,
        f"prepareModel_1_3 saving to the cache: {status.name} ({message})",
    )
    _works(target, test, prepared)
    return model_cache, data_cache


def _flip(path: str) -> None:
    p = Path(path)
    data = bytearray(p.read_bytes() or b"\0")
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))


Scenario = Callable[[object, TestModel, Path], None]


def _supported(scenario: Scenario, choose: _Chooser | None):
    def run(target) -> None:
        target.require("caching")
        if choose is None:
            skip("the spec library has no model to prepare")
        test = choose(target)
        target.require_supported(test.model)
        with tempfile.TemporaryDirectory(prefix="nnhal-cts-cache-") as d:
            scenario(target, test, Path(d))

    return run


def _save_and_retrieve(target, test, folder) -> None:
    model_cache, data_cache = _saved(target, test, folder)
    status, prepared, message = _from_cache(target, model_cache, data_cache, TOKEN)
    if status == ErrorStatus.GENERAL_FAILURE:
        return  # allowed: "this model cannot be cached"
    check(status == ErrorStatus.NONE, f"prepareModelFromCache_1_3: {status.name} ({message})")
    _works(target, test, prepared)


def _expect_rejected(target, model_cache, data_cache, token, what, allowed) -> None:
    status, prepared, message = _from_cache(target, model_cache, data_cache, token)
    if prepared:
        PreparedModel(target.device, prepared, None).release()
    names = "/".join(s.name for s in allowed)
    check(status in allowed, f"{what}: expected {names}, got {status.name} ({message})")


def _wrong_number(target, test, folder) -> None:
    model_cache, data_cache = _saved(target, test, folder)
    allowed = (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)
    if model_cache:
        _expect_rejected(
            target, model_cache[1:], data_cache, TOKEN, "a model cache handle missing", allowed
        )
    if data_cache:
        _expect_rejected(
            target, model_cache, data_cache[1:], TOKEN, "a data cache handle missing", allowed
        )


def _tampered(change: Callable[[list, list], bytes | None], what: str) -> Scenario:
    def scenario(target, test, folder) -> None:
        model_cache, data_cache = _saved(target, test, folder)
        if not model_cache:
            skip("the target uses no model cache files")
        token = change(model_cache, data_cache) or TOKEN
        _expect_rejected(
            target, model_cache, data_cache, token, what, (ErrorStatus.GENERAL_FAILURE,)
        )

    return scenario


def _corrupt(model_cache, data_cache) -> None:
    for h in model_cache:
        _flip(h[0])


def _append(model_cache, data_cache) -> None:
    for h in model_cache:
        with open(h[0], "ab") as f:
            f.write(b"nnhal-cts")


def _wrong_token(model_cache, data_cache) -> bytes:
    return bytes([TOKEN[0] ^ 1]) + TOKEN[1:]


def _other_model(target, test, folder) -> None:
    model_cache, data_cache = _saved(target, test, folder)
    if not model_cache:
        skip("the target uses no model cache files")
    other_token = bytes(reversed(TOKEN))
    other_cache, _ = _saved(target, test, folder, token=other_token, tag="other-")
    for mine, theirs in zip(model_cache, other_cache):
        Path(mine[0]).write_bytes(Path(theirs[0]).read_bytes())
    _expect_rejected(
        target,
        model_cache,
        data_cache,
        TOKEN,
        "model cache replaced by another token's",
        (ErrorStatus.GENERAL_FAILURE,),
    )


def _corrupted_data(target, test, folder) -> None:
    model_cache, data_cache = _saved(target, test, folder)
    if not data_cache:
        skip("the target uses no data cache files")
    for h in data_cache:
        _flip(h[0])
    status, prepared, _ = _from_cache(target, model_cache, data_cache, TOKEN)
    if (status == ErrorStatus.NONE) != bool(prepared):
        fail(f"corrupted data cache: status {status.name} but prepared model id {prepared}")
    if prepared:
        PreparedModel(target.device, prepared, None).release()
    target.assert_serving()


SUPPORTED: dict[str, Scenario] = {
    "save-and-retrieve": _save_and_retrieve,
    "retrieve-wrong-number": _wrong_number,
    "corrupted-model-cache": _tampered(_corrupt, "a bit flipped in the model cache"),
    "appended-model-cache": _tampered(_append, "bytes appended to the model cache"),
    "wrong-token": _tampered(_wrong_token, "a bit flipped in the token"),
    "other-model-cache": _other_model,
    "corrupted-data-cache": _corrupted_data,
}


def collect(library, options) -> list[TestCase]:
    test = _model(library)
    cases = [
        TestCase(f"{FAMILY}/prepare-with-cache-arguments", FAMILY, _with_cache_arguments(test)),
        TestCase(f"{FAMILY}/prepareModelFromCache-unsupported", FAMILY, _unsupported),
    ]
    cases += [
        TestCase(f"{FAMILY}/{name}", FAMILY, _supported(scenario, test))
        for name, scenario in SUPPORTED.items()
    ]
    return cases
