"""A short, seeded run of every fuzz target (fuzz/targets.py) in CI.

Hypothesis is derandomized (the same cases on every run) with a bounded
number of examples per target; the long runs are ``python -m fuzz TARGET``
(README "Fuzzing"). Byte targets start from their seed corpus and overwrite,
insert or cut bytes; the generated targets take plain bytes through ``Draw``.
A failing example is printed by hypothesis as the bytes to replay with
``python -m fuzz TARGET --replay FILE``.
"""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nnhal.tools.fuzz.corpus import seeds_for
from nnhal.tools.fuzz.targets import TARGETS

pytestmark = pytest.mark.slow  # hypothesis runs of every fuzz target


@pytest.fixture(scope="module", autouse=True)
def _stop_live_server():
    yield
    from nnhal.tools.fuzz.live import close_live

    close_live()


def ci(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


def mutated(target: str) -> st.SearchStrategy[bytes]:
    """A seed of ``target`` with a few bytes overwritten, inserted or cut off."""
    seeds = seeds_for(target)
    edit = st.tuples(st.integers(0, 2), st.integers(0, 1 << 16), st.binary(min_size=1, max_size=4))

    @st.composite
    def build(draw) -> bytes:
        data = bytearray(draw(st.sampled_from(seeds)))
        for kind, pos, chunk in draw(st.lists(edit, max_size=6)):
            pos = pos % (len(data) + 1)
            if kind == 0:
                data[pos : pos + len(chunk)] = chunk
            elif kind == 1:
                data[pos:pos] = chunk
            elif data:
                del data[max(1, pos) :]
        return bytes(data)

    return build()


@ci(1500)
@given(mutated("proto"))
def test_proto_decoding_gives_only_documented_errors(data: bytes) -> None:
    TARGETS["proto"](data)


@ci(1500)
@given(st.binary(min_size=8, max_size=300))
def test_validation_of_mutated_models_gives_only_documented_errors(data: bytes) -> None:
    TARGETS["validation"](data)


@ci(1500)
@given(mutated("loaders"))
def test_op_package_loaders_give_only_config_errors(data: bytes) -> None:
    TARGETS["loaders"](data)


@ci(600)
@given(st.binary(min_size=8, max_size=400))
def test_nasty_graphs_run_exactly_or_fail_cleanly(data: bytes) -> None:
    TARGETS["graphs"](data)


@ci(600)
@given(mutated("grpc"))
def test_malformed_grpc_calls_get_a_status_and_the_server_keeps_serving(data: bytes) -> None:
    TARGETS["grpc"](data)
