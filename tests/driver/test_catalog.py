"""`nnhal ops`: the catalog of HAL 1.3 operations agrees with the registry."""

from __future__ import annotations

import json

from nnhal.driver.catalog import catalog, catalog_table
from nnhal.driver.ops import registry
from nnhal.driver.ops.registry import registered
from nnhal.tools.cli import main

from nnhal.types import OperationType


def test_catalog_covers_every_hal13_operation_once():
    ops = [e.operation for e in catalog()]
    assert len(ops) == len(set(ops)) == 102
    assert OperationType.OEM_OPERATION not in ops


def test_catalog_status_matches_registry(monkeypatch):
    implemented = registered()
    for entry in catalog():
        if entry.operation in (OperationType.IF, OperationType.WHILE):
            assert entry.implemented and entry.note == "executor"
        else:
            assert entry.implemented
            assert entry.types == dict(implemented[entry.operation].types)
    # an operation a build leaves out shows as not implemented, with no types
    monkeypatch.delitem(registry._REGISTRY, OperationType.ABS)
    (abs_entry,) = [e for e in catalog() if e.operation == OperationType.ABS]
    assert not abs_entry.implemented and abs_entry.note == "not implemented"
    assert not abs_entry.types


def test_table_and_json(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == catalog_table()
    add_row = next(line for line in out.splitlines() if line.startswith("ADD "))
    assert "1.0" in add_row and "1.3" in add_row
    assert main(["ops", "--json"]) == 0
    rows = {r["operation"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["ADD"]["types"]["TENSOR_INT32"] == "1.3"
    assert rows["WHILE"]["implemented"] is True
    assert len(rows) == 102
