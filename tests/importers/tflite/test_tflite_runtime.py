"""TFLite models through the emulated NNAPI runtime: each delegated partition one compilation
over several devices plus nnapi-reference, refused nodes in LiteRT between them."""

from __future__ import annotations

import json

import pytest
from nnhal.importers.tflite import import_tflite
from nnhal.importers.tflite.fallback import TfliteRunner
from nnhal.importers.tflite.runtime_steps import RuntimePartition
from nnhal.tools.cli import main
from tflite_cases import DATA, assert_matches, model_path, npu_profile, reference, served

TWO_NPUS = (npu_profile("npu-even", True), npu_profile("npu-odd", False))


def _run(name, devices, **kw):
    path = model_path(name)
    runner = TfliteRunner(
        import_tflite(path), lambda p: RuntimePartition(p, devices, **kw), path.read_bytes()
    )
    try:
        ins, want = reference(name)
        got = runner.run(ins)
        steps = [s.runner[0].steps() for s in runner.steps if s.kind == "nnapi"]
        reports = [s.runner[0].report for s in runner.steps if s.kind == "nnapi"]
    finally:
        runner.release()
    for k, (g, w) in enumerate(zip(got, want)):
        assert_matches(g, w, f"{name} output {k} through the runtime")
    return steps, reports


@pytest.mark.parametrize("name", ["cnn_int8", "cnn_float16", "sparse_cnn", "while_loop"])
def test_partition_spans_two_devices_and_matches_tflite(name):
    with served(*TWO_NPUS) as (_, devices):
        (steps,), _ = _run(name, devices)
    used = {s.device for s in steps}
    if name == "while_loop":  # the body is split: the runtime's interpreter runs the WHILE
        assert steps[0].device.startswith("interpreter")
        return
    assert {"npu-even", "npu-odd"} <= used, used
    # every delegated node is placed once or more, and only nodes of this partition
    placed = {n for s in steps for n in s.nodes}
    result = import_tflite(model_path(name))
    assert placed == set(result.partitions[0].nodes)


def test_litert_nodes_between_runtime_partitions():
    pytest.importorskip("ai_edge_litert", exc_type=ImportError)
    with served(*TWO_NPUS) as (_, devices):
        steps, _ = _run("cnn_dynamic_range", devices)
    assert len(steps) == 2  # two partitions around the two refused FULLY_CONNECTED


def test_without_the_cpu_device_an_unsupported_operation_fails_compilation():
    from nnhal.errors import HalError

    with (
        served(npu_profile("npu-even", True)) as (_, devices),
        pytest.raises(HalError, match="no device can run operation"),
    ):
        _run("cnn_int8", devices, use_reference=False)


def test_tflite_command_over_two_targets(capsys):
    with served(*TWO_NPUS) as (address, _):
        rc = main(
            [
                "tflite",
                str(model_path("cnn_uint8")),
                "--inputs",
                str(DATA / "cnn_uint8.npz"),
                "--target",
                f"{address}/npu-even",
                "--target",
                f"{address}/npu-odd",
                "--repeat",
                "1",
                "--json",
            ]
        )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["devices"] == ["npu-even", "npu-odd", "nnapi-reference"]
    (entry,) = doc["plan"]
    assert len({s["device"] for s in entry["runtime_steps"]}) >= 2
    counts = doc["operators_per_device"]
    assert sum(counts.values()) == doc["operators"] == 7
    if "outputs" in doc:  # LiteRT installed
        assert doc["outputs"][0]["max_steps"] <= 1


def test_tflite_command_bad_target_is_one_line(capsys):
    rc = main(
        [
            "tflite",
            str(model_path("cnn_uint8")),
            "--target",
            "127.0.0.1:1",
            "--connect-timeout",
            "0.5",
            "--repeat",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "127.0.0.1:1" in err and len(err.strip().splitlines()) == 1


def test_disallowing_the_cpu_device_leaves_unsupported_nodes_to_the_cpu():
    """The delegate's disallow_nnapi_cpu: nodes with an operation no target supports are
    not delegated (with the device's reason); every node left delegated has a device."""
    from nnhal.importers.tflite import read_model
    from nnhal.importers.tflite.runtime_steps import device_refusals, import_for_devices

    with served(npu_profile("npu-even", True)) as (_, devices):
        result = import_for_devices(read_model(model_path("cnn_int8")), devices)
        assert result.skipped and all(
            "no target device supports" in s.reason and "npu-even" in s.reason
            for s in result.skipped
        )
        assert device_refusals(result, devices) == {}
        assert result.delegated + len(result.skipped) == result.nodes


def test_tflite_command_no_nnapi_cpu_runs_refused_nodes_in_litert(capsys):
    with served(npu_profile("npu-even", True)) as (address, _):
        rc = main(
            [
                "tflite",
                str(model_path("cnn_int8")),
                "--inputs",
                str(DATA / "cnn_int8.npz"),
                "--target",
                address,
                "--no-nnapi-cpu",
                "--repeat",
                "1",
                "--json",
            ]
        )
    captured = capsys.readouterr()
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:  # the refused nodes cannot run: one line naming them, exit 1
        assert rc == 1 and "no target device supports" in captured.err
        assert len(captured.err.strip().splitlines()) == 1
        return
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["devices"] == ["npu-even"]
    assert {e["kind"] for e in doc["plan"]} == {"nnapi", "litert"}
    assert doc["stored_outputs"][0]["max_steps"] <= 1
    assert doc["outputs"][0]["max_steps"] <= 1
