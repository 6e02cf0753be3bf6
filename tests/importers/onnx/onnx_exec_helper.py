"""Running an imported model on the nnhal driver, for the ONNX importer tests.

``execute(model, inputs)``: the driver prepares the model (full HAL
validation, as a client's prepareModel_1_3 would), then the executor runs
it with the default loop timeout; returns one array per main output.
"""

from __future__ import annotations

import numpy as np

_DEVICE = None


def device():
    global _DEVICE
    if _DEVICE is None:
        from nnhal.driver.device import Device

        _DEVICE = Device()
    return _DEVICE


def execute(model, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from nnhal.driver.executor import compile_model

    device().prepareModel_1_3(model)
    return compile_model(model).run(inputs)
