"""Seeded property-based and coverage-guided fuzzing of the driver.

- ``data``: ``Draw``, structured choices read from the fuzzer's bytes
- ``corpus``: seed models, requests and op-package configs
- ``models``: requests for a model; semantic mutations of valid models
- ``graphs``: valid-but-nasty graphs (deep IF/WHILE, shared subgraphs,
  infinite loops, unknown shapes) with reference results, and ways to spoil them
- ``targets``: the five targets (one function of ``bytes`` each) and the invariant
- ``live``: the gRPC target: malformed bytes for every RPC of a live server
- ``runner``: ``python -m fuzz TARGET --runs N`` (atheris or seeded random mutation)

The CI tests (``tests/test_fuzz_*.py``) run every target for a short,
derandomized hypothesis run; README "Fuzzing" has the long-run commands.
"""
