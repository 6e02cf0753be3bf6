"""How many of the project's source files one getSupportedOperations_1_3 and one execute_1_3
call pass through on the server side: a measure of how easy a call is to follow.

    python bench/files_per_call.py           # from the repository root

A gRPC server of the default device runs in this process; every Python function called
in the server's threads during one warm call of each RPC is recorded
(``threading.setprofile``), and the checkout's files they live in are listed (generated
stubs left out).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

ROOT = Path(__file__).resolve().parents[1]


def add_model() -> Any:
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(T.TENSOR_FLOAT32, [2]), g.input(T.TENSOR_FLOAT32, [2])
    g.operation(Op.ADD, [a, b, g.constant(T.INT32, 0)], [g.output(T.TENSOR_FLOAT32, [2])])
    return mb.build()


def files_of(call: Callable[[], Any], seen: set[str], active: list[bool]) -> list[str]:
    seen.clear()
    active[0] = True
    call()
    active[0] = False
    return sorted(seen)


def main() -> None:
    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server

    seen: set[str] = set()
    active = [False]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if active[0] and event == "call" and threading.current_thread().name != "MainThread":
            path = frame.f_code.co_filename
            if path.startswith(str(ROOT)) and "_proto" not in path:
                seen.add(os.path.relpath(path, ROOT))

    threading.setprofile(profile)  # before the server starts its threads
    server, address = create_server(Device(), "127.0.0.1:0")
    device = connect(address, timeout=10.0, session=False)
    model, x = add_model(), np.ones(2, np.float32)
    prepared = device.prepareModel_1_3(model)
    prepared.execute([x, x])  # warm: the registry loaded, the code generated
    calls = {
        "getSupportedOperations_1_3": lambda: device.getSupportedOperations_1_3(model),
        "execute_1_3": lambda: prepared.execute([x, x]),
    }
    for name, call in calls.items():
        files = files_of(call, seen, active)
        print(f"{name}: {len(files)} files")
        for path in files:
            print(f"    {path}")
    threading.setprofile(None)
    device.close()
    server.stop(None)


if __name__ == "__main__":
    main()
