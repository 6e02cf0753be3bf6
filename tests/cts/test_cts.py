"""The conformance suite's own pieces: DSL and variations, the pytest session (outcomes, time
limits, a dead target, expectations), reports, the command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from nnhal.cts.core import Outcome, Problems, Result, TestCase, check, fail, skip
from nnhal.cts.dsl import F32, FLOAT_AND_QUANT8, SpecError, spec
from nnhal.cts.report import coverage_table, json_report, summary_line
from nnhal.cts.variations import expand, quantize

from nnhal.types import OperandType, OperationType


@spec("t_add", variations=FLOAT_AND_QUANT8, quant=(0.5, 128))
def _t_add(s):
    a = s.input("a", F32, [2])
    b = s.const("b", F32, [1, -2], [2])
    out = s.output("out", F32, [2])
    s.op("ADD", [a, b, s.int32(0)], [out])
    s.example({a: [1, 2]}, {out: [2, 0]})


def test_variations_of_a_spec():
    models = {m.variation: m.test for m in expand(_t_add)}
    assert set(models) == {
        f"{dt}{'_' if dt and gv else ''}{gv}" or "base"
        for dt in ("", "float16", "relaxed", "quant8_asymm", "quant8_signed")
        for gv in ("", "all_tensors_as_inputs", "all_outputs_as_internal", "dynamic_output_shape")
    }
    q = models["quant8_asymm"]
    assert q.model.main.operands[0].type == OperandType.TENSOR_QUANT8_ASYMM
    assert q.inputs[0].tolist() == [130, 132] and q.expected[0].tolist() == [132, 128]
    signed = models["quant8_signed"]
    assert signed.model.main.operands[0].zeroPoint == 0 and signed.inputs[0].tolist() == [2, 4]
    assert models["float16"].inputs[0].dtype == np.float16
    assert models["relaxed"].model.relaxComputationFloat32toFloat16
    as_inputs = models["all_tensors_as_inputs"]
    assert len(as_inputs.inputs) == 2 and as_inputs.inputs[1].tolist() == [1, -2]
    internal = models["all_outputs_as_internal"].model.main
    assert [op.type for op in internal.operations] == [OperationType.ADD, OperationType.ADD]
    dynamic = models["dynamic_output_shape"]
    out = dynamic.model.main.operands[dynamic.model.main.outputIndexes[0]]
    assert out.dimensions == (0,) and dynamic.expected_shapes == [(2,)]


def test_quantize_rounds_half_away_from_zero_and_clamps():
    got = quantize(
        np.array([0.25, -0.25, 100.0, -100.0]), OperandType.TENSOR_QUANT8_ASYMM, 0.5, 128
    )
    assert got.tolist() == [129, 127, 255, 0]


def test_a_broken_spec_is_a_spec_error():
    @spec("t_broken")
    def broken(s):
        a = s.input("a", F32, [2])
        s.op("ADD", [a, a, s.int32(0)], [s.output("out", F32, [2])])
        s.example({a: [1, 2]}, {})  # no expected value for "out"

    with pytest.raises(SpecError, match="no values"):
        expand(broken)


def test_library_loads_every_spec_and_expands(tmp_path):
    from nnhal.cts.families import Library

    extra = tmp_path / "extra_specs.py"
    extra.write_text("from nnhal.cts.dsl import spec\n\n@spec('t_bad')\ndef _(s):\n    pass\n")
    lib = Library.load((str(extra),))
    names = {s.name for s in lib.specs}
    assert {"add", "while_nested", "if_while_if", "fully_connected", "slice"} <= names
    assert ("t_bad", "SpecError: a spec needs at least one example()") in lib.errors
    assert len(lib.models) > 600


@pytest.fixture
def own_server():
    """A default driver behind its own server (a test may stop it); yields (server, client)."""
    from nnhal.driver.device import Device
    from nnhal.driver.server import create_server

    from nnhal.client import connect

    server, address = create_server(Device(), "127.0.0.1:0")
    client = connect(address)
    try:
        yield server, client
    finally:
        client.close()
        server.stop(None)


def _case(test_id: str, fn, **kw) -> TestCase:
    return TestCase(test_id, test_id.split("/")[0], fn, **kw)


def _run(client, tests, **config):
    from nnhal.cts.suite import Config, run_suite

    return run_suite(client, client.address, Config(families=("basic",), **config), tests=tests)


@pytest.mark.timeout(120)
def test_session_outcomes_timeouts_and_a_dead_target(own_server):
    """Each way a test ends, as a pytest session: a hang is pytest-timeout's; the target then
    found dead, the rest fail at once as not run (no time limit waited out each)."""
    server, client = own_server
    release = threading.Event()

    def problems(t):
        p = Problems()
        p.run("one", lambda: check(False, "first broken"))
        p.run("two", lambda: None)
        p.raise_if_any()

    def hang_with_the_target_gone(t):
        server.stop(None)
        release.wait()

    tests = [
        _case("basic/pass", lambda t: "note"),
        _case("basic/fail", lambda t: fail("broken")),
        _case("basic/skip", lambda t: skip("cannot")),
        _case("basic/problems", problems),
        _case("basic/error", lambda t: 1 / 0),
        _case("basic/hang", hang_with_the_target_gone, timeout=1.0),
        *[_case(f"basic/after/{i}", lambda t: None, timeout=600.0) for i in range(3)],
    ]
    started = time.monotonic()
    try:
        report = _run(client, tests)
    finally:
        release.set()
    got = {r.id: r.outcome for r in report.results}
    assert got == {
        "basic/pass": Outcome.PASSED, "basic/fail": Outcome.FAILED, "basic/skip": Outcome.SKIPPED,
        "basic/problems": Outcome.FAILED, "basic/error": Outcome.ERROR,
        "basic/hang": Outcome.TIMEOUT, "basic/after/0": Outcome.ERROR,
        "basic/after/1": Outcome.ERROR, "basic/after/2": Outcome.ERROR,
    }  # fmt: skip
    by_id = report.by_id()
    assert by_id["basic/problems"].message.startswith("1 of 2 cases failed: one: first broken")
    assert by_id["basic/skip"].message == "cannot"
    assert "ZeroDivisionError" in by_id["basic/error"].message
    assert "no result within the time limit" in by_id["basic/hang"].message
    assert "stopped answering" in report.not_run_reason and "basic/hang" in report.not_run_reason
    assert all(by_id[f"basic/after/{i}"].message.startswith("not run: ") for i in range(3))
    assert time.monotonic() - started < 60  # the after/* tests did not wait out 600 s each
    assert not report.ok


@pytest.mark.timeout(120)
def test_a_session_goes_on_after_a_timeout_when_the_target_answers(own_server):
    _, client = own_server
    release = threading.Event()
    tests = [
        _case("basic/hang", lambda t: release.wait(), timeout=0.5),
        _case("basic/next", lambda t: None),
    ]
    try:
        report = _run(client, tests)
    finally:
        release.set()
    assert [r.outcome for r in report.results] == [Outcome.TIMEOUT, Outcome.PASSED]
    assert report.not_run_reason is None


@pytest.mark.timeout(120)
def test_max_timeouts_ends_the_session_early(own_server):
    _, client = own_server
    release = threading.Event()
    tests = [_case(f"basic/hang/{i}", lambda t: release.wait(), timeout=0.3) for i in range(4)]
    try:
        report = _run(client, tests, max_timeouts=2)
    finally:
        release.set()
    assert [r.outcome for r in report.results] == [Outcome.TIMEOUT] * 2 + [Outcome.ERROR] * 2
    assert "2 tests timed out" in report.not_run_reason


@pytest.mark.timeout(120)
def test_expectations_become_xfail_markers(own_server, tmp_path):
    _, client = own_server
    path = tmp_path / "expected.txt"
    path.write_text("# comment\nbasic/broken/*   known bug 1\nbasic/fixed   stale entry\n"
                    "basic/never-run  matches nothing\n")  # fmt: skip
    tests = [
        _case("basic/broken/1", lambda t: fail("bad")),
        _case("basic/broken/2", lambda t: skip("no")),
        _case("basic/fixed", lambda t: None),
        _case("basic/other", lambda t: None),
    ]
    lenient = _run(client, tests, expectations=str(path))
    got = {r.id: r.outcome for r in lenient.results}
    assert got == {"basic/broken/1": Outcome.XFAIL, "basic/broken/2": Outcome.SKIPPED,
                   "basic/fixed": Outcome.XPASS, "basic/other": Outcome.PASSED}  # fmt: skip
    broken = lenient.by_id()["basic/broken/1"].message
    assert "known bug 1" in broken and f"{path}:2" in broken and broken.endswith("bad")
    assert "stale entry" in lenient.by_id()["basic/fixed"].message
    assert lenient.info["unusedExpectations"] == ["basic/never-run"]
    assert lenient.ok and not Outcome.XFAIL.is_problem and not Outcome.XPASS.is_problem
    # strict: the listed test that passes fails the session (pytest's strict xfail)
    strict = _run(client, tests, expectations=str(path), strict=True)
    assert strict.by_id()["basic/fixed"].outcome == Outcome.XPASS and not strict.ok


def test_reports():
    results = [
        Result("generated/a", "generated", Outcome.PASSED, coverage=(("ADD", "TENSOR_FLOAT32"),)),
        Result("generated/b", "generated", Outcome.FAILED, "wrong", coverage=(("ADD", "TENSOR_FLOAT32"),)),
        Result("qos/c", "qos", Outcome.SKIPPED, "why"),
        Result("qos/d", "qos", Outcome.TIMEOUT, "hung"),
    ]  # fmt: skip
    assert summary_line(results) == "1 passed, 1 failed, 1 skipped, 1 timed out"
    table = coverage_table(results, ["generated", "qos"])
    assert "ADD" in table and "1/2" in table
    doc = json_report(results, ["generated", "qos"], {"target": "x"})
    assert doc["families"] == {"generated": {"passed": 1, "failed": 1},
                               "qos": {"skipped": 1, "timeout": 1}}  # fmt: skip
    assert doc["coverage"]["ADD"]["TENSOR_FLOAT32"]["generated"] == {"tests": 2, "passed": 1}


def test_nnhal_cli_does_not_import_cts_at_import_time():
    code = "import sys, nnhal.tools.cli; nnhal.tools.cli.build_parser(); assert 'cts' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.slow  # a whole nnhal cts session in a child process
@pytest.mark.timeout(180)
def test_nnhal_cts_command(tmp_path, capsys, monkeypatch):
    from nnhal.tools.cli import main

    monkeypatch.chdir(tmp_path)  # the session's cache (--lf) goes to the current folder
    code = main(["cts", "--families", "basic,fuzz", "--fuzz-count", "2", "--",
                 "--collect-only", "-q"])  # fmt: skip
    listed = capsys.readouterr().out.split()
    assert code == 0
    assert listed[:2] == ["nnhal.cts::basic/getStatus", "nnhal.cts::basic/getCapabilities_1_3"]
    assert "nnhal.cts::fuzz/single/0" in listed and "nnhal.cts::fuzz/small/0" in listed
    junit, report, cover = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "cov.txt"
    code = main(["cts", "--families", "basic,generated", "-k", "basic/get or generated/select",
                 "--no-corpus", "--junit-xml", str(junit), "--json-report", str(report),
                 "--coverage", str(cover)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "25 passed, " in out.strip().splitlines()[-1]
    assert "family " in out and "\nbasic            6" in out
    doc = json.loads(report.read_text())
    assert doc["counts"] == {"passed": 25} and doc["coverage"]["SELECT"]["TENSOR_BOOL8"]
    assert doc["versionString"] and doc["skippedFamilies"] == {}
    root = ET.parse(junit).getroot()
    assert sum(int(s.get("tests")) for s in root.iter("testsuite")) == 25
    assert root.find(".//testcase[@name='basic/getStatus']") is not None
    assert "SELECT" in cover.read_text()
    assert main(["cts", "--families", "nope"]) == 2
    assert main(["cts", "stray"]) == 2  # pytest's arguments go after --
    assert main(["cts", "--families", "basic", "-k", "no-such-test"]) == 2
    assert "no tests to run" in capsys.readouterr().err


@pytest.mark.timeout(180)
def test_nnhal_cts_inside_a_pytest_session_warns_nothing(tmp_path, capsys, monkeypatch):
    """`nnhal cts` in a process that already imported the suite's plugin (any pytest
    session loads its entry point): no "cannot be rewritten" warning in the summary. (The
    warning came only where this session had imported the plugin unrewritten: the `pytest`
    script on an editable install, as in CI.)"""
    import nnhal.cts.pytest_plugin  # noqa: F401  (this session has it already; made sure)
    from nnhal.tools.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["cts", "--families", "basic", "-k", "basic/getStatus", "--no-corpus",
                 "--", "-q", "-p", "no:cacheprovider"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "cannot be rewritten" not in out, out
    assert out.strip().splitlines()[-1].startswith("1 passed, 9 deselected in "), out


def test_the_suite_never_imports_a_driver():
    """cts depends on nnhal only: the fuzz oracle is an endpoint, not an import."""
    import ast
    from pathlib import Path

    from repo_paths import REPO_ROOT

    offenders = []
    for path in sorted((Path(REPO_ROOT) / "cts").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(("nnhal.driver",
                          "nnhal.tools", "nnhal.runtime"))]  # fmt: skip
    assert not offenders


def test_whole_family_skips_are_named_and_strict_fails_on_them():
    from nnhal.cts.report import skipped_families_line
    from nnhal.cts.suite import Report

    results = [
        Result("burst/a", "burst", Outcome.SKIPPED, "no bursts"),
        Result("burst/b", "burst", Outcome.SKIPPED, "no bursts"),
        Result("qos/a", "qos", Outcome.SKIPPED, "unsupported"),
        Result("qos/b", "qos", Outcome.PASSED),
        Result("generated/a", "generated", Outcome.XPASS, "fixed"),
    ]
    families = ("generated", "qos", "burst")
    assert skipped_families_line(results, families) == "skipped whole: burst (no bursts)"
    lenient = Report(results, families, 0.0, {})
    strict = Report(results, families, 0.0, {}, strict=True)
    assert lenient.ok and not strict.ok
    assert strict.strict_problems == [
        "family burst skipped whole: no bursts",
        "generated/a passed unexpectedly (xpass)",
    ]


def test_coverage_lists_every_operation_with_totals():
    results = [
        Result("generated/a", "generated", Outcome.PASSED, coverage=(("ADD", "TENSOR_FLOAT32"),))
    ]
    table = coverage_table(results, ["generated"])
    rows = [line.split()[0] for line in table.splitlines()[2:-2]]
    assert len(rows) == 102 and "WHILE" in rows and "OEM_OPERATION" not in rows
    assert "TANH                          (no test)" in table
    assert "totals: 1 of 102 operations tested, 1 with a passing test" in table


def test_the_corpus_ships_with_its_notice():
    from nnhal.cts.corpus import CORPUS_DIR
    from nnhal.cts.families import Library

    assert "Apache License" in (CORPUS_DIR / "NOTICE").read_text()
    assert (CORPUS_DIR / "LICENSE").is_file()
    library = Library.load()
    assert len(library.corpus) == 5978 and not library.errors
    ops = {op for m in library.all_models() for op, _ in m_coverage(m)}
    # all 102 operations (IF and WHILE come from the spec library)
    assert ops == {op.name for op in OperationType} - {"OEM_OPERATION"}


def m_coverage(m):
    from nnhal.cts.core import coverage_of

    return coverage_of([m.test.model])


@pytest.mark.timeout(120)
def test_nnhal_cts_oracle_option_and_same_implementation_warning(capsys):
    from nnhal.tools.cli import main

    code = main(["cts", "--families", "fuzz", "--fuzz-count", "4", "--no-corpus"])
    captured = capsys.readouterr()
    assert code == 0, captured.out
    assert "the fuzz oracle reports the same version string and type as the target" in captured.err
    # pytest's summary line (a fresh environment may add ", 1 warning")
    assert re.search(r" 4 passed(, \d+ warnings?)? in ", captured.out.strip().splitlines()[-1])
    assert main(["cts", "--families", "fuzz", "--oracle", "not an address"]) == 2


_WRONG_SPEC = '''
from nnhal.cts.dsl import F32, spec


@spec("t_wrong", variations=(), graph_variations=())
def _(s):
    a = s.input("a", F32, [2])
    b = s.const("b", F32, [1, 1], [2])
    out = s.output("out", F32, [2])
    s.op("ADD", [a, b, s.int32(0)], [out])
    s.example({a: [1, 2]}, {out: [2, 3]})
    s.example({a: [1, 2]}, {out: [5, 5]})  # wrong: the target must fail it
'''


@pytest.mark.slow  # pytest processes with two xdist workers each
@pytest.mark.timeout(300)
def test_pytest_runs_the_suite_directly_with_xdist_and_last_failed(server_address, tmp_path):
    """``pytest --pyargs nnhal.cts --cts-target ADDR`` with -n 2, -k, --junitxml, then --lf."""
    (tmp_path / "wrong_specs.py").write_text(_WRONG_SPEC)
    base = [sys.executable, "-m", "pytest", "--pyargs", "nnhal.cts", "--cts-target",
            server_address, "--cts-no-corpus", "--cts-families", "basic,generated",
            "--cts-specs", "wrong_specs.py", "-p", "no:randomly"]  # fmt: skip

    def pytest_run(*args):
        return subprocess.run([*base, *args], check=False, cwd=tmp_path, capture_output=True, text=True,
                              timeout=280)  # fmt: skip

    first = pytest_run("-n", "2", "-k", "t_wrong or basic/get or generated/add/base",
                       "--junitxml", "r.xml", "--cts-json-report", "r.json")  # fmt: skip
    assert first.returncode == 1, first.stdout[-3000:]
    summary = first.stdout.strip().splitlines()[-1]
    assert "1 failed, 9 passed" in summary, first.stdout[-3000:]
    assert "FAILED nnhal.cts::generated/t_wrong/base/1 - " in first.stdout
    assert "created: 2/2 workers" in first.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["counts"] == {"passed": 9, "failed": 1}
    failed = next(r for r in doc["results"] if r["outcome"] == "failed")
    assert failed["id"] == "generated/t_wrong/base/1" and "outside atol" in failed["message"]
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert len(root.findall(".//testcase/failure")) == 1
    again = pytest_run("--lf")
    assert again.returncode == 1
    assert "1 failed" in again.stdout.strip().splitlines()[-1], again.stdout[-3000:]
    assert "run-last-failure: rerun previous 1 failure" in again.stdout
    # no target: a usage error naming the option
    none = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "nnhal.cts"], check=False,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert none.returncode == 4 and "--cts-target HOST:PORT" in none.stderr
