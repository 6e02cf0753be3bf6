"""Helpers shared by the recurrent families (rnn.py, svdf.py).

Activations: the reference RNN cells (``RNN::RNNStep``) apply the
``ActivationFunctor`` of the AOSP CPU executor, and SVDF applies TFLite's
``ApplyActivationToVector``. Both take the TFLite activation codes, a
superset of ``FusedActivationFunc``: 0 NONE, 1 RELU, 2 RELU1, 3 RELU6,
4 TANH, 5 SIGN_BIT (SVDF only), 6 SIGMOID. The NNAPI documentation names
only the FuseCode values, but models converted from TFLite pass TANH, and
the reference runs it, so it is accepted here too. (The reference RNN
functor has no RELU1 branch; here RELU1 is the documented clamp to [-1, 1].)

``jit_cells``: the compiled cells (``_jit_rnn``) of RNN and LSTM, loaded in
a background thread from the first execution that wants them.

Shapes follow the registry's convention (0 = unknown axis, None = unknown
rank); ``Dims`` collects the sizes several operands must agree on and fails
with a message naming both operands and axes.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from types import ModuleType

import numpy as np
from nnhal.driver.ops import kernels
from nnhal.driver.ops.registry import OpContext, Shape

f32 = np.float32

ACTIVATION_NAMES = {
    0: "NONE",
    1: "RELU",
    2: "RELU1",
    3: "RELU6",
    4: "TANH",
    5: "SIGN_BIT",
    6: "SIGMOID",
}
#: what the reference RNN cells run (ActivationFunctor) plus RELU1
RNN_ACTIVATIONS = frozenset({0, 1, 2, 3, 4, 6})
#: what TFLite's ApplyActivationToVector runs (SVDF)
SVDF_ACTIVATIONS = frozenset({0, 1, 2, 3, 4, 5, 6})


def _describe(allowed: frozenset) -> str:
    return ", ".join(f"{ACTIVATION_NAMES[a]} ({a})" for a in sorted(allowed))


def check_activation_code(ctx: OpContext, index: int, allowed: frozenset) -> None:
    """A constant activation must be one of ``allowed`` (silent when not constant)."""
    value = ctx.constant(index)
    if value is None:
        return
    code = int(value.reshape(-1)[0]) if value.size else None
    if code not in allowed:
        raise ctx.fail(
            f"input {index} (activation) has value {code}; supported: {_describe(allowed)}"
        )


def bound_activation_code(ctx: OpContext, index: int, allowed: frozenset) -> int:
    """The activation at bind time (a runtime value is checked here)."""
    code = int(ctx.scalar(index, 0))
    if code not in allowed:
        raise ctx.fail(
            f"input {index} (activation) has value {code}; supported: {_describe(allowed)}"
        )
    return code


def _sigmoid(x: np.ndarray) -> None:
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += 1
    np.reciprocal(x, out=x)


def _sign_bit(x: np.ndarray) -> None:
    x[...] = np.signbit(x)


def activation_inplace(code: int) -> Callable[[np.ndarray], None] | None:
    """An in-place float activation for ``code`` (None for NONE: nothing to do)."""
    if code == 0:
        return None
    if code == 1:
        return lambda x: np.maximum(x, 0, out=x)
    if code == 2:
        return lambda x: np.clip(x, -1, 1, out=x)
    if code == 3:
        return lambda x: np.clip(x, 0, 6, out=x)
    if code == 4:
        return lambda x: np.tanh(x, out=x)
    if code == 5:
        return _sign_bit
    return _sigmoid


# ---------------------------------------------------------------------------
# Compiled cells
# ---------------------------------------------------------------------------

_cells: ModuleType | None = None  # set once loaded and compiled
_started = False
_waited = False  # the first execution waited for the loading: later ones never wait
_ready = threading.Event()
_cells_lock = threading.Lock()
#: how long the first execution that needs the compiled cells waits for them (s)
FIRST_WAIT = 0.5


def warm_cells() -> None:
    """Load (or compile) the compiled cells in a background thread, once per process."""
    global _started
    with _cells_lock:
        if _started:
            return
        _started = True
    threading.Thread(target=_load_cells, name="nnhal-compiled-cells", daemon=True).start()


def _load_cells() -> None:
    global _cells
    try:
        # importing compiles the kernels (or loads them from numba's cache)
        _cells = importlib.import_module("nnhal.driver.ops._jit_rnn")
    except Exception as exc:  # noqa: BLE001 (any import or compile failure: numpy instead)
        cells_failed(exc)
    finally:
        _ready.set()


def jit_cells(wait: float | None = None) -> ModuleType | None:
    """``_jit_rnn`` compiled, or None: the caller runs numpy this time.

    Kernels decide with ``kernels.jit_wanted()`` when they are bound (so that
    preparing a model never imports numba) and call this at execution. The
    first call starts ``warm_cells`` and waits up to ``FIRST_WAIT`` (or
    ``wait``) seconds: loading from numba's disk cache takes about 0.3 s, but
    compiling on a machine whose cache is cold takes seconds (about 6 s for
    the four kernels), which would count against the execution's deadline and a
    WHILE loop's timeout (2 s by default). Past the wait the numpy kernels run
    until the thread is done, and no later call waits.
    """
    global _waited
    if _cells is not None or (_waited and wait is None):
        return _cells
    warm_cells()
    _ready.wait(FIRST_WAIT if wait is None else wait)
    _waited = True
    return _cells


def _after_fork_in_child() -> None:
    # a fork during the loading leaves the child without the loading thread: start over
    global _started, _waited, _ready, _cells_lock
    if _cells is None and _started and not _ready.is_set():
        _started, _waited = False, False
        _ready, _cells_lock = threading.Event(), threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_after_fork_in_child)


def ran_cell(kernel: Callable[..., object], *args: object) -> bool:
    """Run a compiled cell on ``args`` (its outputs among them); False when numpy must
    run the call instead: argument types it was not compiled for (TypeError), or a
    failure of numba (then ``cells_failed``: numpy from now on)."""
    try:
        kernel(*args)
    except TypeError:
        return False
    except MemoryError:
        raise  # the execution's RESOURCE_EXHAUSTED, not a failure of numba
    except Exception as exc:  # noqa: BLE001 (any failure of the compiled code)
        cells_failed(exc)
        return False
    return True


def cells_failed(exc: BaseException) -> None:
    """A compiled cell failed to import or compile: numpy runs the cells from now
    on, and ``kernels`` binds no compiled kernel any more."""
    global _cells
    _cells = None
    kernels.failed(exc)


# ---------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------


def axis(shape: Shape, index: int) -> int:
    """Size of one axis, 0 when unknown (or the rank is unknown / too small)."""
    if shape is None or index >= len(shape):
        return 0
    return shape[index]


def fully_known(*shapes: Shape) -> bool:
    return all(s is not None and all(s) for s in shapes)


class Dims:
    """Sizes that several operands must agree on, with the first source of each."""

    def __init__(self, ctx: OpContext) -> None:
        self.ctx = ctx
        self.values: dict[str, tuple[int, str]] = {}

    def take(self, name: str, index: int, ax: int, shape: Shape | None = None) -> None:
        """Input ``index``'s axis ``ax`` is the size ``name`` (checked against earlier ones)."""
        info = self.ctx.inputs[index]
        if info.omitted:
            return
        dims = info.dimensions if shape is None else shape
        size = axis(dims, ax)
        if not size:
            return
        where = f"input {index} axis {ax}"
        seen = self.values.get(name)
        if seen is None:
            self.values[name] = (size, where)
        elif seen[0] != size:
            raise self.ctx.fail(
                f"{where} is {size} but {seen[1]} is {seen[0]}; both are the {name} and must match"
            )

    def set(self, name: str, size: int, where: str) -> None:
        """A size derived from other operands (e.g. num_filters / rank)."""
        if not size:
            return
        seen = self.values.get(name)
        if seen is None:
            self.values[name] = (size, where)
        elif seen[0] != size:
            raise self.ctx.fail(
                f"{seen[1]} is {seen[0]} but {where} gives {size}; both are the {name} "
                "and must match"
            )

    def __getitem__(self, name: str) -> int:
        seen = self.values.get(name)
        return 0 if seen is None else seen[0]
