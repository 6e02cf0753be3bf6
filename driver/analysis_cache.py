"""What a device's checks established about a model, kept under a key covering the whole model.

Preparing a small model is mostly checking it: the structural validation
(``nnhal.validation``), every operation's registry checks, the support
decision, the nesting and declared-size limits and the executor's shape
proofs. Each is a pure function of the model, the device's fixed
configuration (profile, limits, the reference backend, no op packages) and
the registry's definitions, so an ``AnalysisCache`` keeps their results per
device and hands them back when an *identical* model comes again (a client
preparing the same model twice, each gRPC call decoding it anew).

A model is first looked up by its outline (``model_outline``: the client, the HAL
version, the flag, the sizes of its constant data and the counts of each
subgraph's operands, operations, inputs and outputs), which costs next to
nothing; its exact key below is made only when an entry of the same outline
exists, and an entry's own exact key only when a model of its outline comes
again. A model prepared once, the usual case, never pays for a key.

The exact key covers everything the checks read:

- the model's structure, pickled as tuples of its fields (``model_key``):
  every operand field, operation, input and output list, the relaxed-float
  flag, the HAL version the model was given as. Pickle writes ints, bools
  and floats with distinct codes, floats bit for bit, and the class of any
  other object (a numpy integer, an int subclass), so a model whose fields
  only *compare* equal to another's (``1.0 == 1``, ``-0.0 == 0.0``,
  ``np.int32(0) == 0``) has another key: the checks that look at types see
  it afresh. (``marshal`` would be as fast but writes any buffer, a numpy
  scalar included, as plain bytes.);
- the constant data: ``operandValues`` and inline pools, compared byte for
  byte against the entry's (no hash of megabytes of weights). Models with
  shared-memory or token pools (contents outside the message) or extension
  prefixes are never cached.

The device's configuration is part of the key: one cache per ``Device`` (a
device with op packages or another backend keeps none), and an entry serves
only while the device holds the very profile, limits, support pipeline and
backend objects it was made with. The registry must still answer every
operation code of the model as it did (the same definition, or still none;
else the entry is dropped), and the shape proofs and generated texts are
kept per ``NNHAL_STRICT_SHAPES`` setting and tensor limit.

Entries are per client: the service names the client of a model-carrying
call (``code_cache.set_owner``: the call's session or peer) and the key
starts with it, so
a client never gets another client's entry, nor learns from the time of a
preparation that someone else prepared the same model. In-process callers
(no service) share the owner None.

Only successes are kept: a model that fails a check is checked again next
time. Kernels, decoded constants and generated functions are never shared:
each prepared model binds its own. What an entry keeps of the code generator
is the text of each generated function and the names of its closure
variables (``Generator.recipes``): the text depends on the model alone, and
each name says which of the new prepared model's values it stands for.
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from nnhal.driver.executor.code_cache import owner
from nnhal.driver.ops import registry

from nnhal.types import InlineMemory, Model, OperandLifeTime, SymmPerChannelQuantParams

#: entries kept per device, least recently used dropped first
MAX_ENTRIES = 64
#: bytes of constant data the entries may hold in all (each entry keeps its model alive)
MAX_BYTES = 64 << 20
#: a model with more constant data is not kept (its checks are a small share of preparing it)
MAX_MODEL_BYTES = 8 << 20

_LIFETIME = OperandLifeTime
_CHANNEL_QUANT = SymmPerChannelQuantParams


def _keepable(model: Model) -> bool:
    """Not: pools other than inline bytes, extension prefixes, a flag that is not a bool."""
    if model.extensionNameToPrefix or type(model.operandValues) is not bytes:
        return False
    for pool in model.pools:
        if type(pool) is not InlineMemory or type(pool.data) is not bytes:
            return False
    return type(model.relaxComputationFloat32toFloat16) is bool


def model_outline(model: Model, version: int) -> tuple | None:
    """What an identical model has alike, cheaply: the client, the version, the flag,
    the constant data's sizes and each subgraph's counts; None when the model is never
    kept (``_keepable``)."""
    if not _keepable(model):
        return None
    return (
        owner(),
        int(version),
        model.relaxComputationFloat32toFloat16,
        tuple([len(data) for data in _data(model)]),
        tuple(
            [
                (len(s.operands), len(s.operations), len(s.inputIndexes), len(s.outputIndexes))
                for s in (model.main, *model.referenced)
            ]
        ),
    )


#: "not known yet" (a key or a client), where None is a value
_UNKNOWN: Any = object()


def model_key(model: Model, version: int, client: Any = _UNKNOWN) -> bytes | None:
    """The model's structure as bytes, or None when it cannot be keyed exactly.

    None for models with pools other than inline bytes, extension prefixes,
    or operand lifetimes and extra parameters of unexpected types. ``client``: whose
    entry it keys (default: the client being served, ``code_cache.owner``).
    """
    if not _keepable(model):
        return None
    parts: list[Any] = [owner() if client is _UNKNOWN else client, int(version)]
    parts.append(model.relaxComputationFloat32toFloat16)
    append = parts.append
    for subgraph in (model.main, *model.referenced):
        for operand in subgraph.operands:
            lifetime = operand.lifetime
            if type(lifetime) is not _LIFETIME:
                return None
            extra = operand.extraParams
            if extra is not None and type(extra) is not bytes:
                if type(extra) is not _CHANNEL_QUANT:
                    return None
                extra = (extra.scales, extra.channelDim)
            loc = operand.location
            append(
                (
                    operand.type,
                    operand.dimensions,
                    operand.numberOfConsumers,
                    operand.scale,
                    operand.zeroPoint,
                    lifetime._value_,
                    loc.poolIndex,
                    loc.offset,
                    loc.length,
                    extra,
                )
            )
        # the operation count separates one subgraph's operands from the next one's
        append(tuple([(op.type, op.inputs, op.outputs) for op in subgraph.operations]))
        append((subgraph.inputIndexes, subgraph.outputIndexes))
    try:
        return pickle.dumps(parts, 5)
    except Exception:  # noqa: BLE001  (a field that cannot be pickled: not keyed)
        return None


def _data(model: Model) -> tuple[bytes, ...]:
    return (model.operandValues, *(pool.data for pool in model.pools))


def _size(model: Model) -> int:
    """Bytes of constant data a kept model holds (the bound ``MAX_BYTES`` counts)."""
    return sum(len(data) for data in _data(model))


@dataclass
class Analysis:
    """One model's check results (filled in as the checks pass)."""

    model: Model
    #: the device's configuration objects the results were found with (``AnalysisCache``)
    config: tuple
    #: (subgraph, operation) -> the registry definition its checks passed with
    validated: dict
    #: (subgraph, operand) -> OperandInfo (constants': views of ``model``'s bytes)
    infos: dict
    #: (subgraph, operation) -> the support question asked (OpQuery)
    queries: dict
    #: (supported, reasons) of getSupportedOperations, once decided
    support: tuple[list[bool], dict[int, str]] | None = None
    #: the nesting and declared tensor size limits passed
    limits_passed: bool = False
    #: (strict shapes, max tensor bytes) -> {(subgraph, operation): proven output positions}
    proofs: dict = field(default_factory=dict)
    #: (strict shapes, max tensor bytes) -> the generated functions' recipes
    #: (``compile_model(recipes=...)``: texts and closure names, never the values)
    recipes: dict = field(default_factory=dict)
    #: operation code -> the registry's definition (None: none) when the checks ran
    definitions: dict = field(default_factory=dict)
    #: the client it was kept for (``code_cache.set_owner``; set by ``AnalysisCache.put``)
    owner: str | None = None
    #: the model's ``model_outline`` and, once a model of that outline came again, its
    #: ``model_key`` (set by ``AnalysisCache``)
    outline: tuple | None = None
    key: Any = _UNKNOWN
    version: int = 0

    def exact_key(self) -> bytes | None:
        """The kept model's ``model_key`` for the client it was kept for (made once)."""
        if self.key is _UNKNOWN:
            self.key = model_key(self.model, self.version, self.owner)
        return self.key

    def __post_init__(self) -> None:
        if not self.definitions:
            for subgraph in (self.model.main, *self.model.referenced):
                for operation in subgraph.operations:
                    code = operation.type
                    if code not in self.definitions:
                        self.definitions[code] = registry.lookup(code)

    def current(self) -> bool:
        """The registry still answers every operation code of the model as it did:
        the same definition, or still none (an operation it then did not support)."""
        lookup = registry.lookup
        return all(lookup(code) is found for code, found in self.definitions.items())


class CacheLookup:
    """One model's place in an ``AnalysisCache``: its outline at once, its exact key
    when an entry of the same outline asks for the comparison."""

    __slots__ = ("_key", "model", "outline", "version")

    def __init__(self, model: Model, version: int) -> None:
        self.model = model
        self.version = int(version)
        #: None: the model is never kept
        self.outline = model_outline(model, version)
        self._key: Any = _UNKNOWN

    def key(self) -> bytes | None:
        if self._key is _UNKNOWN:
            self._key = model_key(self.model, self.version)
        return self._key


class AnalysisCache:
    """Check results of models seen by one device (thread-safe; see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: serial number -> entry, least recently used first
        self._entries: OrderedDict[int, Analysis] = OrderedDict()
        #: outline -> the serial numbers of its entries
        self._outlines: dict[tuple, list[int]] = {}
        self._serial = 0
        self._bytes = 0

    def get(self, lookup: CacheLookup, model: Model, config: tuple) -> Analysis | None:
        """The entry of an identical model seen before by a device configured with the
        very same ``config`` objects (profile, limits, support pipeline...), else None."""
        if lookup.outline is None:
            return None
        with self._lock:
            numbers = list(self._outlines.get(lookup.outline, ()))
        if not numbers:
            return None  # no entry of this outline: no key made at all
        key = lookup.key()
        if key is None:
            return None
        for number in numbers:
            with self._lock:
                entry = self._entries.get(number)
            if entry is None or entry.exact_key() != key:
                continue
            if len(entry.config) != len(config) or any(
                mine is not theirs for mine, theirs in zip(entry.config, config)
            ):
                continue
            if _data(entry.model) != _data(model) or not entry.current():
                continue
            with self._lock:
                if number in self._entries:
                    self._entries.move_to_end(number)
            return entry
        return None

    def put(self, lookup: CacheLookup, entry: Analysis) -> None:
        """Keep ``entry`` (made from ``lookup.model``); it replaces an entry of the same
        exact key, when the lookup made that key."""
        if lookup.outline is None:
            return
        size = _size(entry.model)
        if size > MAX_MODEL_BYTES:
            return
        entry.owner = owner()
        entry.outline = lookup.outline
        entry.version = lookup.version
        # _UNKNOWN unless a lookup of the same outline made it (an entry whose model turns
        # out to have no exact key, unusual field types, is never found and ages out)
        entry.key = lookup._key
        with self._lock:
            if entry.key is not _UNKNOWN:
                numbers = self._outlines.get(lookup.outline, ())
                for number in [n for n in numbers if self._entries[n].key == entry.key]:
                    self._remove(number)  # (may drop the outline's list: fetched again below)
            self._serial += 1
            self._entries[self._serial] = entry
            self._outlines.setdefault(lookup.outline, []).append(self._serial)
            self._bytes += size
            while len(self._entries) > MAX_ENTRIES or self._bytes > MAX_BYTES:
                self._remove(next(iter(self._entries)))

    def _remove(self, number: int) -> None:
        """Drop entry ``number`` (the lock held)."""
        entry = self._entries.pop(number)
        self._bytes -= _size(entry.model)
        numbers = self._outlines[entry.outline]
        numbers.remove(number)
        if not numbers:
            del self._outlines[entry.outline]

    def drop_owner(self, gone: str) -> int:
        """Forget the entries kept for client ``gone`` (its session ended); how many."""
        with self._lock:
            numbers = [n for n, entry in self._entries.items() if entry.owner == gone]
            for number in numbers:
                self._remove(number)
        return len(numbers)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._outlines.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)
