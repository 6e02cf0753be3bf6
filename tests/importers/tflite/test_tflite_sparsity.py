"""Sparse constant weights behind DENSIFY: densified and folded as the NNAPI delegate does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from nnhal.importers.tflite import TFLiteFormatError, import_tflite, read_model
from nnhal.importers.tflite.sparsity import DENSE, SPARSE_CSR, DimMetadata, Sparsity, densify
from tflite_cases import model_path

from nnhal.types import OperationType


def _sparse_inputs(name):
    model = read_model(model_path(name))
    sg = model.subgraphs[0]
    return sg, [sg.tensors[op.inputs[0]] for op in sg.operators if op.name == "DENSIFY"]


@pytest.mark.parametrize(
    ("name", "folded"),
    [
        ("sparse_cnn", {"DENSIFY": 4, "DEQUANTIZE": 5}),  # float16: DENSIFY then DEQUANTIZE
        ("sparse_block_fc", {"DENSIFY": 2}),  # float32 in 1x4 blocks
    ],
)
def test_densify_nodes_fold_into_dense_constants(name, folded):
    result = import_tflite(model_path(name))
    assert result.complete and result.folded_counts() == folded
    assert result.min_api == 30  # DENSIFY is folded from NNAPI 1.3
    ops = result.partitions[0].model.main.operations
    assert len(ops) == result.nodes - sum(folded.values())
    assert OperationType.DEQUANTIZE not in {op.type for op in ops}


def test_block_sparsity_is_read_from_the_file():
    _, tensors = _sparse_inputs("sparse_block_fc")
    sp = tensors[0].sparsity
    assert sp.block_map == (1,) and len(sp.traversal_order) == 3
    assert [d.format for d in sp.dims] == [DENSE, SPARSE_CSR, DENSE]
    dense = densify(tensors[0].data, tensors[0].shape, sp, "w")
    # every stored block of 4 lands on 4 consecutive inputs of one output row
    assert dense.shape == tuple(tensors[0].shape)
    assert np.count_nonzero(dense) <= tensors[0].data.size
    assert np.allclose(np.sort(dense[dense != 0]), np.sort(tensors[0].data[tensors[0].data != 0]))


def test_densify_by_hand_csr():
    """A 3x4 matrix stored CSR: rows dense, columns sparse."""
    sp = Sparsity(
        (0, 1),
        (),
        [
            DimMetadata(DENSE, 3),
            DimMetadata(SPARSE_CSR, 0, np.array([0, 2, 2, 3]), np.array([1, 3, 0])),
        ],
    )
    got = densify(np.array([5.0, 6.0, 7.0], np.float32), (3, 4), sp, "t")
    want = np.array([[0, 5, 0, 6], [0, 0, 0, 0], [7, 0, 0, 0]], np.float32)
    assert np.array_equal(got, want)
    # the same matrix walked column first
    sp_t = Sparsity(
        (1, 0),
        (),
        [
            DimMetadata(DENSE, 4),
            DimMetadata(SPARSE_CSR, 0, np.array([0, 1, 2, 2, 3]), np.array([2, 0, 0])),
        ],
    )
    assert np.array_equal(densify(np.array([7.0, 5.0, 6.0], np.float32), (3, 4), sp_t, "t"), want)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"traversal_order": (0, 0, 2)}, "not a permutation"),
        ({"traversal_order": (2, 0, 1)}, "block dimension before"),
        ({"block_map": (5,)}, "outside rank"),
        ({"dims": []}, "levels of dimension metadata"),
    ],
)
def test_bad_sparsity_metadata_names_the_tensor(change, message):
    _, tensors = _sparse_inputs("sparse_block_fc")
    t = tensors[0]
    bad = dataclasses.replace(t.sparsity, **change)
    with pytest.raises(TFLiteFormatError, match=message) as e:
        densify(t.data, t.shape, bad, t.describe(0))
    assert "tensor" in str(e.value) and "\n" not in str(e.value)


def test_bad_segments_and_value_count():
    sp = Sparsity(
        (0, 1),
        (),
        [DimMetadata(DENSE, 2), DimMetadata(SPARSE_CSR, 0, np.array([0, 2, 9]), np.array([0, 1]))],
    )
    with pytest.raises(TFLiteFormatError, match="segments"):
        densify(np.ones(2, np.float32), (2, 2), sp, "w")
    sp = Sparsity(
        (0, 1),
        (),
        [DimMetadata(DENSE, 2), DimMetadata(SPARSE_CSR, 0, np.array([0, 1, 2]), np.array([0, 7]))],
    )
    with pytest.raises(TFLiteFormatError, match="outside the shape"):
        densify(np.ones(2, np.float32), (2, 2), sp, "w")
    sp = Sparsity((0, 1), (), [DimMetadata(DENSE, 2), DimMetadata(DENSE, 2)])
    with pytest.raises(TFLiteFormatError, match="buffer holds 3"):
        densify(np.ones(3, np.float32), (2, 2), sp, "w")


def test_densify_of_a_non_constant_is_not_delegated():
    """A DENSIFY whose input is not a constant sparse tensor stays a TFLite node, with why."""
    from nnhal.importers.tflite.convert import convert

    model = read_model(model_path("sparse_block_fc"))
    sg = model.subgraphs[0]
    densify_op = next(op for op in sg.operators if op.name == "DENSIFY")
    src = sg.tensors[densify_op.inputs[0]]
    sg.tensors[densify_op.inputs[0]] = dataclasses.replace(src, data=None, sparsity=None)
    result = convert(model)
    skipped = [s for s in result.skipped if s.op == "DENSIFY"]
    assert len(skipped) == 1 and "not a constant tensor" in skipped[0].reason
