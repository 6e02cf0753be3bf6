"""Kernel of AddSoftClip: SoftClip(a + b), what the fusion rule below produces.

RULES: ADD(a, b, activation NONE) followed by SoftClip(t, limit), where t is
used by nothing else, becomes AddSoftClip(a, b, limit) (priority EARLY).
"""

import numpy as np
from nnhal.driver.op_packages.rules import EARLY, Rule
from nnhal.driver.op_packages.runtime import FAST, implementation


@implementation(cost=FAST)
def add_soft_clip(a, b, *, limit=1.0):
    t = a + b
    return limit * np.tanh(t / np.asarray(limit, t.dtype))


RULES = [
    Rule(
        name="fuse ADD + SoftClip",
        priority=EARLY,
        pattern=("SoftClip", ("ADD", "a", "b", "act"), "limit"),
        constraint=lambda m: m.is_constant("act", 0) and m.same_type("a", "b"),
        replacement=("AddSoftClip", "a", "b", "limit"),
    )
]
