"""The quantized CNNs operator by operator: each NNAPI operation the importer made, run alone in
nnhal's executor on the tensors LiteRT computed for its inputs, is within one quantization step
of LiteRT's output (stored in NAME_tensors.npz, see make_models.py's ``tensors``).

The whole-model comparison alone says little here: these untrained deep CNNs end in a softmax
that gives every class the same value, and one-step rounding differences add up over 71 layers
(LiteRT's own XNNPACK and reference kernels differ by several steps at the logits)."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.importers.tflite import import_tflite
from tflite_cases import DATA, model_path


@pytest.mark.parametrize("name", ["cnn_int8", "cnn_uint8_deep"])
def test_every_operation_within_one_step_of_litert(name):
    from nnhal.driver.executor import compile_model
    from nnhal.runtime.slicing import step_model

    result = import_tflite(model_path(name))
    assert result.complete
    (part,) = result.partitions
    tensors = result.tflite.subgraphs[0].tensors
    index = {t.name: k for k, t in enumerate(tensors)}
    assert len(index) == len(tensors)  # names identify the tensors
    stored = np.load(DATA / f"{name}_tensors.npz")

    def value(operand: int) -> np.ndarray:
        return stored[f"tensor_{index[part.operand_names[operand]]}"]

    operations = part.model.main.operations
    assert len(operations) == result.nodes == 71  # one NNAPI operation per TFLite node
    varied = 0
    for k in range(len(operations)):
        step = step_model(part.model, 0, [k], [])
        got = compile_model(step.model).run([value(i) for i in step.inputs])
        for operand, g in zip(step.outputs, got):
            want = value(operand)
            assert g.dtype == want.dtype, f"operation {k}"
            steps = np.abs(g.reshape(want.shape).astype(np.int64) - want.astype(np.int64))
            assert steps.max() <= 1, (
                f"{name} operation {k} (node {part.operation_nodes[k]}): "
                f"{steps.max()} quantization steps from LiteRT"
            )
            varied += len(np.unique(want)) > 1
    assert varied >= 60  # the stored tensors carry information, unlike the final softmax
