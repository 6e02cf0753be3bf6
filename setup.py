"""Package layout: the repository's top-level folders install under one ``nnhal`` name.

``nnhal/`` is the HAL contract and installs as ``nnhal``; every other layer keeps
its own top-level folder in the repository but installs beneath it, so nothing
generic (``driver``, ``cts``) lands in site-packages:

    driver/  -> nnhal.driver    (the driver service, device, executor, operations)
    cts/     -> nnhal.cts       (the conformance suite)
    runtime/ -> nnhal.runtime   (the NNAPI runtime: partitioning, CPU fallback)
    importers/ -> nnhal.importers (TFLite and ONNX files to NNAPI models)
    tools/   -> nnhal.tools     (the command line, benchmarks, stress, fuzzing)
    proto/   -> nnhal.proto     (the .proto sources, shipped as package data)

Everything else is in pyproject.toml. A development checkout is installed with
``pip install -e '.[test]'``; the editable finder maps the same names.
"""

from setuptools import find_packages, setup

LAYERS = {
    "nnhal.driver": "driver",
    "nnhal.cts": "cts",
    "nnhal.runtime": "runtime",
    "nnhal.importers": "importers",
    "nnhal.tools": "tools",
    "nnhal.proto": "proto",
}


def _packages() -> list[str]:
    packages = find_packages(include=["nnhal", "nnhal.*"])
    for name, folder in LAYERS.items():
        packages.append(name)
        packages += [f"{name}.{sub}" for sub in find_packages(where=folder)]
    return packages


setup(
    packages=_packages(),
    package_dir={"": ".", **LAYERS},
    package_data={
        "nnhal": ["py.typed"],
        "nnhal.driver": ["profiles/*.toml"],
        "nnhal.proto": ["nnhal/v1_3/*.proto"],
        "nnhal.cts": ["data/nnapi/*/*.json.gz", "data/nnapi/[LNR]*"],
    },
)
