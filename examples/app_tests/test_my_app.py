"""An app's tests against a mock accelerator, written with the nnhal pytest plugin.

`pip install nnhal` is all it takes: the plugin's fixtures are there. Run with
`pytest examples/app_tests`. The "app" here is ``run_add``: it prepares a model on
the accelerator and, when the accelerator fails an execution with a transient
status, retries once, the way an app falls back.
"""

import numpy as np
import pytest

from nnhal.builder import ModelBuilder
from nnhal.errors import HalError, ResourceExhausted
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op


def add_model():
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(T.TENSOR_FLOAT32, [2]), g.input(T.TENSOR_FLOAT32, [2])
    g.operation(Op.ADD, [a, b, g.constant(T.INT32, 0)], [g.output(T.TENSOR_FLOAT32, [2])])
    return mb.build()


def run_add(device, a, b):
    """The app: one retry when the accelerator is transiently out of resources."""
    prepared = device.prepareModel_1_3(add_model())
    try:
        return prepared.execute([a, b]).outputs[0]
    except ResourceExhausted:
        return prepared.execute([a, b]).outputs[0]


def test_the_app_adds(nnhal_client):
    out = run_add(nnhal_client, np.ones(2, np.float32), np.arange(2, dtype=np.float32))
    assert out.tolist() == [1.0, 2.0]


FAULTS = """
[[faults.rules]]
method = "execute*"
status = "RESOURCE_EXHAUSTED_TRANSIENT"
when = "nth"
n = 1
"""


@pytest.mark.nnhal(faults=FAULTS)
def test_the_app_retries_a_transient_failure(nnhal_client, nnhal_trace):
    out = run_add(nnhal_client, np.ones(2, np.float32), np.ones(2, np.float32))
    assert out.tolist() == [2.0, 2.0]
    assert nnhal_trace.statuses("execute*") == ["RESOURCE_EXHAUSTED_TRANSIENT", "NONE"]


@pytest.mark.nnhal(profiles=["nnapi-sample_quant"])
def test_a_quant_only_accelerator_refuses_the_float_model(nnhal_client):
    assert nnhal_client.getSupportedOperations_1_3(add_model()) == [False]
    with pytest.raises(HalError):
        nnhal_client.prepareModel_1_3(add_model())
