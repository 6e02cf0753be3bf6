"""``Draw``: structured choices read from a byte string.

Every fuzz target takes one ``bytes`` argument, so that atheris (coverage
guided, mutating bytes), hypothesis (``st.binary()``, shrinking bytes) and a
plain seeded random run all drive the same function. Targets that need
structure (a model, a graph, a request) read it through a ``Draw``: each call
consumes a few bytes and maps them onto the range asked for. When the bytes
run out every call returns the smallest choice (0, False, the first element),
so *any* byte string is a valid case and short inputs give small cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class Draw:
    """Reads integers, booleans, choices and raw bytes from ``data`` in order."""

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    @property
    def exhausted(self) -> bool:
        return self.pos >= len(self.data)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        value = self.data[self.pos]
        self.pos += 1
        return value

    def int(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (both included)."""
        if hi <= lo:
            return lo
        span = hi - lo + 1
        value = 0
        for _ in range((span.bit_length() + 7) // 8):
            value = (value << 8) | self.byte()
        return lo + value % span

    def bool(self, percent: int = 50) -> bool:
        """True with about ``percent`` % probability (False when exhausted)."""
        return self.byte() * 100 < percent * 256 if not self.exhausted else False

    def choice(self, items: Sequence[T]) -> T:
        return items[self.int(0, len(items) - 1)]

    def bytes(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += len(chunk)
        return chunk + bytes(n - len(chunk))

    def rest(self) -> bytes:
        chunk = self.data[self.pos :]
        self.pos = len(self.data)
        return chunk

    def nasty_int(self, bits: int = 32, signed: bool = False) -> int:
        """Mostly small values, sometimes the edges of a ``bits``-wide integer."""
        kind = self.int(0, 7)
        lo = -(1 << (bits - 1)) if signed else 0
        hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        if kind <= 3:
            return self.int(max(lo, -4), min(hi, 8))
        if kind == 4:
            return self.choice([lo, hi, hi - 1, lo + 1, 0, 1 << (bits // 2)])
        if kind == 5:
            return self.int(lo, hi)
        if kind == 6:
            return self.int(0, 255)
        return self.choice([-1, 1 << 31, (1 << 31) - 1, 1 << 32, 65535, 65536])
