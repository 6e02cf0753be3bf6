"""The target under test: a client ``Device`` plus what the suite learns about it.

``Target`` wraps ``nnhal.client.Device`` (any server speaking the proto):

- ``support(model)`` asks the standard ``getSupportedOperations_1_3`` and
  checks the vector's length (and, when the target offers nnhal's
  ``explainSupportedOperations``, takes its reasons and checks it agrees);
  ``require_supported`` turns "unsupported" into a skip with the reason;
- capability probes, each asked once and remembered: bursts, executeFenced,
  compilation caching (``getNumberOfCacheFilesNeeded``), memory domains
  (``allocate`` on a valid role), vendor extensions;
- ``alive()``: a ``getStatus`` with a short deadline, used after a timeout to
  tell a hung or crashed target from a slow test;
- ``is_local``: the address is a loopback one, so shared memory, cache file
  paths and steady-clock deadlines mean the same on both sides.

``Options`` carries the command-line settings families read (fuzzing,
vectors, extra spec files).
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from nnhal.cts.core import fail, skip

from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal.builder import ModelBuilder
from nnhal.errors import DeviceUnavailable, HalError, InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    BufferDesc,
    BufferRole,
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    Model,
    OperandType,
    OperationType,
    operation_name,
)

__all__ = [
    "PROBE_TYPES",
    "Capability",
    "Options",
    "Probe",
    "Target",
    "add_model",
    "is_loopback",
    "probe_names",
]


@dataclass
class Options:
    """Settings from the command line that families read."""

    fuzz_count: int = 40
    seed: int = 0
    fuzz_dir: Path = Path("cts-failures")
    vectors: tuple[str, ...] = ()
    specs: tuple[str, ...] = ()
    profile: str | None = None
    #: a connected client Device giving the fuzz family's expected outputs (a second
    #: endpoint: the suite never imports a driver); None = the fuzz family is skipped
    oracle: Any = None
    #: run the shipped NNAPI corpus too (generated, validation, qos, path families)
    corpus: bool = True
    #: opt-in: deadlines the target ignores fail (the HAL lets a driver ignore them)
    require_deadlines: bool = False


@dataclass(frozen=True)
class Capability:
    """A probed capability: present or not, and why not.

    ``broken`` is set when the target offers the feature but the probe, a
    valid use of it on a model the target supports, failed: every test that
    needs the capability then FAILS with that message instead of skipping.
    """

    present: bool
    reason: str = ""
    detail: Any = None
    broken: str = ""

    @property
    def usable(self) -> bool:
        """Offered and working: other families may use it as an extra path."""
        return self.present and not self.broken


#: the element types a probe model may use, in the order they are tried
PROBE_TYPES = (
    OperandType.TENSOR_FLOAT32,
    OperandType.TENSOR_FLOAT16,
    OperandType.TENSOR_QUANT8_ASYMM,
    OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
)


@dataclass(frozen=True)
class Probe:
    """out = x + y on [2] tensors of one element type the target supports.

    The values (1, 2) + (3, 4) are exact in every probe type (quantized ones
    use scale 1 and zero point 0), so expected outputs are exact too.
    """

    element_type: int
    model: Model

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(OPERAND_TYPE_INFO[self.element_type].dtype)

    @property
    def type_name(self) -> str:
        return OperandType(self.element_type).name

    def x(self) -> np.ndarray:
        return np.array([1, 2], self.dtype)

    def y(self) -> np.ndarray:
        return np.array([3, 4], self.dtype)

    def expected(self) -> np.ndarray:
        return np.array([4, 6], self.dtype)


def is_loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]") if ":" in address else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def add_model(element_type: int = OperandType.TENSOR_FLOAT32, dims=(2,)) -> Model:
    """out = a + b on two inputs: the small valid model capability probes use."""
    mb = ModelBuilder()
    g = mb.main
    quant = (
        {"scale": 1.0}
        if element_type in (OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED)
        else {}
    )
    a, b = g.input(element_type, dims, **quant), g.input(element_type, dims, **quant)
    out = g.output(element_type, dims, **quant)
    g.operation(OperationType.ADD, [a, b, g.constant(OperandType.INT32, 0)], [out])
    return mb.build()


class Target:
    """The device under test, shared by every test of a run (thread-safe)."""

    def __init__(self, device: Any, address: str, options: Options | None = None) -> None:
        self.device = device
        self.address = address
        self.options = options or Options()
        self.is_local = is_loopback(address)
        self._lock = threading.Lock()
        self._probes: dict[str, Capability] = {}
        self._explain: bool | None = None
        self._memo: dict[str, Any] = {}

    # ---- support ----

    def support(self, model: Model) -> tuple[list[bool], dict[int, str]]:
        """getSupportedOperations_1_3 (raises HalError), with reasons when the target gives them.

        The answer always comes from the standard RPC and its length is checked
        (one flag per main operation); nnhal's ``explainSupportedOperations``, when
        the target offers it, only adds reasons, and its flags must agree.
        """
        flags = list(self.device.getSupportedOperations_1_3(model))
        ops = model.main.operations
        if len(flags) != len(ops):
            fail(
                f"getSupportedOperations_1_3 returned {len(flags)} flags for {len(ops)} main "
                "operations"
            )
        reasons = {
            i: f"{operation_name(ops[i].type)} reported unsupported"
            for i, ok in enumerate(flags)
            if not ok
        }
        if self._explain is not False and not all(flags):
            try:
                explained, why = self.device.explainSupportedOperations(model)
                self._explain = True
            except DeviceUnavailable as e:
                if "UNIMPLEMENTED" not in str(e):
                    raise
                self._explain = False
            else:
                if list(explained) != flags:
                    fail(
                        f"explainSupportedOperations answered {list(explained)} where "
                        f"getSupportedOperations_1_3 answered {flags} for the same model"
                    )
                reasons.update({int(k): v for k, v in why.items() if int(k) in reasons})
        return flags, reasons

    def require_supported(self, model: Model) -> None:
        """Skip unless every main operation is supported (a HalError here is the caller's)."""
        flags, reasons = self.support(model)
        if not all(flags):
            why = "; ".join(
                f"operation {i} ({operation_name(model.main.operations[i].type)}): "
                f"{reasons.get(i, 'not supported')}"
                for i, ok in enumerate(flags)
                if not ok
            )
            skip(f"not supported by the target: {why}")

    # ---- liveness ----

    def alive(self, timeout: float = 3.0) -> bool:
        """True when getStatus answers within ``timeout`` seconds."""
        try:
            self.device.stub.getStatus(dpb.DeviceQuery(), timeout=timeout)
            return True
        except grpc.RpcError:
            return False
        except Exception:  # noqa: BLE001 - a closed channel etc.
            return False

    def describe(self, timeout: float = 5.0) -> dict[str, Any]:
        """Address, version string and type, each asked with a deadline (for reports)."""
        info: dict[str, Any] = {"target": self.address}
        stub = self.device.stub
        for key, call, field_name in (
            ("versionString", stub.getVersionString, "version"),
            ("type", stub.getType, "type"),
        ):
            try:
                value = getattr(call(dpb.DeviceQuery(), timeout=timeout), field_name)
                info[key] = DeviceType(value).name if key == "type" else value
            except Exception as e:  # noqa: BLE001 - the basic family reports it properly
                info[key] = f"<no answer: {type(e).__name__}>"
        return info

    def assert_serving(self) -> None:
        """Fail unless the target still answers getStatus with AVAILABLE."""
        try:
            status = self.device.getStatus()
        except HalError as e:
            fail(f"the target stopped serving: getStatus: {e}")
            return
        if status != DeviceStatus.AVAILABLE:
            fail(f"getStatus is {status.name} after the test (expected AVAILABLE)")

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per target (e.g. which probe operations it supports)."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        value = compute()
        with self._lock:
            return self._memo.setdefault(key, value)

    # ---- the probe model ----

    def _find_probe(self) -> Probe | str | None:
        """The first supported probe model, or a message when the support answer is malformed."""
        for t in PROBE_TYPES:
            model = add_model(t)
            try:
                flags = list(self.device.getSupportedOperations_1_3(model))
            except HalError:
                continue
            if len(flags) != 1:
                return (
                    f"getSupportedOperations_1_3 returned {len(flags)} flags for the 1 main "
                    f"operation of a {OperandType(t).name} ADD model"
                )
            if flags == [True]:
                return Probe(t, model)
        return None

    def probe(self) -> Probe | None:
        """The probe model in the first of PROBE_TYPES the target supports (asked once)."""
        found = self.cached("probe-model", self._find_probe)
        return found if isinstance(found, Probe) else None

    def require_probe(self) -> Probe:
        found = self.cached("probe-model", self._find_probe)
        if isinstance(found, str):
            fail(found)
        if found is None:
            skip(
                "the target supports ADD in none of "
                + ", ".join(OperandType(t).name for t in PROBE_TYPES)
                + ": no probe model to run this test with"
            )
        assert isinstance(found, Probe)
        return found

    # ---- capabilities ----

    def capability(self, name: str) -> Capability:
        """One of "burst", "fenced", "caching", "memory_domains", "extensions" (probed once)."""
        with self._lock:
            if name in self._probes:
                return self._probes[name]
        probe: Callable[[], Capability] = getattr(self, f"_probe_{name}")
        try:
            result = probe()
        except HalError as e:
            result = Capability(True, "", None, f"probing {name} failed: {e}")
        with self._lock:
            return self._probes.setdefault(name, result)

    def require(self, name: str) -> Capability:
        """Skip when the target does not offer ``name``; fail when it offers it broken."""
        cap = self.capability(name)
        if cap.broken:
            fail(f"the target offers {name} but its probe failed: {cap.broken}")
        if not cap.present:
            skip(cap.reason)
        return cap

    def _probe_model(self) -> tuple[Probe | None, Any]:
        found = self.cached("probe-model", self._find_probe)
        if isinstance(found, str):
            raise InvalidArgument(found)  # reported as a broken capability
        probe = found
        if probe is None:
            return None, None
        return probe, self.device.prepareModel_1_3(probe.model)

    _NO_PROBE = Capability(
        False,
        "the target supports ADD in none of float32, float16, quant8 asymm and signed: "
        "no probe model",
    )

    def _probe_burst(self) -> Capability:
        probe, prepared = self._probe_model()
        if probe is None:
            return self._NO_PROBE
        try:
            with prepared.burst() as burst:
                out = burst.execute([probe.x(), probe.y()]).outputs[0]
            if not np.array_equal(out, probe.expected()):
                return Capability(
                    True, "", None,
                    f"a burst execution of {probe.type_name} ADD returned {out.tolist()}, "
                    f"expected {probe.expected().tolist()}",
                )  # fmt: skip
            return Capability(True, "", probe.type_name)
        except HalError as e:
            if _unimplemented(e):
                return Capability(False, f"configureExecutionBurst is not available: {e}")
            return Capability(
                True, "", None, f"a burst execution of a valid {probe.type_name} ADD failed: {e}"
            )
        finally:
            prepared.release()

    def _probe_fenced(self) -> Capability:
        probe, prepared = self._probe_model()
        if probe is None:
            return self._NO_PROBE
        try:
            _, fenced = prepared.execute_fenced([probe.x(), probe.y()])
            try:
                fenced.callback.release()
            except HalError:
                pass
            return Capability(True, "", probe.type_name)
        except HalError as e:
            if _unimplemented(e):
                return Capability(False, f"executeFenced is not available: {e}")
            return Capability(
                True, "", None, f"executeFenced of a valid {probe.type_name} ADD failed: {e}"
            )
        finally:
            prepared.release()

    def _probe_caching(self) -> Capability:
        num_model, num_data = self.device.getNumberOfCacheFilesNeeded()
        if (num_model, num_data) == (0, 0):
            return Capability(
                False,
                "getNumberOfCacheFilesNeeded is (0, 0): the target does not support "
                "compilation caching",
                (0, 0),
            )
        if not self.is_local:
            return Capability(
                False,
                f"the target caches ({num_model}, {num_data}) files, but cache files are paths "
                f"on the target's host and {self.address} is not a loopback address",
                (num_model, num_data),
            )
        return Capability(True, "", (num_model, num_data))

    def _probe_memory_domains(self) -> Capability:
        probe, prepared = self._probe_model()
        if probe is None:
            return self._NO_PROBE
        try:
            buffer = self.device.allocate(BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [])
        except HalError as e:
            if e.status == ErrorStatus.GENERAL_FAILURE or _unimplemented(e):
                # how a driver without memory domains answers (VTS accepts it)
                return Capability(
                    False,
                    f"IDevice::allocate of a valid input role returned {e.status.name}: memory "
                    f"domains are not supported ({e.message})",
                )
            return Capability(
                True, "", None,
                f"IDevice::allocate of a valid {probe.type_name} input role returned {e} "
                "(only GENERAL_FAILURE says memory domains are not supported)",
            )  # fmt: skip
        finally:
            prepared.release()
        try:
            buffer.release()
        except HalError:
            pass
        return Capability(True, "", probe.type_name)

    def _probe_extensions(self) -> Capability:
        extensions = self.device.getSupportedExtensions()
        if not extensions:
            return Capability(False, "getSupportedExtensions is empty: no vendor extensions", ())
        return Capability(True, "", tuple(extensions))


def _unimplemented(e: Exception) -> bool:
    """The RPC itself is not served (gRPC UNIMPLEMENTED): the feature is not offered."""
    return "UNIMPLEMENTED" in str(e)


def probe_names() -> tuple[str, ...]:
    return ("burst", "fenced", "caching", "memory_domains", "extensions")
