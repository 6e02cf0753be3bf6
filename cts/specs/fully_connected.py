"""Specs: FULLY_CONNECTED (batches, bias, activations, quantized with an int32 bias)."""

from nnhal.cts.dsl import F32, FLOAT_AND_QUANT8, I32, spec


@spec("fully_connected", variations=FLOAT_AND_QUANT8, quant=(0.5, 128))
def fully_connected(s):
    """input [2, 3] x weights [4, 3]^T + bias [4] -> [2, 4]."""
    x = s.input("input", F32, [2, 3])
    w = s.const("weights", F32, [1, 0, -1, 2, 1, 0, 0, 0, 1, -1, -1, -1], [4, 3], quant=(1.0, 128))
    b = s.const("bias", F32, [0.5, -1, 0, 2], [4], quant=(I32, 0.5, 0))
    out = s.output("out", F32, [2, 4])
    s.op("FULLY_CONNECTED", [x, w, b, s.int32(0)], [out])
    s.example(
        {x: [1, 2, 3, 0.5, -1, 4]},
        {out: [-1.5, 3, 3, -4, -3, -1, 4, -1.5]},
    )


@spec("fully_connected_relu_batch1", variations=FLOAT_AND_QUANT8, quant=(0.5, 128))
def fully_connected_relu_batch1(s):
    """One batch, RELU: negative sums clamp to zero."""
    x = s.input("input", F32, [1, 2])
    w = s.const("weights", F32, [1, 1, 1, -1], [2, 2], quant=(1.0, 128))
    b = s.const("bias", F32, [0, 0], [2], quant=(I32, 0.5, 0))
    out = s.output("out", F32, [1, 2])
    s.op("FULLY_CONNECTED", [x, w, b, s.int32(1)], [out])
    s.example({x: [1, 3]}, {out: [4, 0]})
    s.example({x: [-2, 1]}, {out: [0, 0]})
