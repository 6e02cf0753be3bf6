"""The suite's pytest options (``--cts-*``) and the ``Config`` they make.

Everything that decides *which* tests exist (families, corpus, extra specs,
vectors, fuzz count and seed) is an option here, so every pytest process of a
run (each xdist worker collects on its own) builds the same test ids.
Selection among them (``-k``, ``--lf``, ``--deselect``), parallel runs
(``-n``), time limits (pytest-timeout's ``--timeout``) and JUnit XML
(``--junitxml``) are pytest's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = ["add_options", "config_from_options"]


def add_options(parser: pytest.Parser) -> None:
    g = parser.getgroup("nnhal-cts", "nnhal conformance suite (pytest --pyargs nnhal.cts)")
    g.addoption(
        "--cts-target",
        metavar="HOST:PORT",
        help="the driver under test: any server speaking nnhal's proto (required)",
    )
    g.addoption("--cts-device", metavar="NAME", help="which device of the target's server")
    g.addoption(
        "--cts-connect-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for the target and the oracle to answer (default 10)",
    )
    g.addoption(
        "--cts-oracle",
        metavar="HOST:PORT",
        help="endpoint giving the fuzz family's expected outputs (without one the fuzz family "
        "is skipped; `nnhal cts` uses the in-process reference)",
    )
    g.addoption(
        "--cts-families",
        action="append",
        metavar="F,F,...",
        help="families to collect (default: every default family)",
    )
    g.addoption(
        "--cts-no-corpus",
        action="store_true",
        help="leave out the shipped NNAPI corpus (spec library only)",
    )
    g.addoption("--cts-specs", action="append", metavar="PATH", help="extra spec files or folders")
    g.addoption(
        "--cts-vectors",
        action="append",
        metavar="PATH",
        help="also run these vector files/folders (family 'vectors')",
    )
    g.addoption(
        "--cts-fuzz-count", type=int, default=40, metavar="N", help="fuzzed models (default 40)"
    )
    g.addoption("--cts-seed", type=int, default=0, metavar="S", help="fuzz seed (default 0)")
    g.addoption(
        "--cts-fuzz-dir",
        default="cts-failures",
        metavar="DIR",
        help="where failing fuzzed models are saved (default ./cts-failures)",
    )
    g.addoption(
        "--cts-expectations",
        metavar="FILE",
        help="known failures of this target: listed tests are xfail",
    )
    g.addoption(
        "--cts-strict",
        action="store_true",
        help="listed tests that pass fail (strict xfail), and so does a family skipped whole",
    )
    g.addoption(
        "--cts-require-deadlines",
        action="store_true",
        help="fail a target that ignores execution and preparation deadlines",
    )
    g.addoption(
        "--cts-max-timeouts",
        type=int,
        default=10,
        metavar="N",
        help="after N tests of one process timed out the rest fail as not run (default 10)",
    )
    g.addoption(
        "--cts-coverage",
        nargs="?",
        const="-",
        metavar="FILE",
        help="print (or write to FILE) operations x operand types x families",
    )
    g.addoption(
        "--cts-json-report",
        metavar="FILE",
        help="write a JSON report (results, per-family counts, coverage)",
    )


def _families(values: list[str] | None, vectors: bool) -> tuple[str, ...]:
    from nnhal.cts.families import DEFAULT_FAMILIES, FAMILIES

    from nnhal.suggest import unknown_names

    if not values:
        return DEFAULT_FAMILIES + (("vectors",) if vectors else ())
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise pytest.UsageError(f"--cts-families: {unknown_names('family', unknown, FAMILIES)}")
    return tuple(dict.fromkeys(names))


def config_from_options(config: pytest.Config) -> Any:
    """The nnhal.cts.suite.Config of the --cts-* options (UsageError when they are wrong)."""
    from nnhal.cts.suite import Config
    from nnhal.cts.target import Options

    opt = config.getoption
    if opt("cts_fuzz_count") < 0 or opt("cts_max_timeouts") < 1:
        raise pytest.UsageError("--cts-fuzz-count must be >= 0 and --cts-max-timeouts >= 1")
    options = Options(
        fuzz_count=opt("cts_fuzz_count"),
        seed=opt("cts_seed"),
        fuzz_dir=Path(opt("cts_fuzz_dir")),
        vectors=tuple(opt("cts_vectors") or ()),
        specs=tuple(opt("cts_specs") or ()),
        require_deadlines=bool(opt("cts_require_deadlines")),
        corpus=not opt("cts_no_corpus"),
    )
    families = _families(opt("cts_families"), bool(options.vectors))
    if "vectors" in families and not options.vectors:
        raise pytest.UsageError("the vectors family needs --cts-vectors PATH")
    return Config(
        families=families,
        expectations=opt("cts_expectations"),
        options=options,
        strict=bool(opt("cts_strict")),
    )
