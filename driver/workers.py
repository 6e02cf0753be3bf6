"""Executions on every core: a pool of worker processes that run compiled models.

The server is one Python process, and a kernel's Python work holds its
interpreter lock, so executions of different clients queue behind each other
there. With ``create_server(..., execution_workers=N)`` (``nnhal serve
--workers N|auto``) the compute part of every execution (``CompiledModel.run``)
goes to one of N worker processes instead; everything else stays in the
server process, so sessions, object ids, faults, traces, quotas and the
request checks are those of one server. The cut:

- server process: the gRPC call, decoding, validation, reading the inputs
  from the request pools, then ``ExecutionPool.run`` with the input arrays; it
  writes the outputs the worker returns into the request pools;
- worker process (``_worker_main``: ``python -m nnhal.driver.workers``, a fresh
  interpreter, never forked from a process holding gRPC threads): compiles each model the first
  time it is asked to run it (``compile_model``, at most ``MODELS_PER_WORKER``
  kept, least recently used dropped), runs it with the deadline and loop
  timeout of the execution, and answers with the outputs or the HalError.

A call waits for an idle worker (the pool is the execution concurrency), so
N workers run N executions at once on N cores. Inputs and outputs cross the
process boundary through a pipe (one copy each way; a 600 KB MobileNet input
costs well under a millisecond, next to tens of milliseconds of compute).

Limits, as documented in docs/serving.md: models using op-package operations
run in the server process (their kernels already run in supervised worker
processes of their own); an execution in a worker is cancelled at its next
check only by its deadline, not by its call or session ending (it runs to the
end, its result discarded); a worker that dies fails its execution with
GENERAL_FAILURE and is replaced. ``MODELS_PER_WORKER`` compiled models per
worker: a model evicted is compiled again when next used.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from nnhal.errors import GeneralFailure, HalError
from nnhal.types import Model

log = logging.getLogger("nnhal.driver.workers")

#: compiled models a worker keeps (least recently used dropped)
MODELS_PER_WORKER = 32


def worker_count(value: int | str) -> int:
    """``--workers``: ``auto`` (one per core), 0 (none: executions in the server), or N."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return os.cpu_count() or 1
    count = int(value)
    if count < 0:
        raise ValueError(f"workers must be 'auto' or an integer >= 0, got {value!r}")
    return count


def compile_for_worker(key: int, model: Model, max_tensor_bytes: int | None) -> Any:
    """The worker's compiled model for the server's prepared model ``key``.

    The worker is not told the client, so its compiled code is kept per prepared
    model (``code_cache.set_owner``): no client's first execution here is faster for
    another client's model of the same graph having run here before."""
    from nnhal.driver.executor import code_cache, compile_model
    from nnhal.driver.executor.operands import map_model_pools

    owner = code_cache.set_owner(f"prepared:{key}")
    try:
        return compile_model(
            model, pool_views=map_model_pools(model), max_tensor_bytes=max_tensor_bytes
        )
    finally:
        code_cache.reset_owner(owner)


def _worker_main(conn: Any, threads: int) -> None:
    """A worker process: compile and run models as the server asks, until the pipe closes."""
    from nnhal.driver.ops.threads import set_threads

    set_threads(threads)
    models: OrderedDict[int, Any] = OrderedDict()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        key, model, max_tensor_bytes, inputs, deadline_ns, loop_timeout_ns = message
        try:
            compiled = models.get(key)
            if compiled is None:
                if model is None:
                    raise GeneralFailure("execution worker: a model it does not hold")
                compiled = compile_for_worker(key, model, max_tensor_bytes)
                models[key] = compiled
                if len(models) > MODELS_PER_WORKER:
                    models.popitem(last=False)
            else:
                models.move_to_end(key)
            outputs = compiled.run(
                inputs, deadline_ns=deadline_ns, loop_timeout_ns=loop_timeout_ns
            )
            reply: tuple[bool, Any] = (True, [np.asarray(o) for o in outputs])
        except HalError as exc:
            reply = (False, exc)
        except Exception as exc:  # noqa: BLE001 - a bug: reported, the worker keeps serving
            reply = (False, GeneralFailure(f"execution failed: {type(exc).__name__}: {exc}"))
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - e.g. an exception that does not pickle
            conn.send((False, GeneralFailure(f"execution worker: {type(exc).__name__}: {exc}")))


class _Worker:
    """One worker process (``python -m nnhal.driver.workers FD THREADS``) and its pipe."""

    def __init__(self, threads: int) -> None:
        parent, child = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nnhal.driver.workers", str(child.fileno()), str(threads)],
            pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        child.close()
        self.conn = Connection(parent.detach())
        self.known: OrderedDict[int, None] = OrderedDict()  # models it holds (as it keeps them)

    def run(
        self, key: int, model: Model, limit: int | None, inputs: list, deadline_ns: Any, loop_ns: int
    ) -> Any:
        send = None if key in self.known else model
        self.conn.send((key, send, limit, inputs, deadline_ns, loop_ns))
        ok, value = self.conn.recv()
        self.known[key] = None
        self.known.move_to_end(key)
        if len(self.known) > MODELS_PER_WORKER:
            self.known.popitem(last=False)
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        try:
            self.conn.close()  # the worker ends at the end of its pipe
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


class ExecutionPool:
    """``count`` worker processes; ``run`` executes a compiled model in an idle one."""

    def __init__(self, count: int, *, threads: int = 1) -> None:
        if count < 1:
            raise ValueError("an execution pool needs at least one worker")
        self.count = count
        self._threads = threads
        self._workers = [self._start() for _ in range(count)]
        # idle workers, the last used on top: a lone client keeps one warm worker (a
        # worker idle for a while is slow to wake on a busy machine)
        self._idle: list[_Worker] = list(self._workers)
        self._ready = threading.Condition()
        self._keys = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False

    def _start(self) -> _Worker:
        return _Worker(self._threads)

    def new_key(self) -> int:
        with self._lock:
            return next(self._keys)

    def run(
        self,
        key: int,
        model: Model,
        inputs: Sequence[np.ndarray | None],
        *,
        deadline_ns: int | None,
        loop_timeout_ns: int,
        max_tensor_bytes: int | None = None,
    ) -> list[np.ndarray]:
        """Run ``model`` (compiled in the worker the first time, named by ``key``)."""
        if self._closed:
            raise GeneralFailure("the execution workers have stopped (the server is stopping)")
        with self._ready:
            while not self._idle:
                self._ready.wait()
            worker = self._idle.pop()
        try:
            return worker.run(
                key, model, max_tensor_bytes, list(inputs), deadline_ns, loop_timeout_ns
            )
        except (EOFError, OSError, BrokenPipeError) as exc:
            log.error("execution worker %s died: %s; replacing it", worker.process.pid, exc)
            worker.stop()
            with self._lock:
                self._workers.remove(worker)
                worker = self._start()
                self._workers.append(worker)
            raise GeneralFailure(f"the execution worker running this model died ({exc})") from exc
        finally:
            with self._ready:
                self._idle.append(worker)
                self._ready.notify()

    def close(self) -> None:
        self._closed = True
        for worker in list(self._workers):
            worker.stop()


class PooledModel:
    """Stands in for a prepared model's CompiledModel: ``run`` goes to the pool; anything
    else (``source()``, ``n_inputs``...) is the compiled model in the server process."""

    def __init__(
        self, pool: ExecutionPool, model: Model, compiled: Any, max_tensor_bytes: int | None
    ) -> None:
        self._pool = pool
        self._model = model
        self._compiled = compiled
        self._limit = max_tensor_bytes
        self._key = pool.new_key()

    def run(
        self,
        inputs: Sequence[np.ndarray | None],
        *,
        deadline_ns: int | None = None,
        loop_timeout_ns: int,
        cancel: Any = None,
        trace: Any = None,
    ) -> list[np.ndarray]:
        if trace is not None:  # a traced run prints as it goes: in this process
            return self._compiled.run(
                inputs, deadline_ns=deadline_ns, loop_timeout_ns=loop_timeout_ns, trace=trace
            )
        if cancel is not None and cancel.cancelled:
            raise GeneralFailure(f"execution cancelled: {cancel.reason}")
        return self._pool.run(
            self._key,
            self._model,
            inputs,
            deadline_ns=deadline_ns,
            loop_timeout_ns=loop_timeout_ns,
            max_tensor_bytes=self._limit,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compiled, name)


def pooled(pool: ExecutionPool | None, prepared: Any) -> Any:
    """Make ``prepared`` (a PreparedModel) run in ``pool`` (None: unchanged). A model with
    op-package operations stays in the server process (its kernels have workers already)."""
    if pool is None or isinstance(prepared.compiled, PooledModel):
        return prepared
    model = prepared.model
    if getattr(model, "extensionNameToPrefix", ()):
        return prepared
    prepared.compiled = PooledModel(pool, model, prepared.compiled, prepared.max_tensor_bytes)
    return prepared


if __name__ == "__main__":  # a worker: python -m nnhal.driver.workers FD THREADS
    _worker_main(Connection(int(sys.argv[1])), int(sys.argv[2]))
