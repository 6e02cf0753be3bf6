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
comes back), ``invalid-num-fd`` (a handle with two files or none: saving
still prepares, loading is rejected), ``wrong-length-data-cache`` (no
crash; NONE exactly when a model comes back), ``toctou-save`` and
``toctou-load`` (another thread overwrites the model cache with another
token's while saving or loading: any status, a model that comes back
computes the right values). Otherwise these are skipped with the reason.

``save-invalid-num-cache`` (local targets, whether or not the target
caches): saving with one handle too many or too few still prepares a
working model; loading with those vectors is INVALID_ARGUMENT or
GENERAL_FAILURE.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from nnhal.cts.core import Problems, TestCase, check, fail, skip
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


def _wrong_vectors(num_model: int, num_data: int) -> dict[str, tuple[int, int]]:
    """One cache handle too many or too few, per vector: name -> (model, data) counts."""
    out = {"model-cache-extra": (num_model + 1, num_data), "data-cache-extra": (num_model,
           num_data + 1)}  # fmt: skip
    if num_model:
        out["model-cache-missing"] = (num_model - 1, num_data)
    if num_data:
        out["data-cache-missing"] = (num_model, num_data - 1)
    return out


def _expect_load_rejected(target, model_cache, data_cache, what: str) -> None:
    _expect_rejected(target, model_cache, data_cache, TOKEN, what,
                     (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE))  # fmt: skip


def _save_invalid_num_cache(choose: _Chooser | None):
    """VTS SaveToCacheInvalidNumCache: saving with a wrong number of handles still prepares a
    working model; loading with the same wrong vectors is rejected (run even without caching)."""

    def run(target) -> str:
        if choose is None:
            skip("the spec library has no model to prepare")
        if not target.is_local:
            skip("cache files are paths on the target's host; the target is not on this host")
        test = choose(target)
        num_model, num_data = target.device.getNumberOfCacheFilesNeeded()
        problems = Problems()
        for name, (n_model, n_data) in _wrong_vectors(num_model, num_data).items():

            def one(n_model=n_model, n_data=n_data, name=name) -> None:
                with tempfile.TemporaryDirectory(prefix="nnhal-cts-cache-") as d:
                    folder = Path(d)
                    model_cache = _handles(folder, "model", n_model)
                    data_cache = _handles(folder, "data", n_data)
                    status, message, prepared = _prepare(
                        target, test, model_cache, data_cache, TOKEN
                    )
                    check(status == ErrorStatus.NONE and prepared, f"saving with {name}: "
                          f"{status.name} ({message}); the preparation must still succeed")  # fmt: skip
                    _works(target, test, prepared)
                    _expect_load_rejected(target, model_cache, data_cache, f"loading with {name}")

            problems.run(name, one)
        problems.raise_if_any("wrong handle vectors")
        return f"{problems.checked} wrong handle vectors"

    return run


def _invalid_num_fd(target, test, folder) -> None:
    """VTS SaveToCacheInvalidNumFd / PrepareModelFromCacheInvalidNumFd: a handle with two
    files or none: saving still prepares a working model, loading is rejected."""
    num_model, num_data = target.capability("caching").detail
    problems = Problems()
    for vector, count in (("model", num_model), ("data", num_data)):
        if not count:
            continue
        for fds in (0, 2):
            label = f"{vector} cache handle 0 with {fds} files"

            def one(vector=vector, fds=fds, label=label) -> None:
                sub = folder / f"{vector}-{fds}"
                sub.mkdir()
                model_cache = _handles(sub, "model", num_model)
                data_cache = _handles(sub, "data", num_data)
                chosen = model_cache if vector == "model" else data_cache
                extra = sub / "extra"
                extra.touch()
                chosen[0] = [] if fds == 0 else [chosen[0][0], str(extra)]
                status, message, prepared = _prepare(target, test, model_cache, data_cache, TOKEN)
                check(status == ErrorStatus.NONE and prepared, f"saving with {label}: "
                      f"{status.name} ({message}); the preparation must still succeed")  # fmt: skip
                _works(target, test, prepared)
                _expect_load_rejected(target, model_cache, data_cache, f"loading with {label}")
                # saved properly, loaded with the odd handle
                good_model, good_data = _saved(target, test, sub, tag="good-")
                odd = good_model if vector == "model" else good_data
                odd[0] = [] if fds == 0 else [odd[0][0], str(extra)]
                _expect_load_rejected(target, good_model, good_data,
                                      f"loading a good cache with {label}")  # fmt: skip

            problems.run(label, one)
    problems.raise_if_any("handles")


def _wrong_length_data(target, test, folder) -> None:
    """VTS WrongLengthDataCache: bytes appended to the data cache must not crash the target;
    a model comes back exactly when the status is NONE."""
    model_cache, data_cache = _saved(target, test, folder)
    if not data_cache:
        skip("the target uses no data cache files")
    for h in data_cache:
        with open(h[0], "ab") as f:
            f.write(bytes(range(1, 200)))
    status, prepared, _ = _from_cache(target, model_cache, data_cache, TOKEN)
    check((status == ErrorStatus.NONE) == bool(prepared),
          f"data cache too long: status {status.name} but prepared model id {prepared}")  # fmt: skip
    if prepared:
        _works(target, test, prepared)
    target.assert_serving()


def _overwrite(paths: list[str], contents: list[bytes], stop: threading.Event) -> None:
    """Keep writing ``contents`` over ``paths`` until ``stop`` is set (the TOCTOU attacker)."""
    while not stop.is_set():
        for path, data in zip(paths, contents):
            try:
                Path(path).write_bytes(data)
            except OSError:
                pass  # the target holds it open or replaced it: try again
        stop.wait(0.001)


#: iterations of the TOCTOU tests (VTS runs 100 on a 100-operation model)
TOCTOU_ROUNDS = 20


def _toctou(when: str) -> Scenario:
    """VTS SaveToCache_TOCTOU / PrepareFromCache_TOCTOU: another thread overwrites the model
    cache with another token's while the target saves (or loads) it: any status, but never a
    crash, and a model that comes back computes the right values."""

    def scenario(target, test, folder) -> None:
        other_model, _ = _saved(target, test, folder, token=bytes(reversed(TOKEN)), tag="other-")
        if not other_model:
            skip("the target uses no model cache files")
        foreign = [Path(h[0]).read_bytes() for h in other_model]
        for k in range(TOCTOU_ROUNDS):
            sub = folder / f"round{k}"
            sub.mkdir()
            num_model, num_data = target.capability("caching").detail
            model_cache, data_cache = _handles(sub, "model", num_model), _handles(sub, "data",
                                                                                 num_data)  # fmt: skip
            if when == "load":
                status, message, prepared = _prepare(target, test, model_cache, data_cache, TOKEN)
                check(status == ErrorStatus.NONE, f"saving: {status.name} ({message})")
                PreparedModel(target.device, prepared, test.model).release()
            stop = threading.Event()
            paths = [h[0] for h in model_cache]
            writer = threading.Thread(target=_overwrite, args=(paths, foreign, stop), daemon=True)
            writer.start()
            try:
                if when == "save":
                    status, message, prepared = _prepare(
                        target, test, model_cache, data_cache, TOKEN
                    )
                    check(status == ErrorStatus.NONE, f"round {k}: saving while the cache is "
                          f"overwritten: {status.name} ({message})")  # fmt: skip
                    _works(target, test, prepared)
                else:
                    status, prepared, _ = _from_cache(target, model_cache, data_cache, TOKEN)
                    if prepared:
                        _works(target, test, prepared)
            finally:
                stop.set()
                writer.join()
            if when == "save":
                status, prepared, _ = _from_cache(target, model_cache, data_cache, TOKEN)
                if prepared:
                    _works(target, test, prepared)
        target.assert_serving()

    return scenario


SUPPORTED: dict[str, Scenario] = {
    "save-and-retrieve": _save_and_retrieve,
    "retrieve-wrong-number": _wrong_number,
    "corrupted-model-cache": _tampered(_corrupt, "a bit flipped in the model cache"),
    "appended-model-cache": _tampered(_append, "bytes appended to the model cache"),
    "wrong-token": _tampered(_wrong_token, "a bit flipped in the token"),
    "other-model-cache": _other_model,
    "corrupted-data-cache": _corrupted_data,
    "invalid-num-fd": _invalid_num_fd,
    "wrong-length-data-cache": _wrong_length_data,
    "toctou-save": _toctou("save"),
    "toctou-load": _toctou("load"),
}


def collect(library, options) -> list[TestCase]:
    test = _model(library)
    cases = [
        TestCase(f"{FAMILY}/prepare-with-cache-arguments", FAMILY, _with_cache_arguments(test)),
        TestCase(f"{FAMILY}/prepareModelFromCache-unsupported", FAMILY, _unsupported),
        TestCase(f"{FAMILY}/save-invalid-num-cache", FAMILY, _save_invalid_num_cache(test)),
    ]
    cases += [
        TestCase(f"{FAMILY}/{name}", FAMILY, _supported(scenario, test))
        for name, scenario in SUPPORTED.items()
    ]
    return cases
