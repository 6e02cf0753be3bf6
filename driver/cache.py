"""Compilation caching (HAL 1.2/1.3: prepareModel_1_3 with a token, prepareModelFromCache_1_3).

The device asks for one model cache and one data cache file
(``getNumberOfCacheFilesNeeded`` = (1, 1)). nnhal's cache handles are paths
on the server's host (the HAL's fds); a handle must hold exactly one path.

What is stored (no pickle, nothing executable):

- data cache: ``b"NNHALDC1"`` + the model's ``operandValues`` (CONSTANT_COPY data);
- model cache: ``b"NNHALMC1"``, a 32-byte HMAC-SHA256 tag, then three
  length-prefixed (u64 little-endian) sections: a JSON header (format,
  device fingerprint, preference, priority), the model as a protobuf
  ``nnhal.v1_3.Model`` with ``operandValues`` left out and every pool inlined,
  and nothing else. The tag covers a domain string, the 32-byte token, both
  lengths-prefixed sections and the SHA-256 of the data cache, under a key of
  this installation (``$NNHAL_CACHE_KEY_FILE``, default
  ``~/.cache/nnhal/cache-key``, 32 random bytes made on first use, mode 0600;
  a per-process key when it cannot be stored).

So a wrong token, a flipped bit or a truncated/appended file in either cache,
another model's cache or another device profile's cache fails the tag check:
exactly GENERAL_FAILURE, never a wrong model. Files are read once into memory
and the bytes checked are the bytes used (no time-of-check/time-of-use gap).
Because the tag proves that this device validated and fully supported the
model when it wrote the cache, ``load`` skips validation and the support
decision and goes straight to compilation.

A device with op packages does not cache: its kernels come from
the packages at compile time. Saving follows the HAL: cache arguments never change the outcome of a
preparation (wrong counts, a handle with 0 or 2 paths, a file that cannot be
written, a token that is not 32 bytes: the model is prepared and simply not
cached; the reason is logged). Loading with bad arguments is INVALID_ARGUMENT
(counts, handle shape, token size) or GENERAL_FAILURE (unreadable or
unauthenticated files).

nnhal extension: a server-side cache directory (``nnhal serve --cache-dir``).
When it is set, a preparation with a token and *no* cache handles stores the
cache there as ``<token hex>.model`` / ``<token hex>.data``, and
prepareModelFromCache_1_3 with a token and no handles loads from it (clients
on another host can cache too). With handles, the handles win.

Cache files are opened by ``nnhal.driver.cache_paths``: regular files with one
hard link only, no final symbolic link, read up to ``max_cache_file_bytes``
(a profile limit); a cache is written into a file created exclusively, or an
existing one only when it is empty or an nnhal cache already (anything else is
left unchanged and the model is simply not cached). A server sets
``allowed_roots`` (``nnhal serve --cache-root``; without it, none): client-given
files must lie inside those directories, else INVALID_ARGUMENT (loading) or
no caching (saving). The in-process ``Device`` API (no server) takes any path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
import secrets
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnhal.driver.cache_paths import confine, create_cache_file, read_cache_file
from nnhal.driver.deadlines import deadline_passed
from nnhal.driver.limits import limits_of

from nnhal import convert as cv
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.errors import GeneralFailure, HalError, InvalidArgument, MissedDeadline
from nnhal.types import InlineMemory, Model

log = logging.getLogger("nnhal.driver.cache")

TOKEN_SIZE = 32  # BYTE_SIZE_OF_CACHE_TOKEN
NUM_MODEL_CACHE = 1
NUM_DATA_CACHE = 1
_MODEL_MAGIC = b"NNHALMC1"
_DATA_MAGIC = b"NNHALDC1"
_DOMAIN = b"nnhal compilation cache v1\0"
_FORMAT = 1
_U64 = struct.Struct("<Q")

Handles = Sequence[Sequence[str]]

_process_key: bytes | None = None


def key_path() -> Path:
    env = os.environ.get("NNHAL_CACHE_KEY_FILE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "nnhal" / "cache-key"


def install_key() -> bytes:
    """This installation's MAC key (made once; per-process if it cannot be stored)."""
    global _process_key
    if _process_key is not None:
        return _process_key
    path = key_path()
    try:
        data = path.read_bytes()
        if len(data) == TOKEN_SIZE:
            _process_key = data
            return data
        log.warning("cache key %s has %d bytes, not %d: ignored", path, len(data), TOKEN_SIZE)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot read cache key %s: %s", path, exc)
    key = secrets.token_bytes(TOKEN_SIZE)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
    except FileExistsError:  # another process made it first: use theirs
        data = path.read_bytes()
        if len(data) == TOKEN_SIZE:
            key = data
    except OSError as exc:
        log.warning(
            "cannot store cache key %s (%s): caches are valid in this process only", path, exc
        )
    _process_key = key
    return key


def device_fingerprint(device: Any) -> str:
    """What must match for a cache to be reused: device name, version and profile rules."""
    profile = getattr(device, "profile", None)
    parts = [
        str(getattr(device, "name", "")),
        str(getattr(profile, "versionString", "")),
        ",".join(map(str, sorted(getattr(profile, "exclude_operations", ()) or ()))),
        ",".join(map(str, sorted(getattr(profile, "operand_types", None) or ()))),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _tag(key: bytes, token: bytes, header: bytes, model: bytes, data: bytes) -> bytes:
    mac = hmac.new(key, _DOMAIN, hashlib.sha256)
    mac.update(token)
    for part in (header, model):
        mac.update(_U64.pack(len(part)))
        mac.update(part)
    mac.update(_U64.pack(len(data)))
    mac.update(hashlib.sha256(data).digest())
    return mac.digest()


def _inline_pools(model: Model, pool_views: Sequence[memoryview]) -> Model:
    pools = tuple(InlineMemory(bytes(view)) for view in pool_views)
    return dataclasses.replace(model, operandValues=b"", pools=pools)


def _single_paths(handles: Handles, count: int, what: str) -> list[str]:
    if len(handles) != count:
        raise InvalidArgument(f"{what}: {len(handles)} handles given; this device needs {count}")
    paths = []
    for k, handle in enumerate(handles):
        if len(handle) != 1:
            raise InvalidArgument(
                f"{what}[{k}]: a cache handle holds exactly one file; it has {len(handle)}"
            )
        paths.append(str(handle[0]))
    return paths


class CompilationCache:
    """Saves and loads prepared models for one device (thread-safe: no mutable state)."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        # where client-given cache files may be; None = anywhere (driver/cache_paths.py)
        self.allowed_roots: tuple[str, ...] | None = None
        if self.cache_dir is not None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def files_needed() -> tuple[int, int]:
        return NUM_MODEL_CACHE, NUM_DATA_CACHE

    def _paths(
        self, model_cache: Handles, data_cache: Handles, token: bytes, what: str
    ) -> tuple[str, str] | None:
        """The (model, data) cache paths for these arguments; None = no caching info."""
        if not model_cache and not data_cache:
            if self.cache_dir is None or len(token) != TOKEN_SIZE:
                return None
            stem = self.cache_dir / token.hex()
            return str(stem.with_suffix(".model")), str(stem.with_suffix(".data"))
        if len(token) != TOKEN_SIZE:
            raise InvalidArgument(
                f"{what}: the token has {len(token)} bytes; it must have {TOKEN_SIZE}"
            )
        (model_path,) = _single_paths(model_cache, NUM_MODEL_CACHE, f"{what}: modelCache")
        (data_path,) = _single_paths(data_cache, NUM_DATA_CACHE, f"{what}: dataCache")
        if self.allowed_roots is not None:
            model_path = confine(model_path, self.allowed_roots, f"{what}: modelCache")
            data_path = confine(data_path, self.allowed_roots, f"{what}: dataCache")
        return model_path, data_path

    # -- saving ----------------------------------------------------------

    def save(
        self,
        device: Any,
        prepared: Any,
        pool_views: Sequence[memoryview],
        model_cache: Handles,
        data_cache: Handles,
        token: bytes,
    ) -> bool:
        """Write the cache of a prepared model; any problem is logged, never raised."""
        try:
            paths = self._paths(model_cache, data_cache, bytes(token), "prepareModel_1_3")
        except InvalidArgument as exc:
            log.info("not caching: %s", exc.message)
            return False
        if paths is None:
            return False
        if getattr(device, "extensions", None):
            # op packages compile with their own kernels (driver/extensions.py): not cached
            log.info("not caching: device %s has op packages", getattr(device, "name", "?"))
            return False
        try:
            model_bytes, data_bytes = self.serialize(device, prepared, pool_views, bytes(token))
            roots = None if not model_cache else self.allowed_roots
            for path, content, magic in zip(
                paths, (model_bytes, data_bytes), (_MODEL_MAGIC, _DATA_MAGIC)
            ):
                # created exclusively, or an empty / nnhal cache file of ours (a read-only
                # or foreign file means "do not cache": it is left unchanged)
                with create_cache_file(path, magic, roots) as f:
                    f.write(content)
            return True
        except (OSError, HalError, ValueError) as exc:
            log.info("not caching: %s", exc)
            return False

    def serialize(
        self, device: Any, prepared: Any, pool_views: Sequence[memoryview], token: bytes
    ) -> tuple[bytes, bytes]:
        model = prepared.model
        header = json.dumps(
            {
                "format": _FORMAT,
                "device": device_fingerprint(device),
                "preference": int(prepared.preference),
                "priority": int(prepared.priority),
            },
            sort_keys=True,
        ).encode()
        body = cv.model_to_pb(_inline_pools(model, pool_views)).SerializeToString()
        data = bytes(model.operandValues)
        tag = _tag(install_key(), token, header, body, data)
        parts = [_MODEL_MAGIC, tag, _U64.pack(len(header)), header, _U64.pack(len(body)), body]
        return b"".join(parts), _DATA_MAGIC + data

    # -- loading ---------------------------------------------------------

    def load(
        self,
        device: Any,
        model_cache: Handles,
        data_cache: Handles,
        token: bytes,
        deadline_ns: int | None = None,
    ) -> Any:
        """prepareModelFromCache_1_3: a PreparedModel, or a HalError."""
        token = bytes(token)
        paths = self._paths(model_cache, data_cache, token, "prepareModelFromCache_1_3")
        if paths is None:
            raise InvalidArgument(
                "prepareModelFromCache_1_3: no cache handles given (this device needs "
                f"{NUM_MODEL_CACHE} model and {NUM_DATA_CACHE} data cache files"
                + ("" if self.cache_dir is None else f", or a {TOKEN_SIZE}-byte token")
                + ")"
            )
        if getattr(device, "extensions", None):
            raise GeneralFailure(
                "prepareModelFromCache_1_3: a device with op packages does not cache "
                "compilations (its kernels come from the packages)"
            )
        contents = []
        max_bytes = limits_of(device).max_cache_file_bytes
        for path, what in zip(paths, ("model cache", "data cache")):
            try:
                roots = None if not model_cache else self.allowed_roots
                contents.append(read_cache_file(path, roots, max_bytes))
            except OSError as exc:
                raise GeneralFailure(
                    f"prepareModelFromCache_1_3: cannot read the {what} {path}: {exc}"
                ) from None
        header, body, data = self._verify(device, contents[0], contents[1], token, paths)
        if deadline_passed(deadline_ns):
            raise MissedDeadline(
                "prepareModelFromCache_1_3: the deadline had passed", transient=False
            )
        return self.rebuild(header, body, data, limits_of(device).max_tensor_bytes)

    def _verify(
        self, device: Any, model_file: bytes, data_file: bytes, token: bytes, paths: Sequence[str]
    ) -> tuple[dict, bytes, bytes]:
        def bad(why: str) -> GeneralFailure:
            return GeneralFailure(
                f"prepareModelFromCache_1_3: the model cache {paths[0]} / data cache {paths[1]} "
                f"cannot be used: {why}"
            )

        if not model_file.startswith(_MODEL_MAGIC) or not data_file.startswith(_DATA_MAGIC):
            raise bad("not an nnhal cache file (bad magic)")
        pos = len(_MODEL_MAGIC)
        tag = model_file[pos : pos + 32]
        pos += 32
        sections = []
        for _ in range(2):
            if pos + 8 > len(model_file):
                raise bad("truncated")
            (n,) = _U64.unpack_from(model_file, pos)
            pos += 8
            if pos + n > len(model_file):
                raise bad("truncated")
            sections.append(model_file[pos : pos + n])
            pos += n
        if pos != len(model_file):
            raise bad(f"{len(model_file) - pos} bytes after the end of the cache")
        header, body = sections
        data = data_file[len(_DATA_MAGIC) :]
        expected = _tag(install_key(), token, header, body, data)
        if not hmac.compare_digest(tag, expected):
            raise bad("authentication failed (wrong token, modified or foreign cache)")
        info = json.loads(header)
        if info.get("format") != _FORMAT or info.get("device") != device_fingerprint(device):
            raise bad("written by another device profile or format")
        return info, body, data

    @staticmethod
    def rebuild(header: dict, body: bytes, data: bytes, max_tensor_bytes: int | None = None) -> Any:
        """Compile an authenticated cache (validation and support were proven when saved)."""
        from nnhal.driver.executor import compile_model
        from nnhal.driver.executor.operands import map_model_pools
        from nnhal.driver.prepared_model import PreparedModel

        model = cv.model_from_pb(tpb.Model.FromString(body))
        model = dataclasses.replace(model, operandValues=data)
        compiled = compile_model(
            model, pool_views=map_model_pools(model), max_tensor_bytes=max_tensor_bytes
        )
        return PreparedModel(
            model,
            compiled,
            preference=header["preference"],
            priority=header["priority"],
            max_tensor_bytes=max_tensor_bytes,
        )
