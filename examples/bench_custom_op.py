"""The cost of a custom operation: ScaleShift (op package) vs MUL + ADD (built-in) in a WHILE.

    python3 examples/bench_custom_op.py [N]

Prints µs per iteration of each and the ratio, measured in the same run (median of 5
interleaved rounds), after checking both give the same result. The kernel runs inline
(``op_package_isolation = "inline"``): this is its own cost; ``bench/oppkg_isolation.py``
measures what running it in a worker process adds.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import while_models as wm
from nnhal.driver.device import Device
from nnhal.driver.op_packages.discovery import load_path
from nnhal.driver.profile import parse_profile

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op


def builtin_model():
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    _, c_i, c_n = (
        cond.input(T.TENSOR_FLOAT32, [1, 4]),
        cond.input(T.TENSOR_INT32, [1]),
        cond.input(T.TENSOR_INT32, [1]),
    )
    c_out = cond.output(T.TENSOR_BOOL8, [1])
    cond.operation(Op.LESS, [c_i, c_n], [c_out])
    b_x, b_i, _ = (
        body.input(T.TENSOR_FLOAT32, [1, 4]),
        body.input(T.TENSOR_INT32, [1]),
        body.input(T.TENSOR_INT32, [1]),
    )
    b_x_out, b_i_out = body.output(T.TENSOR_FLOAT32, [1, 4]), body.output(T.TENSOR_INT32, [1])
    act = body.constant(T.INT32, 0)
    t = body.temporary(T.TENSOR_FLOAT32, [1, 4])
    body.operation(Op.MUL, [b_x, body.constant(T.TENSOR_FLOAT32, [[0.5] * 4]), act], [t])
    body.operation(Op.ADD, [t, body.constant(T.TENSOR_FLOAT32, [[1.0] * 4]), act], [b_x_out])
    body.operation(Op.ADD, [b_i, body.constant(T.TENSOR_INT32, [1]), act], [b_i_out])
    g = mb.main
    x0, n = g.input(T.TENSOR_FLOAT32, [1, 4]), g.input(T.TENSOR_INT32, [1])
    x, i = g.output(T.TENSOR_FLOAT32, [1, 4]), g.output(T.TENSOR_INT32, [1])
    g.operation(
        Op.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), x0, g.constant(T.TENSOR_INT32, [0]), n],
        [x, i],
    )
    return mb.build()


dev = Device(
    parse_profile({"name": "default", "op_package_isolation": "inline"}),
    op_packages=load_path(Path(__file__).resolve().parent / "snpe_json" / "scale_shift.json"),
)
custom = dev.prepareModel_1_3(wm.model("snpe_json")).compiled
base = dev.prepareModel_1_3(builtin_model()).compiled
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
ins = [wm.X0, np.array([N], np.int32)]
res = {"custom": [], "builtin": []}
for _ in range(5):
    for name, m in (("builtin", base), ("custom", custom)):
        t0 = time.perf_counter()
        out = m.run(ins)
        res[name].append(time.perf_counter() - t0)
np.testing.assert_allclose(custom.run(ins)[0], base.run(ins)[0], rtol=1e-6)
b, c = np.median(res["builtin"]), np.median(res["custom"])
print(
    f"WHILE x{N}: built-in MUL+ADD {b / N * 1e6:.2f} us/iter, custom ScaleShift {c / N * 1e6:.2f} us/iter, ratio custom/built-in {c / b:.2f}"
)
