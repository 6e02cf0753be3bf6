"""The nnhal pytest plugin (nnhal.tools.pytest_plugin), run as an app's test suite would
use it: through pytester, in a pytest session of its own."""

from __future__ import annotations

import pytest
from repo_paths import REPO_ROOT

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # a pytest session of its own per test

EXAMPLE = REPO_ROOT / "examples" / "app_tests" / "test_my_app.py"


def test_the_example_app_suite_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_my_app=EXAMPLE.read_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)


def test_a_failing_app_is_reported_with_the_trace(pytester: pytest.Pytester) -> None:
    """An app that does not retry fails, and the trace assertion names what happened."""
    pytester.makepyfile(test_app="""
import numpy as np
import pytest
from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T, OperationType as Op

FAULTS = {"rules": [{"method": "execute*", "status": "GENERAL_FAILURE", "when": "always"}]}

@pytest.mark.nnhal(faults=FAULTS)
def test_execute(nnhal_client, nnhal_trace):
    mb = ModelBuilder(); g = mb.main
    a = g.input(T.TENSOR_FLOAT32, [1])
    g.operation(Op.ADD, [a, a, g.constant(T.INT32, 0)], [g.output(T.TENSOR_FLOAT32, [1])])
    prepared = nnhal_client.prepareModel_1_3(mb.build())
    try:
        prepared.execute([np.ones(1, np.float32)])
    except Exception:
        pass
    nnhal_trace.assert_called("execute*", status="NONE")
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no execute* call with status NONE; trace:*GENERAL_FAILURE*"])


def test_two_devices_in_a_real_server_process(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_app="""
import pytest

@pytest.mark.nnhal(profiles=["example-npu", "nnapi-sample_all"], process=True)
def test_devices(nnhal_server, nnhal_control):
    assert nnhal_server.devices == ["example-npu", "nnapi-sample_all"]
    second = nnhal_server.client("nnapi-sample_all")
    assert second.getVersionString() == "JUST_AN_EXAMPLE"
    with pytest.raises(ValueError, match="no device 'gpu'"):
        nnhal_server.client("gpu")
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)


def test_the_ini_options_choose_the_profiles(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nnnhal_profiles =\n    example-npu\n")
    pytester.makepyfile(test_app="""
def test_profile(nnhal_server, nnhal_client):
    assert nnhal_server.devices == ["example-npu"]
    assert nnhal_client.getVersionString() == "nnhal-example-npu-0.1"
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=1)


def test_op_packages_in_process_and_in_a_server_process(pytester: pytest.Pytester) -> None:
    """``op_packages=`` loads a package into the served devices, both ways of serving."""
    example = REPO_ROOT / "examples" / "qnn_xml"
    pytester.makepyfile(test_app=f"""
import pytest
from nnhal.vectors import load_vectors

MODEL = load_vectors({str(example / "model.json")!r})[0].model
PACKAGE = {str(example / "soft_clip.xml")!r}

@pytest.mark.nnhal(op_packages=[PACKAGE])
def test_in_process(nnhal_client):
    assert nnhal_client.getSupportedOperations_1_3(MODEL) == [True]

@pytest.mark.nnhal(op_packages=[PACKAGE], process=True)
def test_in_a_process(nnhal_client):
    assert nnhal_client.getSupportedOperations_1_3(MODEL) == [True]

def test_without(nnhal_client):
    assert nnhal_client.getSupportedOperations_1_3(MODEL) == [False]
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)


def test_a_wrong_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_app="""
import pytest

@pytest.mark.nnhal(profile="default")
def test_x(nnhal_server):
    pass
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*@pytest.mark.nnhal takes profiles=*"])
