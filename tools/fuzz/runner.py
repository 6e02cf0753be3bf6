"""Long runs: ``python -m fuzz TARGET --runs N [--seed S] [--engine atheris|random]``.

- ``atheris`` (coverage guided, ``pip install '.[fuzz]'``): the target's seed
  corpus is written to ``--corpus DIR`` (default ``fuzz-corpus/TARGET``),
  libFuzzer mutates it guided by the coverage of nnhal and driver, stops at
  the first failure and writes the input as ``crash-*``/``timeout-*`` in
  ``--artifacts`` (default: the current folder).
- ``random`` (no extra dependency): seeded mutations of the same seeds (bit
  flips, byte runs, insertions, deletions, splices, truncations) or fresh
  random bytes; it keeps going after a failure, saves each failing input in
  ``--artifacts`` and reports them all at the end.

Both count cases and wall time and print one summary line
``TARGET: N cases in T s, F failures (kinds)``. Replay a saved input with
``python -m fuzz TARGET --replay FILE``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import resource
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

TARGET_NAMES = ("proto", "validation", "loaders", "graphs", "grpc")


_TARGET_MODULES = (
    "nnhal.driver.device",
    "nnhal.driver.server",
    "nnhal.driver.memory",
    "nnhal.driver.op_packages.xml_loader",
    "nnhal.driver.op_packages.json_loader",
    "nnhal.driver.op_packages.ini_loader",
    "nnhal.driver.op_packages.generator",
    "nnhal.tools.fuzz.graphs",
    "nnhal.tools.fuzz.models",
)


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang


def mutate(rng: random.Random, seeds: tuple[bytes, ...], max_len: int) -> bytes:
    """One input for the random engine: a mutated seed (90 %) or fresh bytes."""
    if not seeds or rng.random() < 0.1:
        return rng.randbytes(rng.randint(0, min(max_len, 512)))
    data = bytearray(rng.choice(seeds))
    for _ in range(rng.choice((1, 1, 2, 3, 5, 8))):
        kind = rng.randint(0, 6)
        pos = rng.randint(0, max(0, len(data) - 1)) if data else 0
        if kind == 0 and data:
            data[pos] ^= 1 << rng.randint(0, 7)
        elif kind == 1 and data:
            data[pos] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randint(0, 255)))
        elif kind == 2:
            data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif kind == 3 and data:
            del data[pos : pos + rng.randint(1, 16)]
        elif kind == 4 and data:
            other = rng.choice(seeds)
            start = rng.randint(0, max(0, len(other) - 1))
            data[pos:] = other[start : start + rng.randint(1, 256)] + data[pos:]
        elif kind == 5 and data:
            del data[rng.randint(1, len(data)) :]
        elif kind == 6 and len(data) > 4:  # a varint made large
            data[pos : pos + 1] = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
    return bytes(data[:max_len])


def _limit_memory(gib: float) -> None:
    """Allocation bombs raise MemoryError instead of swapping the shared machine."""
    if gib > 0:
        limit = int(gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_random(target, name: str, args) -> int:
    from nnhal.tools.fuzz.corpus import seeds_for
    from nnhal.tools.fuzz.targets import FuzzFailure

    seeds = seeds_for(name)
    rng = random.Random(args.seed)
    artifacts = Path(args.artifacts)
    kinds: Counter[str] = Counter()
    first: dict[str, str] = {}
    signal.signal(signal.SIGALRM, _alarm)
    started = time.monotonic()
    cases = 0
    for cases in range(1, args.runs + 1):
        data = mutate(rng, seeds, args.max_len)
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        try:
            target(data)
            kind = None
        except Hang:
            kind, text = "hang", f"no answer within {args.timeout} s"
        except FuzzFailure as exc:
            kind, text = exc.kind, str(exc)
        except Exception as exc:  # noqa: BLE001 - a target's own bug is a failure too
            kind, text = "crash", "".join(traceback.format_exception(exc))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if kind is not None:
            kinds[kind] += 1
            digest = hashlib.sha1(data).hexdigest()[:12]
            artifacts.mkdir(parents=True, exist_ok=True)
            (artifacts / f"{name}-{kind}-{digest}").write_bytes(data)
            key = text.splitlines()[0][:160]
            if key not in first:
                first[key] = digest
                print(f"FAIL {name} case {cases} ({digest}): {text[:2000]}", flush=True)
        if args.progress and cases % args.progress == 0:
            rate = cases / (time.monotonic() - started)
            print(f"{name}: {cases} cases, {rate:.0f}/s, {sum(kinds.values())} failures",
                  flush=True)  # fmt: skip
    elapsed = time.monotonic() - started
    detail = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"
    print(f"{name}: {cases} cases in {elapsed:.1f} s, {sum(kinds.values())} failures ({detail}),"
          f" {len(first)} distinct", flush=True)  # fmt: skip
    return 1 if set(kinds) - {"resource"} else 0


def run_atheris(target, name: str, args) -> int:
    import atheris
    from nnhal.tools.fuzz.corpus import write_corpus

    corpus = Path(args.corpus or f"fuzz-corpus/{name}")
    n = write_corpus(name, corpus)
    print(f"{name}: {n} seeds in {corpus}", flush=True)
    Path(args.artifacts).mkdir(parents=True, exist_ok=True)
    flags = [
        sys.argv[0],
        str(corpus),
        f"-runs={args.runs}",
        f"-seed={args.seed or 1}",
        f"-max_len={args.max_len}",
        f"-timeout={int(args.timeout)}",
        f"-artifact_prefix={args.artifacts.rstrip('/')}/",
        "-print_final_stats=1",
    ]
    started = time.monotonic()

    from nnhal.tools.fuzz.targets import FuzzFailure

    resource: Counter[str] = Counter()

    def run_one(data: bytes) -> None:
        try:
            target(data)
        except FuzzFailure as exc:
            if exc.kind != "resource":
                raise
            key = str(exc).splitlines()[0][:160]
            if key not in resource:  # needs a limit, not a fix here: note it and go on
                digest = hashlib.sha1(data).hexdigest()[:12]
                (Path(args.artifacts) / f"resource-{digest}").write_bytes(data)
                print(f"RESOURCE {name} ({digest}): {key}", flush=True)
            resource[key] += 1

    atheris.Setup(flags, run_one)
    try:
        atheris.Fuzz()
    finally:
        print(
            f"{name}: atheris ran {time.monotonic() - started:.1f} s, "
            f"{sum(resource.values())} resource cases ({len(resource)} distinct)",
            flush=True,
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=TARGET_NAMES)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", choices=("atheris", "random"), default="random")
    parser.add_argument("--max-len", type=int, default=65536)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case (a hang)")
    parser.add_argument("--corpus", help="atheris: the corpus folder")
    parser.add_argument("--artifacts", default="fuzz-artifacts", help="where failing inputs go")
    parser.add_argument("--progress", type=int, default=0, help="print every N cases")
    parser.add_argument("--memory-gib", type=float, default=4.0,
                        help="address-space limit of this process (0: none)")  # fmt: skip
    parser.add_argument("--replay", help="run one saved input and show what happens")
    args = parser.parse_args(argv)
    os.environ.setdefault("FUZZ_VECTORS", "1")
    _limit_memory(args.memory_gib)
    if args.engine == "atheris" and not args.replay:
        from nnhal.tools.optional import MissingDependency, require

        try:  # asked for by name: its absence is an error with the install hint, exit 1
            atheris = require("atheris", "--engine atheris", "fuzz")
        except MissingDependency as exc:
            print(f"python -m nnhal.tools.fuzz: error: {exc}", file=sys.stderr)
            return 1

        with atheris.instrument_imports(include=["nnhal", "driver", "fuzz"]):
            import importlib

            # the targets import these lazily: import them here so they are instrumented
            for module in _TARGET_MODULES:
                importlib.import_module(module)
            from nnhal.tools.fuzz.targets import TARGETS
    else:
        from nnhal.tools.fuzz.targets import TARGETS
    target = TARGETS[args.target]
    if args.replay:
        target(Path(args.replay).read_bytes())
        print("no failure")
        return 0
    if args.engine == "atheris":
        return run_atheris(target, args.target, args)
    return run_random(target, args.target, args)
