"""Bad .tflite files: one error line naming what is wrong, exit 1, never a traceback."""

from __future__ import annotations

import struct

import pytest
from nnhal.importers.tflite import TFLiteFormatError, read_model
from nnhal.tools.cli import main
from tflite_cases import model_path


def _model(buf: bytes):
    import tflite

    return tflite.Model.GetRootAsModel(buf, 0)


def _field_pos(table, slot: int) -> int:
    o = table._tab.Offset(slot)
    assert o, f"field at slot {slot} absent"
    return table._tab.Pos + o


def with_version(version: int) -> bytes:
    buf = bytearray(model_path("cnn_uint8").read_bytes())
    struct.pack_into("<I", buf, _field_pos(_model(bytes(buf)), 4), version)
    return bytes(buf)


def with_buffer_outside() -> tuple[bytes, str]:
    """The largest constant's data vector claims more bytes than the file has."""
    buf = bytearray(model_path("cnn_uint8").read_bytes())
    m = _model(bytes(buf))
    sg = m.Subgraphs(0)
    best = max(
        (sg.Tensors(t) for t in range(sg.TensorsLength())),
        key=lambda t: m.Buffers(t.Buffer()).DataLength(),
    )
    data = m.Buffers(best.Buffer())
    start = data._tab.Vector(data._tab.Offset(4))
    struct.pack_into("<I", buf, start - 4, len(buf) + 1000)
    return bytes(buf), best.Name().decode()


def with_while_calling_main() -> bytes:
    """The WHILE body is the main subgraph: 0 -> 0."""
    import tflite

    buf = bytearray(model_path("while_loop").read_bytes())
    op = _model(bytes(buf)).Subgraphs(0).Operators(0)
    table = op.BuiltinOptions()
    opts = tflite.WhileOptions()
    opts.Init(table.Bytes, table.Pos)
    struct.pack_into("<i", buf, _field_pos(opts, 6), 0)  # body_subgraph_index
    return bytes(buf)


CASES = {
    "not_a_flatbuffer": (lambda: b"this is not a model at all\n" * 4, "not a TFLite flatbuffer"),
    "empty": (lambda: b"", "not a TFLite flatbuffer"),
    "truncated": (lambda: model_path("cnn_float16").read_bytes()[:3000], "truncated"),
    "root_past_end": (lambda: b"\xff\xff\x00\x00TFL3" + b"\0" * 8, "truncated"),
    "schema_version": (lambda: with_version(7), "unknown TFLite schema version 7"),
    "buffer_outside": (lambda: with_buffer_outside()[0], "outside the file"),
    "subgraph_cycle": (with_while_calling_main, "subgraph cycle 0 -> 0"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_one_line_exit_1(case, tmp_path, capsys):
    make, expected = CASES[case]
    path = tmp_path / f"{case}.tflite"
    path.write_bytes(make())
    rc = main(["import", str(path), "-o", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert rc == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("nnhal import: error: ") and expected in lines[0], lines[0]
    assert not (tmp_path / "out.json").exists()


def test_buffer_outside_names_the_tensor():
    buf, name = with_buffer_outside()
    with pytest.raises(TFLiteFormatError, match="tensor .*" + name.split(";")[0][:20]):
        read_model(buf)


def test_cycle_names_the_operator():
    with pytest.raises(
        TFLiteFormatError, match=r"operator 0 WHILE \(subgraph 0\) calls subgraph 0"
    ):
        read_model(with_while_calling_main())


def test_every_truncation_is_a_clean_error():
    """Cut the file anywhere: a TFLiteFormatError or a readable model, nothing else."""
    full = model_path("while_loop").read_bytes()
    for cut in range(0, len(full), 37):
        try:
            read_model(full[:cut])
        except TFLiteFormatError as e:
            assert "\n" not in str(e)


def test_missing_file(tmp_path, capsys):
    rc = main(["import", str(tmp_path / "nope.tflite")])
    err = capsys.readouterr().err
    assert rc == 1 and "cannot read" in err and "Traceback" not in err
