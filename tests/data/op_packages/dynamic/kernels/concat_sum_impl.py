"""ConcatSum: the elementwise sum of any number of inputs (Ascend dynamic input)."""

import json

import numpy as np
from nnhal.driver.op_packages.runtime import FREE, GLACIAL, implementation


def op_select_format(xs, y, attrs, kernel_name="concat_sum"):
    return json.dumps(
        {
            "input0": {"name": "xs", "dtype": "float,int32", "format": "ND,ND"},
            "output0": {"name": "y", "dtype": "float,int32", "format": "ND,ND"},
        }
    )


def two_inputs_free(query):
    """Free for exactly two inputs, otherwise more expensive than the generic kernel."""
    return FREE if len(query.inputs) == 2 else GLACIAL + 1


@implementation(cost=two_inputs_free)
def concat_sum_pair(a, b):
    return a + b


@implementation(cost=GLACIAL)
def concat_sum(*xs):
    return np.sum(np.stack(xs), axis=0)
