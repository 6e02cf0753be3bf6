"""The emulated IDevice: capabilities, supported operations, prepare.

``Device`` answers the HAL 1.3 IDevice methods from a profile
(``nnhal.driver.profile``) and a backend (``nnhal.driver.backends.reference``).
``ModelAnalysis`` is what the device learns about one model during one call:
it is the operation validator handed to ``nnhal.validation.validate_model``
(registry checks plus the HAL version limit) and keeps what that pass learnt
(operand descriptions, each operation's HAL version) for the support decision.
Constants are read there as zero-copy views of the model's bytes, so
validation and support stay cheap enough to run per request; the compiler
decodes the values a prepared model keeps (a copy for pool data; operandValues
bytes in place, see ``executor.operands.decode_constant``).

Design choice, as in the AOSP sample "partial" drivers: preparing a model
that has operations this device does not support fails with INVALID_ARGUMENT
naming the first unsupported operation and why. The runtime never asks for
that (it partitions by getSupportedOperations_1_3), and an emulator that
silently ran an operation its profile excludes would hide exactly the bugs a
profile exists to find.

Resource limits (``nnhal.driver.limits``, the profile's ``[limits]``): the model's
size is checked before validation, its IF/WHILE nesting and declared tensor
sizes after it (getSupportedOperations reports the operations beyond them as
unsupported; prepare refuses), and the executor checks tensor sizes at run time.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from nnhal.driver.analysis_cache import Analysis, AnalysisCache, CacheLookup
from nnhal.driver.backends import Backend, OpQuery
from nnhal.driver.backends.reference import ReferenceBackend
from nnhal.driver.cache import CompilationCache
from nnhal.driver.deadlines import deadline_passed
from nnhal.driver.executor import compile_model
from nnhal.driver.executor.compiler import Checked
from nnhal.driver.executor.operands import describe, map_model_pools, operand_info
from nnhal.driver.executor.shapes import strict_shapes
from nnhal.driver.extensions import ExtensionSet, compiling, extension_query
from nnhal.driver.limits import (
    check_declared_tensors,
    check_model_size,
    check_nesting,
    may_nest_deeper,
    model_subgraphs,
    nesting_depths,
    nesting_reason,
    out_of_memory,
)
from nnhal.driver.ops import registry
from nnhal.driver.ops.registry import OpContext, OperandInfo
from nnhal.driver.prepared_model import PreparedModel
from nnhal.driver.profile import Profile, load_profile
from nnhal.driver.support import explain_support, light_query
from nnhal.driver.support_rules import SupportPipeline, device_rules

from nnhal.errors import GeneralFailure, HalError, InvalidArgument, MissedDeadline
from nnhal.types import (
    OPERAND_TYPE_INFO,
    Capabilities,
    DeviceStatus,
    DeviceType,
    ExecutionPreference,
    Extension,
    HalVersion,
    InlineMemory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    OperationType,
    Priority,
    element_count,
    is_extension_type,
    operation_name,
    type_name,
)
from nnhal.validation import validate_execution_preference, validate_model, validate_priority

log = logging.getLogger("nnhal.driver")

_CONSTANT_LIFETIMES = frozenset({OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE})
_CONTROL_FLOW = frozenset({OperationType.IF, OperationType.WHILE})
_BOOL_TYPES = frozenset({OperandType.BOOL, OperandType.TENSOR_BOOL8})


def operation_version(code: int) -> HalVersion:
    """The HAL version that introduced an operation code (hal13.md §2.2 ranges)."""
    if code <= OperationType.TANH or code == OperationType.OEM_OPERATION:
        return HalVersion.V1_0
    if code <= OperationType.TRANSPOSE:
        return HalVersion.V1_1
    if code <= OperationType.RESIZE_NEAREST_NEIGHBOR:
        return HalVersion.V1_2
    return HalVersion.V1_3


#: operation_version of every HAL operation code (looked up once per operation checked)
_OPERATION_VERSIONS = {int(code): operation_version(code) for code in OperationType}


class ModelAnalysis:
    """One model seen by the device during one call (not shared between threads)."""

    def __init__(self, model: Model, version: HalVersion = HalVersion.V1_3) -> None:
        self.model = model
        self.version = HalVersion(version)
        self._views: list[memoryview] | None = None
        self._infos: dict[tuple[int, int], OperandInfo] = {}
        #: ``_infos`` were made from ``model`` itself (not kept from an identical one)
        self._own_infos = True
        #: (subgraph, operation) -> the context its checks ran on (for the compiler)
        self._contexts: dict[tuple[int, int], OpContext] = {}
        self._queries: dict[tuple[int, int], OpQuery] = {}
        #: (subgraph, operation) -> the registry definition its checks passed with; the
        #: compiler does not run them again for the same definition (compile_model)
        self.validated: dict[tuple[int, int], Any] = {}
        #: this model's extension prefixes resolved by the device (None: no extensions)
        self.extensions: Any = None
        #: the check results kept for this model's key (``analysis_cache``); None: not kept
        self.kept: Analysis | None = None
        self._depths: list[int] | None = None

    @classmethod
    def revived(cls, model: Model, version: HalVersion, kept: Analysis) -> ModelAnalysis:
        """The analysis of ``model``, identical to the one ``kept`` was made from."""
        analysis = cls(model, version)
        analysis.validated = kept.validated
        analysis._infos = kept.infos
        analysis._own_infos = False  # their constants are views of the kept model's bytes
        analysis._queries = dict(kept.queries)  # query_for adds to its own
        analysis.kept = kept
        return analysis

    def keep(self, config: tuple) -> Analysis:
        """This (validated) analysis' results, to be kept under the model's key."""
        self.kept = Analysis(self.model, config, self.validated, self._infos, dict(self._queries))
        return self.kept

    # -- the whole model ------------------------------------------------

    def validate(self) -> None:
        """The operand-type rules (version, extensions), then validate_model with our
        operation validator (the type check first, so that its message names the type)."""
        self._check_operand_types()
        validate_model(self.model, operation_validator=self.validate_operation)

    def nesting_depths(self) -> list[int]:
        """``limits.nesting_depths`` of the model, walked once: preparation's nesting
        check and the support decision both read them."""
        if self._depths is None:
            self._depths = nesting_depths(self.model)
        return self._depths

    def pool_views(self) -> list[memoryview]:
        """The model's pools, mapped once per analysis (a bad pool is the caller's fault)."""
        if self._views is None:
            try:
                self._views = map_model_pools(self.model)
            except HalError as exc:
                raise InvalidArgument(f"cannot map the model's pools: {exc.message}") from exc
        return self._views

    def _check_operand_types(self) -> None:
        if self.version >= HalVersion.V1_3:
            return  # a HAL 1.3 model may use every type: nothing to walk
        subgraphs = (self.model.main, *self.model.referenced)
        for number, subgraph in enumerate(subgraphs):
            for k, operand in enumerate(subgraph.operands):
                code = operand.type
                if is_extension_type(code):
                    # validate_model refuses an undeclared prefix; an extension type this
                    # device does not know makes the operations using it unsupported
                    continue
                info = OPERAND_TYPE_INFO.get(code)
                if info is not None and info.version > self.version:
                    raise InvalidArgument(
                        f"subgraph {number}, operand {k}: type {type_name(code)} needs HAL "
                        f"{info.version}; the model was given as a HAL {self.version} model"
                    )

    # -- one operation --------------------------------------------------

    def operand_info(self, number: int, index: int) -> OperandInfo:
        key = (number, index)
        info = self._infos.get(key)
        if info is None:
            model = self.model
            subgraph = model.main if number == 0 else model.referenced[number - 1]
            operand = subgraph.operands[index]
            if operand.lifetime not in _CONSTANT_LIFETIMES:
                info = describe(operand)
            else:
                value = self._constant_view(operand)
                if value is not None:
                    info = describe(operand, value)
                else:  # decode_constant reads it (or raises its precise error)
                    info = operand_info(model, subgraph, index, self.pool_views())
            self._infos[key] = info
        return info

    def _constant_view(self, operand: Operand) -> np.ndarray | None:
        """A zero-copy, read-only view of a constant's data; None = let decode_constant do it.

        Validation and support only read constants, so they need no copy; the
        compiler decodes the values a prepared model keeps. (Inline pools are
        read straight from the message bytes: no mapping at all.)
        """
        info = OPERAND_TYPE_INFO.get(operand.type)
        if info is None or info.dtype is None or operand.type in _BOOL_TYPES:
            return None  # raw bytes or a 0/1 conversion: decode_constant's job
        loc = operand.location
        source: Any
        if operand.lifetime == OperandLifeTime.CONSTANT_COPY:
            source = self.model.operandValues
        else:
            if not 0 <= loc.poolIndex < len(self.model.pools):
                return None
            pool = self.model.pools[loc.poolIndex]
            if isinstance(pool, InlineMemory):
                source = pool.data
            else:
                source = self.pool_views()[loc.poolIndex]
        shape = () if info.is_scalar else tuple(operand.dimensions)
        count = element_count(shape)
        if (
            count == 0
            or count * info.byte_size != loc.length
            or loc.offset < 0
            or loc.offset + loc.length > len(source)
        ):
            return None  # decode_constant raises the precise error
        # the bounds are checked above: the array is made on the buffer directly (a third
        # of frombuffer and reshape's cost, for every constant of the model)
        value = np.ndarray(shape, info.dtype, source, loc.offset)
        if type(source) is not bytes:  # a view of bytes is read-only already
            value.flags.writeable = False
        return value

    def validate_operation(self, model: Model, number: int, index: int) -> None:
        """The OperationValidator: registry checks and the HAL version limit."""
        op = (model.main if number == 0 else model.referenced[number - 1]).operations[index]
        code = op.type
        place = f"subgraph {number}, operation {index}"  # support.where's words
        if is_extension_type(code):
            # the package's definition decides (driver/extensions.py); unknown ones raise
            self._queries[(number, index)] = extension_query(self, number, index, place)
            return
        needed = _OPERATION_VERSIONS.get(code) or operation_version(code)
        if needed > self.version:
            raise InvalidArgument(
                f"{operation_name(code)} ({place}): the operation needs HAL {needed}; "
                f"the model was given as a HAL {self.version} model"
            )
        definition = registry.lookup(code)
        if definition is None:
            # OEM_OPERATION or a HAL operation we do not implement: structurally
            # valid; the support decision says "no" with the reason.
            return
        # (validate_model calls this only once every operand index is in range; an
        # operand read by several operations is described once, then only looked up)
        described, describe = self._infos.get, self.operand_info
        inputs = [described((number, i)) or describe(number, i) for i in op.inputs]
        outputs = [described((number, i)) or describe(number, i) for i in op.outputs]
        relaxed = model.relaxComputationFloat32toFloat16
        ctx = OpContext(definition, inputs, outputs, relaxed, place)
        # the query keeps the descriptions as they were before the checks ran
        described_inputs, described_outputs = tuple(inputs), tuple(outputs)
        version = registry.validate_operation(ctx)
        if version > self.version:
            raise InvalidArgument(
                f"{operation_name(code)} ({place}): this signature needs HAL {version}; "
                f"the model was given as a HAL {self.version} model"
            )
        key = (number, index)
        self.validated[key] = definition
        self._contexts[key] = ctx
        self._queries[key] = OpQuery(
            code, described_inputs, described_outputs, relaxed, place, version, self.extensions
        )

    def every_operation_checked(self) -> bool:
        """Whether every operation of every subgraph other than IF and WHILE has a
        registry definition whose checks it passed (``validated``)."""
        model = self.model
        control_flow = sum(
            op.type in _CONTROL_FLOW
            for subgraph in (model.main, *model.referenced)
            for op in subgraph.operations
        )
        total = len(model.main.operations) + sum(len(s.operations) for s in model.referenced)
        return len(self.validated) == total - control_flow

    def checked(self, proofs_key: tuple | None = None) -> Checked:
        """What this analysis established, for the compiler to reuse (compile_model);
        with the shape proofs kept for ``proofs_key`` (strict shapes, tensor limit)."""
        proven = None
        if self.kept is not None and proofs_key is not None:
            proven = self.kept.proofs.get(proofs_key)
        return Checked(
            self.validated,
            self._infos,
            proven,
            model_views=self._own_infos,
            contexts=self._contexts if self._own_infos else {},
        )

    def query_for(self, number: int, index: int) -> OpQuery:
        """The backend's question for one operation (reuses the validation pass)."""
        key = (number, index)
        query = self._queries.get(key)
        if query is None:
            # IF/WHILE, OEM and unimplemented operations: descriptions are enough.
            query = light_query(self.model, number, index, self.extensions)
            self._queries[key] = query
        return query


class Device:
    """An emulated NNAPI HAL 1.3 device (thread-safe).

    With op packages in ``op_package_isolation = "process"`` it owns a pool of
    worker processes (``extensions.runner``): ``getStatus`` reports on it and
    ``close()`` stops it.
    """

    def __init__(
        self,
        profile: Profile | None = None,
        backend: Backend | None = None,
        op_packages: Any = (),
        package_backend: str | None = None,
    ) -> None:
        self.profile = profile if profile is not None else load_profile(None)
        #: the built-in operations' backend (the numpy reference unless given)
        self.backend: Backend = backend if backend is not None else ReferenceBackend()
        self.name = self.profile.name
        self.limits = self.profile.limits
        # op packages as NNAPI vendor extensions, seen through one package backend
        self.extensions = ExtensionSet(
            op_packages,
            package_backend or self.profile.op_package_backend or "CPU",
        )
        #: every support question goes through this (nnhal.driver.support_rules)
        self.support = SupportPipeline(
            device_rules(self.profile, self.limits), self.backend, self.extensions
        )
        self._own_support = self.support
        #: the same questions for a model whose declared sizes passed the limits already
        #: (preparation checks them first): without the rule that reads those sizes
        self._sized_support = SupportPipeline(
            device_rules(self.profile, self.limits, sizes_checked=True),
            self.backend,
            self.extensions,
        )
        if self.extensions.packages and self.profile.op_package_isolation == "process":
            from nnhal.driver.op_packages.supervisor import KernelSupervisor

            self.extensions.runner = KernelSupervisor(
                workers=self.profile.op_package_workers,
                kernel_timeout_ms=self.profile.op_package_kernel_timeout_ms,
                name=self.name,
                memory_bytes=self.profile.limits.max_worker_memory_bytes,
            )
        self.cache = CompilationCache()
        #: check results of models seen before (analysis_cache); only for the built-in
        #: configuration, whose answers depend on nothing but the model
        self.analyses: AnalysisCache | None = None
        if type(self.backend) is ReferenceBackend and not self.extensions:
            self.analyses = AnalysisCache()

    def __repr__(self) -> str:
        return f"Device(name={self.name!r}, profile source={self.profile.source!r})"

    # -- static facts ---------------------------------------------------

    def getCapabilities_1_3(self) -> Capabilities:
        return self.profile.capabilities

    def getVersionString(self) -> str:
        return self.profile.versionString

    def getType(self) -> DeviceType:
        return self.profile.type

    def getSupportedExtensions(self) -> tuple[Extension, ...]:
        return self.extensions.hal_extensions()

    def getStatus(self) -> DeviceStatus:
        """AVAILABLE; BUSY while an op-package worker that was killed or died is replaced."""
        runner = self.extensions.runner
        return DeviceStatus.AVAILABLE if runner is None else runner.status()

    def close(self) -> None:
        """Stop the device's op-package worker processes (idempotent). Executions of its
        prepared models that reach an op-package kernel afterwards fail."""
        runner = self.extensions.runner
        if runner is not None:
            runner.close()

    def getNumberOfCacheFilesNeeded(self) -> tuple[int, int]:
        return self.cache.files_needed()

    # -- models ---------------------------------------------------------

    def analyze(
        self, model: Model, version: HalVersion = HalVersion.V1_3, *, size_checked: bool = False
    ) -> ModelAnalysis:
        """Validate ``model`` as a HAL ``version`` model (raises InvalidArgument).

        ``size_checked``: the caller has checked the model's counts against the size limits
        already (the service does, on the message, before decoding it)."""
        lookup = None
        if self.analyses is not None:
            lookup = CacheLookup(model, version)
            kept = self.analyses.get(lookup, model, self._config())
            if kept is not None:  # the same model passed every check below before
                return ModelAnalysis.revived(model, HalVersion(version), kept)
        if not size_checked:
            check_model_size(self.limits, model_subgraphs(model))
        analysis = ModelAnalysis(model, version)
        if self.extensions:
            analysis.extensions = self.extensions.for_model(model)
        analysis.validate()
        if lookup is not None and lookup.outline is not None and self.analyses is not None:
            self.analyses.put(lookup, analysis.keep(self._config()))
        return analysis

    def _config(self) -> tuple:
        """What the kept check results depend on besides the model (``analysis_cache``)."""
        return (self.profile, self.limits, self.support, self.backend, self.extensions)

    def explainSupportedOperations(
        self, model: Model, *, version: HalVersion = HalVersion.V1_3, size_checked: bool = False
    ) -> tuple[list[bool], dict[int, str]]:
        """getSupportedOperations_1_3 plus a reason for every unsupported main operation."""
        analysis = self.analyze(model, version, size_checked=size_checked)
        return self._explain(analysis)

    def getSupportedOperations_1_3(
        self, model: Model, *, version: HalVersion = HalVersion.V1_3, size_checked: bool = False
    ) -> list[bool]:
        return self.explainSupportedOperations(
            model, version=version, size_checked=size_checked
        )[0]

    def _explain(
        self, analysis: ModelAnalysis, *, sizes_checked: bool = False
    ) -> tuple[list[bool], dict[int, str]]:
        kept = analysis.kept
        if kept is not None and kept.support is not None:
            return list(kept.support[0]), dict(kept.support[1])
        supported, reasons = self._decide(analysis, sizes_checked=sizes_checked)
        if kept is not None:
            kept.support = (list(supported), dict(reasons))
        return supported, reasons

    def _decide(
        self, analysis: ModelAnalysis, *, sizes_checked: bool = False
    ) -> tuple[list[bool], dict[int, str]]:
        def name_of(code: int) -> str:
            return self.support.operation_name(code, analysis.extensions)

        support = self.support
        if sizes_checked and support is self._own_support and not self.extensions:
            # check_declared_tensors passed under self.limits: the size rule would refuse
            # nothing, and the answer (kept for getSupportedOperations too) is the same
            support = self._sized_support
        if (
            isinstance(support, SupportPipeline)  # (not a replacement someone installed)
            and support.runs_every_checked_operation()
            and analysis.every_operation_checked()
        ):
            # what the walk below would find: every operation runs here, so every IF and
            # WHILE too (all the subgraphs they name run); no question asked
            supported, reasons = [True] * len(analysis.model.main.operations), {}
        else:
            supported, reasons = explain_support(
                analysis.model, support, analysis.query_for, name_of
            )
        limit = self.limits.max_nesting_depth
        depths = analysis.nesting_depths() if may_nest_deeper(analysis.model, limit) else ()
        for index, depth in enumerate(depths):
            if depth > limit and supported[index]:
                supported[index] = False
                op_type = analysis.model.main.operations[index].type
                reasons[index] = (
                    f"operation {index} ({operation_name(op_type)}): "
                    f"{nesting_reason(depth, self.limits)}"
                )
        for index in sorted(reasons):
            log.debug("%s: unsupported: %s", self.name, reasons[index])
        return supported, reasons

    def prepareModel_1_3(
        self,
        model: Model,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        deadline_ns: int | None = None,
        *,
        version: HalVersion = HalVersion.V1_3,
        modelCache: Any = (),
        dataCache: Any = (),
        token: bytes = b"",
        size_checked: bool = False,
    ) -> PreparedModel:
        """Validate, check support, then compile; raises a HalError on failure.

        Order as in the sample driver: arguments, model, support, then the
        deadline (a deadline already past is MISSED_DEADLINE_PERSISTENT).
        ``size_checked``: as ``analyze``.
        """
        validate_execution_preference(preference)
        validate_priority(priority)
        analysis = self.analyze(model, version, size_checked=size_checked)
        kept = analysis.kept
        if kept is None or not kept.limits_passed:
            # INVALID_ARGUMENT: the executor cannot run it
            if may_nest_deeper(model, self.limits.max_nesting_depth):
                check_nesting(model, self.limits, analysis.nesting_depths())
            check_declared_tensors(model, self.limits)  # RESOURCE_EXHAUSTED_PERSISTENT
            if kept is not None:
                kept.limits_passed = True
        supported, reasons = self._explain(analysis, sizes_checked=True)
        if not all(supported):
            first = min(reasons)
            raise InvalidArgument(
                f"cannot prepare a model with operations device {self.name!r} does not support "
                f"({len(reasons)} of {len(supported)} main operations; see "
                f"getSupportedOperations_1_3): {reasons[first]}"
            )
        if deadline_passed(deadline_ns):
            raise MissedDeadline(
                "prepareModel_1_3: the deadline had passed on arrival", transient=False
            )
        try:
            with compiling(analysis.extensions):  # custom kernels from op packages
                target = self.extensions.rewrite(model) if self.extensions else model
                proofs_key = (strict_shapes(), self.limits.max_tensor_bytes)
                compiled = compile_model(
                    target,
                    pool_views=analysis.pool_views(),
                    max_tensor_bytes=self.limits.max_tensor_bytes,
                    checked=analysis.checked(proofs_key) if target is model else None,
                    recipes=(
                        kept.recipes.setdefault(proofs_key, {})
                        if kept is not None and target is model
                        else None
                    ),
                )
                if kept is not None and target is model:
                    kept.proofs[proofs_key] = compiled.proofs
        except HalError:
            raise
        except MemoryError as exc:
            raise out_of_memory("prepareModel", exc) from exc
        except Exception as exc:  # a compiler bug must not kill the service thread
            log.exception("%s: compile_model failed", self.name)
            raise GeneralFailure(f"compilation failed: {type(exc).__name__}: {exc}") from exc
        prepared = PreparedModel(
            model,
            compiled,
            preference=preference,
            priority=priority,
            max_tensor_bytes=self.limits.max_tensor_bytes,
        )
        if modelCache or dataCache or token:  # never changes the outcome (driver/cache.py)
            self.cache.save(self, prepared, analysis.pool_views(), modelCache, dataCache, token)
        return prepared

    def prepareModelFromCache_1_3(
        self,
        deadline_ns: int | None = None,
        modelCache: Any = (),
        dataCache: Any = (),
        token: bytes = b"",
    ) -> PreparedModel:
        return self.cache.load(self, modelCache, dataCache, token, deadline_ns)

    def allocate(
        self,
        desc: Any = None,
        preparedModels: Any = (),
        inputRoles: Any = (),
        outputRoles: Any = (),
    ) -> Any:
        """IDevice::allocate: a nnhal.driver.buffers.ManagedBuffer (the service gives its token)."""
        from nnhal.driver.buffers import allocate

        from nnhal.types import BufferDesc

        return allocate(desc or BufferDesc(), preparedModels, inputRoles, outputRoles, self.limits)
