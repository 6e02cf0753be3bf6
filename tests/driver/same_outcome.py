"""Helpers of the executor tests: ``assert_same_outcome`` (a specialized compiled model
answers as the generic one does) and ``count_rebuilds`` (functions generated again from
a kept recipe)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from nnhal.errors import GeneralFailure


def assert_same_outcome(fast: Any, generic: Any, inputs: list) -> list | None:
    """``fast.run(inputs)`` fails with the generic run's message when that one fails,
    else gives the same outputs, element for element; the outputs (None on failure)."""
    try:
        want = generic.run(inputs)
    except GeneralFailure as exc:
        with pytest.raises(GeneralFailure, match=re.escape(exc.message)):
            fast.run(inputs)
        return None
    got = fast.run(inputs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    return got


def count_rebuilds(monkeypatch) -> list[int]:
    """The subgraph numbers ``codegen.Generator._rebuild`` is asked for from now on (a
    function generated again from a kept recipe), in order."""
    from nnhal.driver.executor import codegen

    rebuilt: list[int] = []
    original = codegen.Generator._rebuild

    def counting(self, number, *args):
        function = original(self, number, *args)
        rebuilt.append(number)
        return function

    monkeypatch.setattr(codegen.Generator, "_rebuild", counting)
    return rebuilt
