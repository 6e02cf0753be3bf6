"""Imports every operation module so that each registers its operations.

Every public module of ``nnhal.driver.ops`` is imported (helpers such as
``common`` and ``quant`` register nothing, which is harmless), so adding an
operation family is adding a module: nothing here to edit.
"""

import importlib
import pkgutil

import nnhal.driver.ops

for _module in sorted(pkgutil.iter_modules(nnhal.driver.ops.__path__), key=lambda m: m.name):
    if not _module.name.startswith("_"):
        importlib.import_module(f"nnhal.driver.ops.{_module.name}")
