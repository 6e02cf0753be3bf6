"""(Re)write the example files the documentation's commands use.

    python examples/make_examples.py

- ``fib.json``: Fibonacci by a WHILE loop (the `nnhal bench control-flow`
  model): inputs state0 [1, 2] and n [1]; the body multiplies the state by a
  2x2 matrix with FULLY_CONNECTED and counts with ADD. The stored expected
  outputs are computed here with numpy, the way an app would loop by hand.

The other examples (``my-npu.toml``, ``faults.toml``, ``broken_ops.ini``) are
written by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from nnhal.tools.bench import STATE0, fibonacci_while_model, numpy_loop

from nnhal.types import OperandType
from nnhal.vectors import TestModel, save_vectors

HERE = Path(__file__).resolve().parent
N = 10


def fibonacci_vector() -> TestModel:
    model = fibonacci_while_model()
    state, i = numpy_loop(N)
    return TestModel(
        name="fib/while_n10",
        model=model,
        inputs=[STATE0.copy(), np.array([N], np.int32)],
        expected=[state.astype(np.float32), i.astype(np.int32)],
        expected_shapes=[(1, 2), (1,)],
        output_types=[OperandType.TENSOR_FLOAT32, OperandType.TENSOR_INT32],
        ignored=[False, False],
    )


def main() -> None:
    save_vectors(HERE / "fib.json", [fibonacci_vector()])


if __name__ == "__main__":
    main()
