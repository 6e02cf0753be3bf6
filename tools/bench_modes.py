"""How ``nnhal bench`` runs a workload: the execution modes, in this process.

==========  =================================================================
executor    ``nnhal.driver.executor`` ``CompiledModel.run`` (the compiled model alone)
generic     the same compiled without ``nnhal.driver.executor.specialize`` (what the
            specialisations gain)
prepared    the driver's ``PreparedModel.execute`` on an inline request
            (request validation, pool mapping, output writing; no transport)
grpc        ``nnhal.client`` over gRPC to an in-process server, inline bytes
grpc-shm    the same with request memory in a POSIX shared-memory segment
            (the client makes one segment per execution, as ``execute`` does)
burst       an execution burst (bidirectional stream), inline bytes
==========  =================================================================

``Harness`` owns the device (with the op packages ``nnhal bench --op-package`` and the
installed ones give it, as ``nnhal serve`` builds it), the server and the client for one
suite run; the executor modes compile a model as that device prepares it (its packages'
kernels and rewrite rules);
``runners`` prepares one workload in every mode asked for and returns a
callable per mode giving the outputs as numpy arrays. The loop timeout
(loopTimeoutDuration) and a deadline relative to each call apply to every
mode that has them (bursts carry neither: the HAL 1.2 burst request has no
deadline and the default loop timeout).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from nnhal._client_io import IoPlan
from nnhal.types import LOOP_TIMEOUT_DEFAULT_NS

MODES = ("executor", "generic", "prepared", "grpc", "grpc-shm", "burst")
_REMOTE = ("grpc", "grpc-shm", "burst")


class Harness:
    """An in-process driver (and, for remote modes, a server and a client)."""

    def __init__(
        self,
        modes: tuple[str, ...] = MODES,
        *,
        loop_timeout_ns: int | None = None,
        deadline_ms: float | None = None,
        profile: str | None = None,
        device_options: dict[str, Any] | None = None,
    ) -> None:
        from nnhal.driver.device import Device

        unknown = [m for m in modes if m not in MODES]
        if unknown:
            raise ValueError(f"unknown mode(s) {unknown}; known: {', '.join(MODES)}")
        self.modes = tuple(modes)
        self.loop_timeout_ns = (
            LOOP_TIMEOUT_DEFAULT_NS if loop_timeout_ns is None else loop_timeout_ns
        )
        self.deadline_ns = None if deadline_ms is None else int(deadline_ms * 1e6)
        options = device_options or {}  # op packages, their backend (cli_oppkg.device_options)
        if profile:
            from nnhal.driver.profile import load_profile

            self.device = Device(load_profile(profile), **options)
        else:
            self.device = Device(**options)
        self.server = self.client = None
        self.address = ""
        self._release: list[Callable[[], object]] = []
        if any(m in _REMOTE for m in self.modes):
            from nnhal.driver.service import create_server

            from nnhal.client import connect

            self.server, self.address = create_server(self.device, "127.0.0.1:0")
            self.client = connect(self.address)

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for release in reversed(self._release):
            with contextlib.suppress(Exception):  # best effort at shutdown
                release()
        self._release.clear()
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.server is not None:
            self.server.stop(None)
            self.server = None
        self.device.close()  # op-package worker processes

    def _deadline(self) -> int | None:
        return None if self.deadline_ns is None else time.monotonic_ns() + self.deadline_ns

    def compile(self, model: Any, *, specialize: bool = True) -> Any:
        """``compile_model`` as the device prepares ``model``: with its op packages' kernels
        and rewrite rules when it has any."""
        from nnhal.driver.executor import compile_model

        extensions = self.device.extensions
        if not extensions:
            return compile_model(model, specialize=specialize)
        from nnhal.driver.extensions import compiling

        analysis = self.device.analyze(model)
        with compiling(analysis.extensions):
            return compile_model(
                extensions.rewrite(model), pool_views=analysis.pool_views(), specialize=specialize
            )

    def runners(
        self,
        model: Any,
        inputs: list[np.ndarray],
        output_shapes: list[tuple[int, ...]],
        output_dtypes: list[Any] | None = None,
    ) -> dict[str, Callable[[], list[np.ndarray]]]:
        """One callable per mode running ``model`` on ``inputs`` (``output_dtypes``: for
        outputs of extension operand types, as ``nnhal.client`` takes them)."""
        out: dict[str, Callable[[], list[np.ndarray]]] = {}
        lt = self.loop_timeout_ns
        dtypes = output_dtypes
        if "executor" in self.modes:
            compiled = self.compile(model)
            out["executor"] = lambda: compiled.run(
                [None if a is None else a.copy() for a in inputs],
                loop_timeout_ns=lt,
                deadline_ns=self._deadline(),
            )
        if "generic" in self.modes:
            plain = self.compile(model, specialize=False)
            out["generic"] = lambda: plain.run(
                [None if a is None else a.copy() for a in inputs],
                loop_timeout_ns=lt,
                deadline_ns=self._deadline(),
            )
        if "prepared" in self.modes:
            prepared = self.device.prepareModel_1_3(model)
            out["prepared"] = _prepared_runner(self, prepared, model, inputs, output_shapes, dtypes)
        if self.client is not None and any(m in self.modes for m in _REMOTE):
            remote = self.client.prepareModel_1_3(model)
            self._release.append(remote.release)
            for mode, memory in (("grpc", "inline"), ("grpc-shm", "shared")):
                if mode in self.modes:
                    out[mode] = _remote_runner(
                        self, remote, inputs, output_shapes, memory, dtypes
                    )
            if "burst" in self.modes:
                burst = remote.burst()
                self._release.insert(0, burst.close)
                out["burst"] = lambda: burst.execute(
                    inputs, output_shapes=output_shapes, output_dtypes=dtypes
                ).outputs
        return out

    def timing(
        self,
        model: Any,
        inputs: list[np.ndarray],
        output_shapes: list[tuple[int, ...]],
        output_dtypes: list[Any] | None = None,
    ) -> dict[str, int] | None:
        """The driver's Timing (µs) of one measured execution over gRPC, or None."""
        if self.client is None:
            return None
        remote = self.client.prepareModel_1_3(model)
        try:
            result = remote.execute(
                inputs,
                output_shapes=output_shapes,
                output_dtypes=output_dtypes,
                measure=True,
                loop_timeout_ns=self.loop_timeout_ns,
            )
        finally:
            remote.release()
        return {
            "timeOnDevice": int(result.timing.timeOnDevice),
            "timeInDriver": int(result.timing.timeInDriver),
        }


def _prepared_runner(harness, prepared, model, inputs, output_shapes, output_dtypes=None):
    plan = IoPlan(model, inputs, output_shapes, "inline", output_dtypes)
    pools = plan.request.pools
    lt = harness.loop_timeout_ns

    def run() -> list[np.ndarray]:
        views = [memoryview(bytearray(pool.data)) for pool in pools]
        shapes, _ = prepared.execute(
            plan.request, views, loop_timeout_ns=lt, deadline_ns=harness._deadline()
        )
        return plan.read_outputs(shapes, {1: views[1].tobytes() if len(views) > 1 else b""})

    return run


def _remote_runner(harness, remote, inputs, output_shapes, memory, output_dtypes=None):
    lt = harness.loop_timeout_ns

    def run() -> list[np.ndarray]:
        return remote.execute(
            inputs,
            output_shapes=output_shapes,
            loop_timeout_ns=lt,
            deadline_ns=harness._deadline(),
            memory=memory,
            output_dtypes=output_dtypes,
        ).outputs

    return run
