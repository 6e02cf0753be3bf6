"""A client process that tests kill (tests/test_sessions.py): it takes driver objects,
starts an endless execution and a burst, prints the ids as one JSON line, and waits.

Usage: python tests/driver/dying_client.py ADDRESS LEASE_S
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time

import numpy as np
from nnhal.cts.families.control_flow import infinite_loop

from nnhal import control
from nnhal._client_io import IoPlan
from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.errors import HalError
from nnhal.types import BufferDesc, BufferRole, OperandType, OperationType

F32 = OperandType.TENSOR_FLOAT32


def add_model():
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [2]), g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(OperationType.ADD, [a, b, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


def main() -> None:
    address, lease_s = sys.argv[1], float(sys.argv[2])
    device = connect(address, lease_s=lease_s)
    model = add_model()
    add = device.prepareModel_1_3(model)
    buffer = device.allocate(BufferDesc(dimensions=(2,)), [add], [BufferRole(0, 0, 1.0)])
    fence = control.create_fence(device)
    x = np.ones(2, np.float32)
    plan = IoPlan(model, [x, x], None, "inline")
    fenced = add.executeFenced(plan.request, waitFor=[fence])  # waits for our fence forever
    burst = add.burst()
    burst.execute([x, x])  # the stream is open and stays so

    loop_model, loop_inputs = infinite_loop()
    loop = device.prepareModel_1_3(loop_model)

    def endless() -> None:
        # in shared memory: the server maps the client's segment while it runs
        loop.execute(loop_inputs, loop_timeout_ns=15 * 10**9, memory="shared")

    def endless_burst() -> None:  # bursts have the default 2 s loop timeout: again and again
        with loop.burst() as stream:
            while True:
                with contextlib.suppress(HalError):  # MISSED_DEADLINE_*, expected
                    stream.execute(loop_inputs)

    threading.Thread(target=endless, daemon=True).start()
    threading.Thread(target=endless_burst, daemon=True).start()
    time.sleep(1.0)  # the execution has reached the server
    ids = {
        "session": device.session.id,
        "prepared": [add.id, loop.id],
        "buffer": buffer.id,
        "fence": fence,
        "callback": fenced.callback.id,
        "fenced_sync_fence": fenced.syncFence,
    }
    print(json.dumps(ids), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
