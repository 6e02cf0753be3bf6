"""Sparse constant tensors (schema ``SparsityParameters``) read and densified.

A sparse tensor in a ``.tflite`` file stores only some values; its metadata says
how to put them back (the TACO-like format of ``schema.fbs``):

- ``traversal_order``: the order in which the dimensions are walked. The first
  *n* entries permute the tensor's own *n* dimensions; the next *k* are the block
  dimensions, one per entry of ``block_map`` (which own dimension each block
  dimension splits: own index = outer index * block size + block index);
- ``dim_metadata``: one entry per level of that walk: DENSE (every index
  ``0 .. dense_size-1``) or SPARSE_CSR (``array_segments`` / ``array_indices``:
  the children of the parent at position *p* are ``array_indices[s[p]:s[p+1]]``);
- the buffer holds the values in that walk's order, one per leaf.

``read_sparsity`` copies the metadata out of the flatbuffer (checking every
vector's extent), ``densify`` rebuilds the dense array the way TFLite's
``FormatConverter::SparseToDense`` does (what the NNAPI delegate runs on the
constant input of a DENSIFY node before handing the weights to NNAPI), walking
level by level with numpy rather than recursing per element. Malformed metadata
raises ``TFLiteFormatError`` naming the tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from nnhal.importers.tflite.reader import (
    TFLiteFormatError,
    _check_extent,
    _int_vector,
    _vector_extent,
)

__all__ = ["DimMetadata", "Sparsity", "densify", "read_sparsity"]

DENSE, SPARSE_CSR = 0, 1
#: SparseIndexVector union members -> element dtype
_INDEX_DTYPES = {1: "<i4", 2: "<u2", 3: "<u1"}


@dataclass
class DimMetadata:
    format: int  # DENSE or SPARSE_CSR
    dense_size: int
    segments: np.ndarray | None = None
    indices: np.ndarray | None = None


@dataclass
class Sparsity:
    traversal_order: tuple[int, ...]
    block_map: tuple[int, ...]
    dims: list[DimMetadata]


def _index_vector(table: Any, kind: int, buf: bytes, what: str) -> np.ndarray:
    """The values of a SparseIndexVector union member (Int32/Uint16/Uint8Vector)."""
    dtype = _INDEX_DTYPES.get(kind)
    if dtype is None or table is None:
        raise TFLiteFormatError(f"{what}: index vector of unknown kind {kind}")
    import tflite

    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}[kind]
    vector = cls()
    vector.Init(table.Bytes, table.Pos)
    ext = _vector_extent(vector, 4)
    if ext is None:
        return np.zeros(0, np.int64)
    item = np.dtype(dtype).itemsize
    _check_extent(buf, ext[0], item * ext[1], what)
    return np.frombuffer(buf, dtype, ext[1], ext[0]).astype(np.int64)


def read_sparsity(sp: Any, buf: bytes, where: str) -> Sparsity:
    """Copy a ``tflite.SparsityParameters`` table out of the file."""
    order = _int_vector(sp, 4, buf, where + " traversal order")
    block_map = _int_vector(sp, 6, buf, where + " block map")
    dims = []
    for level in range(sp.DimMetadataLength()):
        dm = sp.DimMetadata(level)
        what = f"{where} sparsity level {level}"
        rec = DimMetadata(int(dm.Format()), int(dm.DenseSize()))
        if rec.format == SPARSE_CSR:
            segments, indices = dm.ArraySegments(), dm.ArrayIndices()
            kinds = int(dm.ArraySegmentsType()), int(dm.ArrayIndicesType())
            rec.segments = _index_vector(segments, kinds[0], buf, what + " segments")
            rec.indices = _index_vector(indices, kinds[1], buf, what + " indices")
        dims.append(rec)
    return Sparsity(tuple(order), tuple(block_map), dims)


def densify(values: np.ndarray, shape: tuple[int, ...], sp: Sparsity, where: str) -> np.ndarray:
    """The dense tensor of ``shape`` that ``values`` (in traversal order) and ``sp`` describe."""

    def bad(msg: str) -> TFLiteFormatError:
        return TFLiteFormatError(f"{where}: bad sparsity metadata: {msg}")

    n, k = len(shape), len(sp.block_map)
    order = list(sp.traversal_order)
    if len(order) != n + k or sorted(order) != list(range(n + k)):
        raise bad(f"traversal order {order} is not a permutation of {n + k} dimensions")
    if sorted(order[:n]) != list(range(n)):
        # FormatConverter assumes the tensor's own dimensions are walked before the blocks
        raise bad(f"traversal order {order} walks a block dimension before a tensor dimension")
    if len(sp.dims) != n + k:
        raise bad(f"{len(sp.dims)} levels of dimension metadata for {n + k} dimensions")
    if any(not 0 <= d < n for d in sp.block_map):
        raise bad(f"block map {list(sp.block_map)} names a dimension outside rank {n}")
    block_size = [0] * k
    for level, dim in enumerate(order):
        if dim >= n:
            if sp.dims[level].format != DENSE or sp.dims[level].dense_size <= 0:
                raise bad(f"block dimension {dim} (level {level}) is not dense with a size")
            block_size[dim - n] = sp.dims[level].dense_size

    # walk level by level: per leaf-so-far its coordinates and its position in the level
    coords = np.zeros((1, 0), np.int64)
    position = np.zeros(1, np.int64)
    for level, dm in enumerate(sp.dims):
        if dm.format == DENSE:
            size = dm.dense_size
            if size < 0:
                raise bad(f"level {level}: negative dense size {size}")
            child = np.arange(size, dtype=np.int64)
            index = np.tile(child, len(position))
            position = (position[:, None] * size + child).ravel()
            coords = np.repeat(coords, size, axis=0)
        elif dm.format == SPARSE_CSR:
            seg, ind = dm.segments, dm.indices
            if len(position) and (position.max() + 1 >= len(seg)):
                raise bad(
                    f"level {level}: {len(seg)} segments, position {position.max()} needs more"
                )
            starts, ends = seg[position], seg[position + 1]
            counts = ends - starts
            if np.any(counts < 0) or np.any(starts < 0) or (len(ends) and ends.max() > len(ind)):
                raise bad(f"level {level}: segments are not increasing within the indices")
            total = int(counts.sum())
            # the children of every position, in order: starts repeated plus a running offset
            offset = np.arange(total, dtype=np.int64) - np.repeat(
                np.cumsum(counts) - counts, counts
            )
            position = np.repeat(starts, counts) + offset
            index = ind[position]
            coords = np.repeat(coords, counts, axis=0)
        else:
            raise bad(f"level {level}: unknown dimension format {dm.format}")
        coords = np.concatenate([coords, index[:, None]], axis=1)
    if len(coords) != values.size:
        raise bad(f"the walk has {len(coords)} values, the buffer holds {values.size}")
    dense_idx = np.zeros((len(coords), n), np.int64)
    for level in range(n):
        dense_idx[:, order[level]] = coords[:, level]
    for level in range(n, n + k):
        b = order[level] - n
        d = sp.block_map[b]
        dense_idx[:, d] = dense_idx[:, d] * block_size[b] + coords[:, level]
    if n and len(dense_idx) and (np.any(dense_idx < 0) or np.any(dense_idx >= np.array(shape))):
        raise bad(f"an index falls outside the shape {list(shape)}")
    out = np.zeros(shape, values.dtype)
    if n:
        out[tuple(dense_idx.T)] = values.ravel()
    elif values.size:
        out[()] = values.ravel()[0]
    return out
