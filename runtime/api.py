"""The NDK-shaped API: Model, Compilation, Execution (docs/runtime.md maps every
ANeuralNetworks* function and result code to these).

    model = Model.from_file("add.json.gz")          # or Model(builder.build())
    compilation = Compilation(model, devices=[connect_target("127.0.0.1:50051")])
    compilation.set_preference(ExecutionPreference.SUSTAINED_SPEED)
    compilation.finish()                            # partitions and prepares
    execution = Execution(compilation)
    execution.set_input(0, array)
    outputs = execution.compute()                   # or start_compute() / burst / fenced
    execution.report                                # steps, fallbacks, per-step timing

The compilation's devices are the ones given (Android's createForDevices) plus
the CPU device ``nnapi-reference``, which is always last: Android's
ANeuralNetworksCompilation_create uses every device and the CPU, and falls
back to the CPU. ``use_reference=False`` leaves it out (as createForDevices
does); then there is no CPU fallback and every operation needs a device.
Errors are the HAL's (``nnhal.errors``); ``result_code`` turns one into the
NDK's ANEURALNETWORKS_* number.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from nnhal.runtime.devices import MODES, RuntimeDevice, StepModel
from nnhal.runtime.executor import ExecutionReport, PlanRun, prime_step, single_report
from nnhal.runtime.host import host_devices
from nnhal.runtime.partition import DeviceStep, SubgraphPlan, iter_steps, number_steps, partition
from nnhal.runtime.reference import reference_device

from nnhal._validation_control_flow import runtime_validation
from nnhal.errors import HalError, InvalidArgument, OutputInsufficientSize
from nnhal.types import (
    LOOP_TIMEOUT_DEFAULT_NS,
    LOOP_TIMEOUT_MAXIMUM_NS,
    ErrorStatus,
    ExecutionPreference,
    OperationType,
    OutputShape,
    Priority,
    Timing,
    is_extension_type,
)
from nnhal.types import (
    Model as HalModel,
)
from nnhal.validation import validate_model as _validate_model

# ANeuralNetworks result codes (NeuralNetworks.h)
NO_ERROR = 0
OUT_OF_MEMORY = 1
INCOMPLETE = 2
UNEXPECTED_NULL = 3
BAD_DATA = 4
OP_FAILED = 5
BAD_STATE = 6
UNMAPPABLE = 7
OUTPUT_INSUFFICIENT_SIZE = 8
UNAVAILABLE_DEVICE = 9
MISSED_DEADLINE_TRANSIENT = 10
MISSED_DEADLINE_PERSISTENT = 11
RESOURCE_EXHAUSTED_TRANSIENT = 12
RESOURCE_EXHAUSTED_PERSISTENT = 13
DEAD_OBJECT = 14

_FROM_STATUS = {
    0: NO_ERROR,
    1: UNAVAILABLE_DEVICE,
    2: OP_FAILED,
    3: OUTPUT_INSUFFICIENT_SIZE,
    4: BAD_DATA,
    5: MISSED_DEADLINE_TRANSIENT,
    6: MISSED_DEADLINE_PERSISTENT,
    7: RESOURCE_EXHAUSTED_TRANSIENT,
    8: RESOURCE_EXHAUSTED_PERSISTENT,
}


class BadState(Exception):
    """ANEURALNETWORKS_BAD_STATE: a call out of order (e.g. a finished compilation changed)."""


def validate_model(model: HalModel) -> None:
    """Validate as the runtime does (ValidationMode::RUNTIME): control-flow operands of
    unknown size are allowed, since the runtime's interpreter runs those operations."""
    with runtime_validation():
        _validate_model(model)


def result_code(error: BaseException | None) -> int:
    """convertErrorStatusToResultCode: the NDK result code of an outcome."""
    if error is None:
        return NO_ERROR
    if isinstance(error, BadState):
        return BAD_STATE
    if isinstance(error, HalError):
        return _FROM_STATUS[int(error.status)]
    if isinstance(error, (ValueError, TypeError)):
        return BAD_DATA
    return OP_FAILED


class Model:
    """ANeuralNetworksModel: a finished HAL model (build it with nnhal.builder)."""

    def __init__(self, model: HalModel) -> None:
        validate_model(model)  # BAD_DATA early, as ANeuralNetworksModel_finish does
        self.hal = model

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> Model:
        """The first model (or the one named ``name``) of a vector file (nnhal.vectors)."""
        return cls(load_test_model(path, name).model)


def load_test_model(path: str | Path, name: str | None = None) -> Any:
    from nnhal.vectors import load_vectors

    tests = load_vectors(path)
    if name is not None:
        tests = [t for t in tests if t.name == name or t.testName == name]
    if not tests:
        raise ValueError(f"{path}: no test model{' named ' + name if name else ''}")
    return tests[0]


class Compilation:
    """ANeuralNetworksCompilation: devices, preference, priority, caching, then ``finish``."""

    def __init__(
        self,
        model: Model | HalModel,
        devices: Sequence[RuntimeDevice] = (),
        *,
        use_reference: bool = True,
    ) -> None:
        self.model = model.hal if isinstance(model, Model) else model
        if not isinstance(model, Model):
            validate_model(self.model)
        main = self.model.main
        self.io_counts = (len(main.inputIndexes), len(main.outputIndexes))
        self.reference = reference_device()
        devs = [d for d in devices if not d.is_reference]
        # a model with host operations (nnhal.runtime.host) brings the device running them
        self.hosts = [h for h in host_devices(self.model) if h.name not in {d.name for d in devs}]
        devs += self.hosts
        names = [d.name for d in devs]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"two devices have the same name: {names}")
        if use_reference:
            devs.append(self.reference)
        if not devs:
            raise InvalidArgument("a compilation needs at least one device")
        self.devices = devs
        self.allow_fallback = use_reference  # partitioningAllowsFallback
        self.preference = ExecutionPreference.FAST_SINGLE_ANSWER
        self.priority = Priority.MEDIUM
        self.timeout_ns: int | None = None
        self.cache: tuple[str, bytes] | None = None
        self.plan: SubgraphPlan | None = None
        #: the preparation failure that sent the whole model to nnapi-reference (finish)
        self.fallback: dict[str, str] | None = None
        #: (step, device, prepared step) of a simple plan, set by finish
        self.single: tuple[DeviceStep, RuntimeDevice, StepModel] | None = None
        self._steps: dict[tuple[int, str], StepModel] = {}
        self._cpu_plan: SubgraphPlan | None = None
        self._lock = threading.Lock()

    # -- settings (each BAD_STATE after finish) -------------------------------

    def _settable(self) -> None:
        if self.plan is not None:
            raise BadState("the compilation is finished")

    def set_preference(self, preference: int) -> None:
        self._settable()
        self.preference = ExecutionPreference(int(preference))

    def set_priority(self, priority: int) -> None:
        self._settable()
        self.priority = Priority(int(priority))

    def set_timeout(self, timeout_ns: int | None) -> None:
        """ANeuralNetworksCompilation_setTimeout (a compilation of exactly one device)."""
        self._settable()
        _one_device(self, "a compilation timeout")
        if timeout_ns is not None and timeout_ns < 0:
            raise InvalidArgument("the compilation timeout is negative")
        self.timeout_ns = timeout_ns

    def set_caching(self, cache_dir: str | Path, token: bytes) -> None:
        """ANeuralNetworksCompilation_setCaching: files under ``cache_dir``, one token."""
        self._settable()
        if len(token) != 32:
            raise InvalidArgument(f"the caching token must be 32 bytes, not {len(token)}")
        self.cache = (str(cache_dir), bytes(token))

    # -- finish ---------------------------------------------------------------

    def finish(self) -> Compilation:
        """Partition, then prepare every step on its device (BAD_STATE when finished).

        A preparation failing with any status but INVALID_ARGUMENT (the app's error: BAD_DATA)
        makes the whole model go to ``nnapi-reference`` instead, as CompilationBuilder::finish
        does, unless the compilation has no CPU device or the model has an OEM or extension
        operation; ``self.fallback`` then records it."""
        self._settable()
        plan = partition(self.model, self.devices, self.preference)
        number_steps(plan)
        deadline = None if self.timeout_ns is None else time.monotonic_ns() + self.timeout_ns
        try:
            self._prepare_plan(plan, deadline)
        except HalError as exc:
            self.release()
            if exc.status == ErrorStatus.INVALID_ARGUMENT or not self._may_fall_back():
                raise
            self.fallback = {"status": exc.status.name, "message": exc.message}
            plan = self.cpu_plan()
            try:
                self._prepare_plan(plan, deadline)
            except HalError:
                self.release()
                raise
        self.plan = plan
        if plan.simple:  # one step, the whole model on one device: Execution's fast path
            step = plan.steps[0]
            device = plan.devices[step.device]
            self.single = (step, device, self._steps[(step.index, device.name)])
        return self

    def _prepare_plan(self, plan: SubgraphPlan, deadline: int | None) -> None:
        for step in iter_steps(plan):
            if isinstance(step, DeviceStep):
                prime_step(step, self.model)
                self._prepare(step, plan.devices[step.device], deadline)

    def _may_fall_back(self) -> bool:
        """partitioningAllowsFallback, and no OEM or extension operation (the CPU has none)."""
        if not self.allow_fallback:
            return False
        for sub in (self.model.main, *self.model.referenced):
            for op in sub.operations:
                if op.type == OperationType.OEM_OPERATION or is_extension_type(op.type):
                    return False
        return True

    def _cache_args(self, step: DeviceStep, device: RuntimeDevice) -> dict[str, Any]:
        if self.cache is None or device.is_reference:
            return {}
        import hashlib

        directory, token = self.cache
        # one token per step and device, derived from the compilation's (as Android does)
        step_token = hashlib.sha256(token + f"/{step.index}/{device.name}".encode()).digest()
        base = Path(directory) / step_token.hex()[:16]
        try:
            needed = device.device.getNumberOfCacheFilesNeeded()
        except (AttributeError, HalError):
            return {}
        model_cache = [[f"{base}.model{i}"] for i in range(needed[0])]
        data_cache = [[f"{base}.data{i}"] for i in range(needed[1])]
        Path(directory).mkdir(parents=True, exist_ok=True)
        for handle in (*model_cache, *data_cache):
            Path(handle[0]).touch()
        return {"modelCache": model_cache, "dataCache": data_cache, "token": step_token}

    def _prepare(self, step: DeviceStep, device: RuntimeDevice, deadline: int | None) -> StepModel:
        key = (step.index, device.name)
        with self._lock:
            prepared = self._steps.get(key)
            if prepared is None:
                prepared = device.prepare(
                    step.io.model, self.preference, self.priority, deadline_ns=deadline,
                    **self._cache_args(step, device),
                )  # fmt: skip
                self._steps[key] = prepared
            return prepared

    def step_model(self, step: DeviceStep, device: RuntimeDevice) -> StepModel:
        """The step prepared on ``device`` (a CPU fallback prepares on first use)."""
        prepared = self._steps.get((step.index, device.name))  # no lock: a dict read is atomic
        return prepared if prepared is not None else self._prepare(step, device, None)

    def cpu_plan(self) -> SubgraphPlan:
        """The plan of the full CPU fallback: everything on ``nnapi-reference``."""
        with self._lock:
            if self._cpu_plan is None:
                # host operations stay on the host: it is the CPU already
                plan = partition(self.model, [*self.hosts, self.reference], self.preference)
                number_steps(plan, 10_000)  # distinct report numbers from the main plan
                self._cpu_plan = plan
        return self._cpu_plan

    def release(self) -> None:
        with self._lock:
            steps, self._steps = list(self._steps.values()), {}
            self.single = None
        for s in steps:
            s.release()

    def __enter__(self) -> Compilation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Execution:
    """ANeuralNetworksExecution: inputs, outputs, one compute, then its results."""

    _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="nnhal-runtime")

    # Defaults, as class attributes: an execution sets only what it changes (an app makes
    # one Execution per compute, so this is per-execution work).
    measure = False
    timeout_ns: int | None = None
    loop_timeout_ns: int | None = None
    results: list[np.ndarray] | None = None
    _buffers = False  # an output was given a buffer (or memory) to fill
    _shapes_given = False  # an output was given its dimensions
    _started = False
    _report: ExecutionReport | None = None
    _single_run: tuple[Any, ...] | None = None  # what the fast path's report needs
    _output_shapes: tuple[OutputShape, ...] = ()

    def __init__(self, compilation: Compilation) -> None:
        if compilation.plan is None:
            raise BadState("the compilation is not finished")
        self.compilation = compilation
        n_in, n_out = compilation.io_counts
        self.inputs: list[Any] = [_UNSET] * n_in
        self.outputs: list[Any] = [_UNSET] * n_out
        self._unset = n_in + n_out  # inputs and outputs not set yet

    # -- setup ------------------------------------------------------------------

    def _settable(self) -> None:
        if self._started:
            raise BadState("the execution has started")

    def set_input(self, index: int, value: Any) -> None:
        """setInput; None = omitted (setInput with a null buffer)."""
        # the checks inline (not _settable/_index): this runs for every input of every execution
        if self._started:
            raise BadState("the execution has started")
        inputs = self.inputs
        if not 0 <= index < len(inputs):
            _index(index, inputs, "input")
        if inputs[index] is _UNSET:
            self._unset -= 1
        if type(value) is not np.ndarray and value is not None:
            value = np.asarray(value)  # an ndarray as it is (what asarray would return)
        inputs[index] = value

    def set_input_from_memory(
        self, index: int, memory: Any, offset: int, length: int, dtype, shape
    ):
        """setInputFromMemory: read from a shared-memory segment (multiprocessing.shared_memory)."""
        self._settable()
        _index(index, self.inputs, "input")
        raw = np.frombuffer(memory.buf, dtype=np.uint8, count=length, offset=offset)
        if self.inputs[index] is _UNSET:
            self._unset -= 1
        self.inputs[index] = raw.view(dtype).reshape(shape).copy()

    def set_output(self, index: int, buffer: np.ndarray | None = None, shape=None) -> None:
        """setOutput: a buffer to fill (its size is checked: OUTPUT_INSUFFICIENT_SIZE), or just
        the dimensions to expect; None for both = the model's dimensions."""
        if self._started:
            raise BadState("the execution has started")
        outputs = self.outputs
        if not 0 <= index < len(outputs):
            _index(index, outputs, "output")
        if outputs[index] is _UNSET:
            self._unset -= 1
        if buffer is None and shape is None:
            outputs[index] = _PLAIN_OUTPUT
            return
        if buffer is not None:
            self._buffers = True
        if shape is not None:
            self._shapes_given = True
        outputs[index] = (buffer, None if shape is None else tuple(shape))

    def set_output_from_memory(
        self, index: int, memory: Any, offset: int, length: int, dtype, shape
    ):
        """setOutputFromMemory: write the result into a shared-memory segment."""
        self._settable()
        _index(index, self.outputs, "output")
        view = np.frombuffer(memory.buf, dtype=np.uint8, count=length, offset=offset)
        if self.outputs[index] is _UNSET:
            self._unset -= 1
        self._buffers = self._shapes_given = True
        self.outputs[index] = (view, tuple(shape), np.dtype(dtype))

    def set_measure_timing(self, measure: bool) -> None:
        self._settable()
        if measure:
            _one_device(self.compilation, "timing")
        self.measure = bool(measure)

    def set_measure_step_timing(self, measure: bool) -> None:
        """nnhal extension: measure every step of any compilation (``step_timings``);
        Android measures only one-device compilations (``set_measure_timing``)."""
        self._settable()
        self.measure = bool(measure)

    def set_timeout(self, timeout_ns: int | None) -> None:
        """ANeuralNetworksExecution_setTimeout (a compilation of exactly one device)."""
        self._settable()
        if timeout_ns is not None:
            _one_device(self.compilation, "an execution timeout")
        if timeout_ns is not None and timeout_ns < 0:
            raise InvalidArgument("the execution timeout is negative")
        self.timeout_ns = timeout_ns

    def set_loop_timeout(self, timeout_ns: int | None) -> None:
        """setLoopTimeout: above the maximum (15 s) it is clamped, as Android does."""
        self._settable()
        if timeout_ns is not None and timeout_ns < 0:
            raise InvalidArgument("the loop timeout is negative")
        self.loop_timeout_ns = (
            None if timeout_ns is None else min(timeout_ns, LOOP_TIMEOUT_MAXIMUM_NS)
        )

    # -- compute ----------------------------------------------------------------

    def compute(self, mode: str = "sync") -> list[np.ndarray]:
        """compute (mode "sync"), burstCompute ("burst"), startComputeWithDependencies
        ("fenced"); "async" is what start_compute runs."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if self._started:
            raise BadState("the execution has started")
        if self._unset:
            raise BadState("not all inputs and outputs are set")
        self._started = True
        single = self.compilation.single
        if single is not None and self.timeout_ns is None:
            # The fast path (a simple plan, no deadline): the inputs go straight to the one
            # prepared step, and the report is built only when read. A failure continues in
            # PlanRun from that first attempt (re-runs, fallbacks), so outcome and report are
            # the general path's.
            step = single[0]
            shapes = step.run_shapes
            if self._shapes_given:  # the caller's dimensions, else the step's first guess
                shapes = [o[1] if o[1] is not None else g for o, g in zip(self.outputs, step.guess)]
            loop = self.loop_timeout_ns  # set_loop_timeout clamped it already
            try:
                result = single[2].run(
                    self.inputs,
                    shapes,
                    mode=mode,
                    measure=self.measure,
                    deadline_ns=None,
                    loop_timeout_ns=LOOP_TIMEOUT_DEFAULT_NS if loop is None else loop,
                )
            except HalError as exc:
                arrays = self._plan_run(mode, None).run(self.inputs, first_error=exc)
            else:
                self._single_run = (single, result.timing)
                self._report = None  # built from _single_run when read (even if read before)
                arrays = result.outputs
        else:
            deadline = None if self.timeout_ns is None else time.monotonic_ns() + self.timeout_ns
            arrays = self._plan_run(mode, deadline).run(self.inputs)
        if self._buffers:
            self._deliver(arrays)
        self.results = arrays
        return arrays

    def _plan_run(self, mode: str, deadline: int | None) -> PlanRun:
        run = PlanRun(self.compilation, mode=mode, measure=self.measure, deadline_ns=deadline,
                      loop_timeout_ns=self.loop_timeout_ns,
                      output_shapes=[o[1] for o in self.outputs])  # fmt: skip
        self._report = run.report
        return run

    @property
    def report(self) -> ExecutionReport:
        """The execution's report: steps, fallbacks, the runtime's call trace (empty before
        a compute)."""
        if self._report is None:
            done = self._single_run
            if done is None:
                self._report = ExecutionReport()
            else:
                (step, device, _), timing = done
                self._report = single_report(step, device.name, timing)
        return self._report

    @property
    def output_shapes(self) -> tuple[OutputShape, ...]:
        """The outputs' dimensions after a compute (isSufficient false for a buffer too small)."""
        if not self._output_shapes and self.results is not None:
            self._output_shapes = tuple(OutputShape(a.shape, True) for a in self.results)
        return self._output_shapes

    def start_compute(self) -> Future:
        """startCompute: a Future of the outputs (ANeuralNetworksEvent_wait = result())."""
        return self._pool.submit(self.compute, "async")

    def _deliver(self, arrays: list[np.ndarray]) -> None:
        short = []
        for k, (spec, array) in enumerate(zip(self.outputs, arrays)):
            if spec[0] is None:
                continue
            buffer = spec[0]
            if array.nbytes > buffer.nbytes:
                short.append(k)
        if short:
            self._output_shapes = tuple(
                OutputShape(tuple(a.shape), k not in short) for k, a in enumerate(arrays)
            )
            raise OutputInsufficientSize(
                f"outputs {short}: the buffers given are smaller than the results",
                self.output_shapes,
            )
        for spec, array in zip(self.outputs, arrays):
            if spec[0] is None:
                continue
            buffer = spec[0]
            flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
            buffer.reshape(-1).view(np.uint8)[: flat.size] = flat

    # -- results ----------------------------------------------------------------

    def get_output_operand_dimensions(self, index: int) -> tuple[int, ...]:
        if self.results is None and not self._output_shapes:
            raise BadState("the execution has not finished")
        return tuple(self.output_shapes[index].dimensions)

    def get_output_operand_rank(self, index: int) -> int:
        return len(self.get_output_operand_dimensions(index))

    def get_duration(self) -> dict[str, int]:
        """getDuration: summed over device steps (UINT64_MAX when not measured)."""
        on, driver = 0, 0
        timings = [s.timing for s in self.report.steps if s.timing is not None]
        if not self.measure or not timings:
            return {"ON_HARDWARE": 2**64 - 1, "IN_DRIVER": 2**64 - 1}
        for t in timings:
            on += t.timeOnDevice
            driver += t.timeInDriver
        return {"ON_HARDWARE": on, "IN_DRIVER": driver}

    def step_timings(self) -> list[tuple[int, str, Timing | None]]:
        return [(s.step, s.device, s.timing) for s in self.report.steps]


_UNSET = object()
_PLAIN_OUTPUT = (None, None)  # an output with neither a buffer nor dimensions given


def _one_device(compilation: Compilation, what: str) -> None:
    # Android: only for a compilation made by createForDevices with exactly one device
    if len(compilation.devices) != 1:
        names = [d.name for d in compilation.devices]
        raise InvalidArgument(
            f"{what} needs a compilation of exactly one device; this one has {names} "
            "(use_reference=False with one device, or no device for nnapi-reference alone)"
        )


def get_supported_operations_for_devices(
    model: Model | HalModel, devices: Sequence[RuntimeDevice]
) -> list[bool]:
    """ANeuralNetworksModel_getSupportedOperationsForDevices: per main operation, whether
    any of ``devices`` supports it."""
    hal = model.hal if isinstance(model, Model) else model
    if not devices:
        raise InvalidArgument("no devices given")
    answers = [d.explain(hal)[0] for d in devices]
    return [any(a[k] for a in answers) for k in range(len(hal.main.operations))]


def default_loop_timeout() -> int:
    """ANeuralNetworks_getDefaultLoopTimeout (ns)."""
    from nnhal.types import LOOP_TIMEOUT_DEFAULT_NS

    return LOOP_TIMEOUT_DEFAULT_NS


def maximum_loop_timeout() -> int:
    """ANeuralNetworks_getMaximumLoopTimeout (ns)."""
    return LOOP_TIMEOUT_MAXIMUM_NS


def _index(index: int, items: list, what: str) -> None:
    if not 0 <= index < len(items):
        raise InvalidArgument(f"{what} {index} does not exist: the model has {len(items)} {what}s")


def run_model(
    model: HalModel,
    inputs: Sequence[Any],
    devices: Sequence[RuntimeDevice] = (),
    *,
    preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
    output_shapes=None,
    mode: str = "sync",
    loop_timeout_ns: int | None = None,
    use_reference: bool = True,
) -> tuple[list[np.ndarray], Execution]:
    """Compile, run once and release: the outputs and the Execution (its report)."""
    compilation = Compilation(model, devices, use_reference=use_reference)
    compilation.set_preference(preference)
    compilation.finish()
    try:
        execution = Execution(compilation)
        for k, value in enumerate(inputs):
            execution.set_input(k, value)
        for k in range(len(execution.outputs)):
            shape = None if output_shapes is None else output_shapes[k]
            execution.set_output(k, None, shape)
        execution.set_loop_timeout(loop_timeout_ns)
        outputs = execution.compute(mode)
        return outputs, execution
    finally:
        compilation.release()
