"""nnhal: an Android NN HAL 1.3 driver emulator.

This package's own modules are the HAL contract: types (``nnhal.types``), the
generated gRPC stubs (``nnhal._proto``), conversion, validation, errors, the
client and the model builder. They import nothing from the layers installed
beneath it, each from its own folder of the repository:

- ``nnhal.driver``: the emulated driver (service, device, executor, operations);
- ``nnhal.cts``: the conformance suite, against any endpoint;
- ``nnhal.tools``: the command line, benchmarks, stress and fuzzing;
- ``nnhal.proto``: the .proto sources.

docs/architecture.md draws the layers and the rules between them.
"""

from importlib import metadata as _metadata

#: Where ``nnhal serve`` listens and clients connect unless told otherwise (loopback only).
DEFAULT_ADDRESS = "127.0.0.1:50513"

try:
    __version__ = _metadata.version("nnhal")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
