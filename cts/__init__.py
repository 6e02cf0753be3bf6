"""The conformance suite: CTS/VTS-like tests for any driver that speaks nnhal's proto.

It runs as a pytest session: ``nnhal cts [--target HOST:PORT]`` (``nnhal.tools.cli_cts``),
``pytest --pyargs nnhal.cts --cts-target HOST:PORT``, or from Python
``nnhal.cts.suite.run_suite``. What lives where:

- ``dsl``, ``specs/``, ``variations``: the spec DSL, the spec library (one
  module per operation family) and the variation expansion;
- ``families/``: one module per test family (``families/__init__.py`` lists
  them); each collects ``TestCase`` objects;
- ``core``: test cases, outcomes, skip/fail; ``target``: the device under
  test and its probed capabilities; ``paths``: execution paths and the
  result checks; ``expectations``: the xfail file; ``report``: per-family
  table, JSON, coverage; ``suite``: the Python API;
- ``pytest_plugin`` (the ``pytest11`` entry point), ``pytest_options``,
  ``pytest_items``, ``recorder``: the session: options, the test cases as
  pytest items (time limits, xfail markers, the liveness probe), and the
  results gathered back from pytest's reports;
- ``fuzz_gen``: seeded random models for the fuzz family;
- ``corpus`` and ``data/nnapi/``: the shipped NNAPI corpus (Android's
  generated test models, Apache-2.0, ``data/nnapi/NOTICE``), run by default;
- ``mutations``, ``mutation_tables``: the VTS model mutations (a reusable
  generator used by the model-validation family).

The suite depends on ``nnhal`` only: the fuzz family's oracle is a second
endpoint the caller passes in (``Options.oracle``). ``nnhal cts`` (in
``nnhal.tools``) starts the in-process driver without ``--target`` and the
in-process reference oracle without ``--oracle``.
"""
