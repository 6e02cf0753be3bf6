"""The conformance suite can fail: each deliberately broken driver is caught.

Every broken driver is the real driver ``Device`` with one fault, served by
the real gRPC servicers (``nnhal.driver.service.create_server``) on a free port;
the suite runs against it through ``nnhal.cts.suite.run_suite`` and the family
meant to catch the fault must report it, while the run completes:

- IF/WHILE reported supported whatever their subgraphs hold -> control-flow
  support-rule tests fail (profile excluding SUB);
- loopTimeoutDuration ignored -> control-flow loop-timeout tests fail;
- invalid models accepted -> model-validation (and basic/cycle) fail;
- wrong numbers -> generated and fuzz fail, the fuzz failure is saved as a
  model file that ``nnhal run`` replays;
- a driver that deadlocks -> the test is TIMEOUT, the rest are not run, and
  the run ends in seconds;
- a compilation cache whose authentication ignores token and contents ->
  caching/wrong-token and caching/other-model-cache fail;
- driver buffers whose roles are never checked -> memory-domain/wrong-model
  fails;
- a burst path that loses its outputs -> every burst test fails while the
  same models pass in the generated family;
- fenced executions that start before their waitFor fences signal ->
  fenced/waits-for-client-fence fails.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from nnhal.cts.core import Outcome
from nnhal.cts.suite import Config, run_suite
from nnhal.cts.target import Options

pytestmark = pytest.mark.slow  # conformance runs against broken drivers


@contextmanager
def serve(device, cache_roots=None) -> Iterator[tuple[object, str]]:
    """``device`` behind the real servicers; yields a connected client and the address.
    ``cache_roots``: where clients may name cache files (none by default)."""
    from nnhal.driver.security import ServerSecurity
    from nnhal.driver.server import create_server

    from nnhal.client import connect

    security = ServerSecurity(cache_roots=cache_roots)
    server, address = create_server(device, "127.0.0.1:0", security=security)
    client = connect(address)
    try:
        yield client, address
    finally:
        client.close()
        server.stop(None)


@contextmanager
def reference() -> Iterator[object]:
    """A healthy driver behind its own server: the fuzz family's oracle endpoint."""
    from nnhal.driver.device import Device

    with serve(Device()) as (client, _):
        yield client


def _run(device, **config):
    # the shipped corpus only where a test asks for it (Options() default): loading it
    # takes seconds and most breakages are caught on the spec library's models
    options = config.pop("options", Options(corpus=False))
    cache_roots = config.pop("cache_roots", None)
    with serve(device, cache_roots) as (client, address), reference() as oracle:
        options.oracle = oracle
        return run_suite(client, address, Config(options=options, **config))


def _profile(tmp_path: Path, *exclude: str):
    from nnhal.driver.profile import load_profile

    path = tmp_path / "cts-broken.toml"
    path.write_text(f"exclude_operations = {list(exclude)!r}\n".replace("'", '"'))
    return load_profile(str(path))


# ---------------------------------------------------------------------------
# The broken drivers
# ---------------------------------------------------------------------------


def _device_class():
    from nnhal.driver.device import Device

    return Device


class _PreparedWrapper:
    """A driver PreparedModel with ``execute`` replaced; the rest passes through."""

    def __init__(self, inner, execute) -> None:
        self._inner = inner
        self.model = inner.model
        self._execute = execute

    def execute(self, request, pool_views, **kwargs):
        return self._execute(self._inner, request, pool_views, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def control_flow_always_supported(profile):
    class Broken(_device_class()):
        def explainSupportedOperations(self, model, **kw):
            flags, reasons = super().explainSupportedOperations(model, **kw)
            for i, op in enumerate(model.main.operations):
                if op.type in (96, 97):  # IF, WHILE: "supported" without looking inside
                    flags[i] = True
                    reasons.pop(i, None)
            return flags, reasons

    return Broken(profile)


def ignores_loop_timeout():
    class Broken(_device_class()):
        def prepareModel_1_3(self, *args, **kwargs):
            def execute(inner, request, views, **kw):
                kw["loop_timeout_ns"] = None  # always the 2 s default
                return inner.execute(request, views, **kw)

            return _PreparedWrapper(super().prepareModel_1_3(*args, **kwargs), execute)

    return Broken()


def accepts_invalid_models():
    from nnhal.errors import InvalidArgument

    class Broken(_device_class()):
        def explainSupportedOperations(self, model, **kw):
            try:
                return super().explainSupportedOperations(model, **kw)
            except InvalidArgument:
                return [True] * len(model.main.operations), {}

        def prepareModel_1_3(self, model, *args, **kwargs):
            try:
                return super().prepareModel_1_3(model, *args, **kwargs)
            except InvalidArgument:
                return object()  # "prepared"

    return Broken()


class _Perturbed:
    def __init__(self, compiled) -> None:
        self._compiled = compiled

    def run(self, inputs, **kwargs):
        """Floats off by 1, integers by 3 (beyond the tolerance table's atol 1), bools flipped."""
        outs = self._compiled.run(inputs, **kwargs)
        return [~o if o.dtype == np.bool_ else
                (o + o.dtype.type(1 if o.dtype.kind == "f" else 3)) for o in outs]  # fmt: skip


def wrong_numbers():
    class Broken(_device_class()):
        def prepareModel_1_3(self, *args, **kwargs):
            prepared = super().prepareModel_1_3(*args, **kwargs)
            prepared.compiled = _Perturbed(prepared.compiled)
            return prepared

    return Broken()


def deadlocks(release: threading.Event):
    """Every execution blocks forever, and from then on getStatus blocks too."""
    hung = threading.Event()

    class Broken(_device_class()):
        def prepareModel_1_3(self, *args, **kwargs):
            def execute(inner, request, views, **kw):
                hung.set()
                release.wait()
                return inner.execute(request, views, **kw)

            return _PreparedWrapper(super().prepareModel_1_3(*args, **kwargs), execute)

        def getStatus(self):
            if hung.is_set():
                release.wait()
            return super().getStatus()

    return Broken()


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


def _outcomes(report, prefix: str) -> dict[str, Outcome]:
    found = report.outcomes(prefix=prefix)
    assert found, f"no test starts with {prefix!r}"
    return found


@pytest.mark.timeout(120)
def test_support_rule_catches_if_while_reported_supported(tmp_path):
    from nnhal.driver.device import Device

    config = {"families": ("control-flow",), "filters": ("control-flow/support-rule/*",)}
    good = _run(Device(_profile(tmp_path, "SUB")), **config)
    assert set(_outcomes(good, "control-flow/support-rule/").values()) == {Outcome.PASSED}
    bad = _run(control_flow_always_supported(_profile(tmp_path, "SUB")), **config)
    outcomes = _outcomes(bad, "control-flow/support-rule/")
    assert len(outcomes) == 8 and set(outcomes.values()) == {Outcome.FAILED}
    message = bad.by_id()["control-flow/support-rule/if-in-while-in-if"].message
    assert "reported supported although SUB" in message


@pytest.mark.timeout(120)
def test_loop_timeout_family_catches_an_ignored_loop_timeout():
    report = _run(
        ignores_loop_timeout(),
        families=("control-flow",),
        filters=("control-flow/loop-timeout/1ms/float32/*", "control-flow/loop-timeout/3s"),
    )
    outcomes = _outcomes(report, "control-flow/loop-timeout/")
    assert len(outcomes) == 4 and set(outcomes.values()) == {Outcome.FAILED}
    assert "not honoured" in report.by_id()["control-flow/loop-timeout/1ms/float32/sync"].message
    assert "expected between 2.9 s" in report.by_id()["control-flow/loop-timeout/3s"].message


@pytest.mark.timeout(180)
def test_model_validation_catches_a_driver_accepting_invalid_models():
    report = _run(
        accepts_invalid_models(),
        families=("basic", "generated", "model-validation"),
        filters=("basic/cycle", "generated/add/base/*", "model-validation/add/base/*",
                 "model-validation/if_computed_condition/base/subgraph1/*",
                 "model-validation/control-flow/*"),
    )  # fmt: skip
    by_id = report.by_id()
    assert by_id["basic/cycle"].outcome == Outcome.FAILED
    assert {r.outcome for r in report.results if r.family == "generated"} == {Outcome.PASSED}
    failed = [r for r in report.results if r.family == "model-validation"
              and r.outcome == Outcome.FAILED]  # fmt: skip
    families = {r.id.rsplit("/", 1)[1] for r in failed}
    assert {"mutateOperandTypeTest", "removeOperationTest", "mutateOperandLifeTimeTest",
            "mutateExecutionPreferenceTest", "while-unknown-size"} <= families  # fmt: skip
    assert any("/subgraph1/" in r.id for r in failed)
    assert "returned NONE" in by_id["model-validation/add/base/removeOperationTest"].message


@pytest.mark.timeout(180)
def test_wrong_numbers_are_caught_and_fuzz_failures_replay(tmp_path):
    from nnhal.tools.cli import main

    fuzz_dir = tmp_path / "fuzz"
    device = wrong_numbers()
    with serve(device) as (client, address), reference() as oracle:
        report = run_suite(client, address, Config(
            families=("generated", "fuzz"),
            filters=("generated/add/base/*", "generated/while_sum/*", "fuzz/*"),
            options=Options(fuzz_count=4, fuzz_dir=fuzz_dir, oracle=oracle),
        ))  # fmt: skip
        generated = _outcomes(report, "generated/")
        assert set(generated.values()) == {Outcome.FAILED}
        assert "outside atol" in report.by_id()["generated/while_sum/base/0"].message
        fuzz = _outcomes(report, "fuzz/")
        assert Outcome.FAILED in set(fuzz.values())
        saved = sorted(fuzz_dir.glob("*.json"))
        assert len(saved) == sum(o == Outcome.FAILED for o in fuzz.values())
        failed = next(r for r in report.results if r.family == "fuzz" and r.outcome ==
                      Outcome.FAILED)  # fmt: skip
        assert "nnhal run" in failed.message and str(fuzz_dir) in failed.message
        # the saved model replays on the broken target (wrong values) and on a healthy one
        assert main(["run", str(saved[0]), "--target", address]) == 0
        assert main(["vectors", str(saved[0]), "--target", address, "--no-progress"]) == 1
    assert main(["vectors", str(saved[0]), "--no-progress"]) == 0


@pytest.mark.timeout(120)
def test_a_hung_target_is_recorded_and_the_run_completes():
    release = threading.Event()
    started = time.monotonic()
    try:
        report = _run(
            deadlocks(release),
            families=("basic", "generated"),
            filters=("basic/getStatus", "generated/add/*"),
            timeout=2.0,
        )
    finally:
        release.set()
    elapsed = time.monotonic() - started
    outcomes = [r.outcome for r in report.results]
    assert outcomes[0] == Outcome.PASSED  # basic/getStatus, before anything hung
    assert outcomes[1] == Outcome.TIMEOUT
    assert set(outcomes[2:]) == {Outcome.ERROR}
    assert "stopped answering" in report.not_run_reason
    assert all("not run" in r.message for r in report.results[2:])
    assert elapsed < 30


# ---------------------------------------------------------------------------
# Broken HAL features: caching and memory domains
# ---------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_caching_family_catches_an_unauthenticated_cache(monkeypatch):
    """A driver whose cache tag ignores token and contents loads foreign caches."""
    from nnhal.driver import cache
    from nnhal.driver.device import Device

    # the caching family makes its files in the temporary directory: the server accepts
    # client-named cache files there only (none without a cache root)
    config = {"families": ("caching",), "cache_roots": (tempfile.gettempdir(),)}
    good = _run(Device(), **config)
    # the one skip is the "caching unsupported" test, which does not apply
    assert set(_outcomes(good, "caching/").values()) <= {Outcome.PASSED, Outcome.SKIPPED}
    assert _outcomes(good, "caching/")["caching/wrong-token"] == Outcome.PASSED
    monkeypatch.setattr(cache, "_tag", lambda *args: bytes(32))
    bad = _run(Device(), **config)
    outcomes = _outcomes(bad, "caching/")
    for name in ("wrong-token", "other-model-cache"):
        assert outcomes[f"caching/{name}"] == Outcome.FAILED, name
    assert outcomes["caching/save-and-retrieve"] == Outcome.PASSED


class _EveryRole(frozenset):
    """A role set that claims every (model, kind, index): roles are never checked."""

    def __contains__(self, item: object) -> bool:
        return True


@pytest.mark.timeout(120)
def test_memory_domain_family_catches_unchecked_buffer_roles(monkeypatch):
    from nnhal.driver import buffers
    from nnhal.driver.device import Device

    config = {"families": ("memory-domain",)}
    good = _run(Device(), **config)
    assert set(_outcomes(good, "memory-domain/").values()) == {Outcome.PASSED}
    init = buffers.ManagedBuffer.__init__

    def without_role_checks(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.roles = _EveryRole(self.roles)

    monkeypatch.setattr(buffers.ManagedBuffer, "__init__", without_role_checks)
    bad = _run(Device(), **config)
    outcomes = _outcomes(bad, "memory-domain/")
    assert outcomes["memory-domain/wrong-model"] == Outcome.FAILED
    assert outcomes["memory-domain/copy"] == Outcome.PASSED


@pytest.mark.timeout(300)
def test_burst_family_catches_a_burst_path_with_wrong_results(monkeypatch):
    """Bursts that lose their outputs: the burst family fails, generated (sync) passes."""
    from nnhal.driver import burst
    from nnhal.driver.device import Device

    run = burst.BurstSession.run

    def losing_outputs(self, message):
        reply = run(self, message)
        for pool in reply.outputPools:
            pool.data = bytes(len(pool.data))
        return reply

    monkeypatch.setattr(burst.BurstSession, "run", losing_outputs)
    config = {"families": ("burst", "generated"), "filters": ("*/add*", "*/while*")}
    report = _run(Device(), **config)
    # every burst test sees the lost outputs; the same models pass off the burst path
    assert set(_outcomes(report, "burst/").values()) == {Outcome.FAILED}
    assert set(_outcomes(report, "generated/").values()) == {Outcome.PASSED}


@pytest.mark.timeout(120)
def test_fenced_family_catches_an_execution_that_ignores_its_fences(monkeypatch):
    """executeFenced that starts before its waitFor fences signal: fenced fails."""
    from nnhal.driver import service
    from nnhal.driver.device import Device

    config = {"families": ("fenced",), "filters": ("fenced/waits-for-client-fence",)}
    good = _run(Device(), **config)
    assert set(_outcomes(good, "fenced/").values()) == {Outcome.PASSED}
    launch = service.launch
    monkeypatch.setattr(
        service,
        "launch",
        lambda run, waits, **kw: launch(run, (), **kw),  # never waits
    )
    bad = _run(Device(), **config)
    result = bad.by_id()["fenced/waits-for-client-fence"]
    assert result.outcome == Outcome.FAILED
    assert "before its waitFor fence was signalled" in result.message


# ---------------------------------------------------------------------------
# Breakages a default run must catch, each in the family meant for it
# ---------------------------------------------------------------------------


def _failed(report, prefix: str) -> list[str]:
    return [i for i, o in _outcomes(report, prefix).items() if o == Outcome.FAILED]


class _TanhOff:
    """Float outputs of a model holding TANH, 1e-3 relative off (beyond fp32's 5 ULP)."""

    def __init__(self, compiled) -> None:
        self._compiled = compiled

    def run(self, inputs, **kwargs):
        outs = self._compiled.run(inputs, **kwargs)
        return [o * o.dtype.type(1.001) if o.dtype.kind == "f" else o for o in outs]


def tanh_off_by_1e3():
    class Broken(_device_class()):
        def prepareModel_1_3(self, model, *args, **kwargs):
            prepared = super().prepareModel_1_3(model, *args, **kwargs)
            if any(op.type == 28 for op in model.main.operations):  # TANH
                prepared.compiled = _TanhOff(prepared.compiled)
            return prepared

    return Broken()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_generated_family_catches_tanh_off_by_a_thousandth():
    """The corpus runs by default: an operation outside the spec library is still tested."""
    report = _run(tanh_off_by_1e3(), families=("generated",), options=Options(),
                  filters=("generated/nnapi/tanh*", "generated/nnapi/add/*"))  # fmt: skip
    # the float32 models fail (float16 and relaxed ones allow 5e-3: 1e-3 passes there)
    assert {"generated/nnapi/tanh/base", "generated/nnapi/tanh/all_inputs_as_internal"} <= set(
        _failed(report, "generated/nnapi/tanh")
    )
    assert "outside" in report.by_id()["generated/nnapi/tanh/base"].message
    assert set(_outcomes(report, "generated/nnapi/add/").values()) == {Outcome.PASSED}


@pytest.mark.timeout(300)
def test_burst_family_fails_when_every_burst_execution_fails(monkeypatch):
    """Not skipped: the target offers bursts, so a failing probe fails every burst test."""
    from nnhal.driver import burst
    from nnhal.driver.device import Device

    from nnhal.errors import GeneralFailure

    run = burst.BurstSession.run

    def failing(self, message):
        if message.HasField("request"):
            raise GeneralFailure("broken burst")
        return run(self, message)

    monkeypatch.setattr(burst.BurstSession, "run", failing)
    report = _run(Device(), families=("burst",), filters=("burst/add*", "burst/memory-slots"))
    outcomes = _outcomes(report, "burst/")
    assert set(outcomes.values()) == {Outcome.FAILED}
    assert "offers burst but its probe failed" in report.by_id()["burst/add/base/0"].message
    assert not report.skipped_families()


@pytest.mark.timeout(300)
def test_a_quant_only_driver_gets_the_path_and_feature_families():
    """Probes pick a type the target supports: quant8 instead of float32."""
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile

    device = Device(load_profile("nnapi-sample_quant"))
    report = _run(device, families=("burst", "fenced", "caching", "memory-domain"),
                  cache_roots=(tempfile.gettempdir(),),
                  filters=("burst/memory-slots", "burst/add/quant8*", "fenced/add/quant8*",
                           "fenced/waits-*", "caching/*", "memory-domain/*"))  # fmt: skip
    assert not report.skipped_families(), report.skipped_families()
    assert not [r for r in report.results if r.outcome.is_problem]
    for family in ("burst", "fenced", "caching", "memory-domain"):
        assert any(r.outcome == Outcome.PASSED for r in report.results if r.family == family), (
            family
        )


def ignores_while_condition(profile):
    """WHILE's support decided from its body alone: an unsupported condition is missed."""

    class Broken(_device_class()):
        def explainSupportedOperations(self, model, **kw):
            flags, reasons = super().explainSupportedOperations(model, **kw)
            excluded = profile.exclude_operations
            for i, op in enumerate(model.main.operations):
                if op.type == 97:  # WHILE: look at the body (input 1) only
                    body = model.referenced[model.main.operands[op.inputs[1]].location.offset]
                    if not any(o.type in excluded for o in body.operations):
                        flags[i] = True
                        reasons.pop(i, None)
            return flags, reasons

    return Broken(profile)


@pytest.mark.timeout(120)
def test_support_rule_catches_a_while_condition_left_unchecked(tmp_path):
    report = _run(ignores_while_condition(_profile(tmp_path, "SUB")), families=("control-flow",),
                  filters=("control-flow/support-rule/*",))  # fmt: skip
    outcomes = _outcomes(report, "control-flow/support-rule/")
    assert outcomes["control-flow/support-rule/while-condition"] == Outcome.FAILED
    assert outcomes["control-flow/support-rule/while-body"] == Outcome.PASSED


def one_flag_too_many():
    class Broken(_device_class()):
        def getSupportedOperations_1_3(self, model, **kw):
            return super().getSupportedOperations_1_3(model, **kw) + [True]

    return Broken()


@pytest.mark.timeout(120)
def test_every_family_checks_the_standard_support_answer():
    report = _run(one_flag_too_many(), families=("generated", "qos"),
                  filters=("generated/add/base/*", "qos/add/*"))  # fmt: skip
    assert set(_outcomes(report, "generated/").values()) == {Outcome.FAILED}
    assert set(_outcomes(report, "qos/").values()) == {Outcome.FAILED}
    assert (
        "returned 2 flags for 1 main operations" in report.by_id()["generated/add/base/0"].message
    )


def ignores_deadlines():
    class Broken(_device_class()):
        def prepareModel_1_3(self, model, *args, **kwargs):
            kwargs.pop("deadline_ns", None)

            def execute(inner, request, views, **kw):
                kw["deadline_ns"] = None
                return inner.execute(request, views, **kw)

            return _PreparedWrapper(super().prepareModel_1_3(model, *args, **kwargs), execute)

    return Broken()


@pytest.mark.timeout(180)
def test_require_deadlines_fails_a_driver_ignoring_them():
    config = {"families": ("qos",), "filters": ("qos/add/*",)}
    lenient = _run(ignores_deadlines(), **config)
    assert set(_outcomes(lenient, "qos/").values()) == {Outcome.PASSED}  # the HAL allows it
    strict = _run(ignores_deadlines(), options=Options(require_deadlines=True), **config)
    result = strict.by_id()["qos/add/execute"]
    assert result.outcome == Outcome.FAILED and "deadline was ignored" in result.message


def swaps_missed_deadline_statuses():
    from nnhal.errors import MissedDeadline

    class Broken(_device_class()):
        def prepareModel_1_3(self, *args, **kwargs):
            def execute(inner, request, views, **kw):
                try:
                    return inner.execute(request, views, **kw)
                except MissedDeadline as e:
                    raise MissedDeadline(e.message, transient=not e.transient) from None

            return _PreparedWrapper(super().prepareModel_1_3(*args, **kwargs), execute)

    return Broken()


@pytest.mark.timeout(120)
def test_qos_catches_persistent_and_transient_swapped():
    report = _run(swaps_missed_deadline_statuses(), families=("qos",), filters=("qos/add/*",))
    result = report.by_id()["qos/add/execute"]
    assert result.outcome == Outcome.FAILED
    assert "expected MISSED_DEADLINE_PERSISTENT" in result.message


@pytest.mark.timeout(120)
def test_memory_domain_catches_copy_from_with_wrong_dimensions(monkeypatch):
    from nnhal.driver import buffers
    from nnhal.driver.device import Device

    copy_from = buffers.ManagedBuffer.copyFrom
    monkeypatch.setattr(buffers.ManagedBuffer, "copyFrom",
                        lambda self, src, dims: copy_from(self, src, ()))  # fmt: skip
    report = _run(Device(), families=("memory-domain",))
    outcomes = _outcomes(report, "memory-domain/")
    assert outcomes["memory-domain/copy-dimensions"] == Outcome.FAILED
    assert outcomes["memory-domain/copy"] == Outcome.PASSED


@pytest.mark.timeout(120)
def test_burst_catches_freed_slots_that_are_never_freed(monkeypatch):
    from nnhal.driver import burst
    from nnhal.driver.device import Device

    add = burst.BurstSession._add

    def keep_old(self, slot, memory):
        if slot not in self.slots:  # a slot "freed" earlier is still there: kept
            add(self, slot, memory)

    monkeypatch.setattr(burst.BurstSession, "_free", lambda self, slot: None)
    monkeypatch.setattr(burst.BurstSession, "_add", keep_old)
    report = _run(Device(), families=("burst",), filters=("burst/memory-slots", "burst/add/*"))
    result = report.by_id()["burst/memory-slots"]
    assert result.outcome == Outcome.FAILED and "stale" in result.message
    assert report.by_id()["burst/add/base/0"].outcome == Outcome.PASSED


@pytest.mark.timeout(120)
def test_fenced_catches_an_execution_waiting_for_its_first_fence_only(monkeypatch):
    from nnhal.driver import service
    from nnhal.driver.device import Device

    launch = service.launch
    monkeypatch.setattr(service, "launch", lambda run, waits, **kw: launch(run, waits[:1], **kw))
    report = _run(Device(), families=("fenced",), filters=("fenced/waits-*",))
    assert report.by_id()["fenced/waits-for-every-fence"].outcome == Outcome.FAILED
    assert report.by_id()["fenced/waits-for-client-fence"].outcome == Outcome.PASSED


@pytest.mark.timeout(300)
def test_basic_catches_a_release_that_frees_nothing(monkeypatch):
    from nnhal.driver import service
    from nnhal.driver.device import Device

    from nnhal._proto.v1_3 import prepared_model_pb2 as ppb

    monkeypatch.setattr(service.PreparedModelServicer, "release",
                        lambda self, request, context: ppb.StatusReply(status=0))  # fmt: skip
    report = _run(Device(), families=("basic",), filters=("basic/release",))
    result = report.by_id()["basic/release"]
    assert result.outcome == Outcome.FAILED
    assert "executing a released prepared model" in result.message
