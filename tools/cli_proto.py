"""``nnhal proto [--out DIR]``: the HAL's .proto files, as installed with the package.

For gRPC tools that need the service definitions (grpcurl, grpc_cli, Postman):
without ``--out`` every file is printed, each after a ``// file: NAME`` line;
with ``--out DIR`` they are written under ``DIR/nnhal/v1_3/`` (the import paths
the files use), and their paths printed.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path
from typing import Any

#: where the files live inside the nnhal.proto package (and below --out)
PROTO_DIR = ("nnhal", "v1_3")


def proto_files() -> list[Any]:
    """The installed .proto files (importlib.resources traversables), sorted by name."""
    folder = resources.files("nnhal.proto").joinpath(*PROTO_DIR)
    return sorted((f for f in folder.iterdir() if f.name.endswith(".proto")), key=lambda f: f.name)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "proto",
        help="print the HAL's .proto files, or write them to a folder",
        description="The .proto files of the HAL services (for grpcurl, grpc_cli, Postman).",
    )
    p.add_argument("--out", metavar="DIR", help="write them under DIR/nnhal/v1_3/")
    p.set_defaults(func=cmd_proto)


def cmd_proto(args: argparse.Namespace) -> int:
    files = proto_files()
    if args.out is None:
        for f in files:
            print(f"// file: {'/'.join(PROTO_DIR)}/{f.name}")
            print(f.read_text(encoding="utf-8"), end="")
        return 0
    target = Path(args.out).joinpath(*PROTO_DIR)
    target.mkdir(parents=True, exist_ok=True)
    for f in files:
        path = target / f.name
        path.write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
        print(path)
    return 0
