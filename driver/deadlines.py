"""The HAL's time limits of one call, normalised by the rules defined here only.

- ``deadline_or_none``: an absolute deadline (``time.monotonic_ns()``), or None when
  there is none: absent, or "unlimited" (at or beyond ``TIME_POINT_MAX_NS``);
- ``deadline_passed``: whether a deadline is already behind us;
- ``effective_loop_timeout``: ``loopTimeoutDuration``: None is the 2 s default, a
  negative value INVALID_ARGUMENT, above the HAL maximum of 15 s the maximum (logged).

An execution's limits are normalised once, where it enters the driver
(``PreparedModel.execute``, or ``CompiledModel.run`` for in-process callers of the
executor), and passed down as they are.
"""

from __future__ import annotations

import logging
import time

from nnhal.errors import InvalidArgument
from nnhal.types import LOOP_TIMEOUT_DEFAULT_NS, LOOP_TIMEOUT_MAXIMUM_NS, TIME_POINT_MAX_NS

log = logging.getLogger("nnhal.driver")


def deadline_or_none(deadline_ns: int | None) -> int | None:
    """``deadline_ns``, or None when it is absent or "unlimited"."""
    if deadline_ns is None or deadline_ns >= TIME_POINT_MAX_NS:
        return None
    return deadline_ns


def deadline_passed(deadline_ns: int | None, now_ns: int | None = None) -> bool:
    """True when an absolute monotonic deadline is already behind us."""
    deadline_ns = deadline_or_none(deadline_ns)
    if deadline_ns is None:
        return False
    return (time.monotonic_ns() if now_ns is None else now_ns) >= deadline_ns


def effective_loop_timeout(loop_timeout_ns: int | None) -> int:
    """loopTimeoutDuration: None -> 2 s; negative -> INVALID_ARGUMENT; above 15 s -> 15 s."""
    if loop_timeout_ns is None:
        return LOOP_TIMEOUT_DEFAULT_NS
    if loop_timeout_ns < 0:
        raise InvalidArgument(f"loopTimeoutDuration {loop_timeout_ns} ns is negative")
    if loop_timeout_ns > LOOP_TIMEOUT_MAXIMUM_NS:
        # The HAL leaves this case to the driver; the runtime clamps before calling
        # the HAL, and so do we rather than reject a request the runtime would accept.
        log.warning(
            "loopTimeoutDuration %d ns exceeds the HAL maximum %d ns (15 s); using the maximum",
            loop_timeout_ns,
            LOOP_TIMEOUT_MAXIMUM_NS,
        )
        return LOOP_TIMEOUT_MAXIMUM_NS
    return loop_timeout_ns
