"""The "did you mean" for names people type (operation and operand-type names, conformance
families, workloads, profiles, TOML keys): the closest known names by ``difflib``.

Here, in the contract layer, so that every layer that takes such a name (the
builder, profiles, faults, the conformance suite, the command line) can use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` or `` (did you mean 'X' or 'Y'?)``, or "" when nothing is close.

    Case does not count: ``add`` is close to ``ADD``.
    """
    by_fold: dict[str, str] = {}
    for k in known:
        by_fold.setdefault(k.casefold(), k)
    close = difflib.get_close_matches(name.casefold(), list(by_fold), n=2, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(by_fold[c]) for c in close) + "?)"


def unknown_names(kind: str, names: Iterable[str], known: Iterable[str]) -> str:
    """One line: ``unknown <kind> 'x' (did you mean 'y'?)``, several joined by "; ".

    When nothing is close to any of them, the known names are listed instead
    (when there are few enough to read).
    """
    known = sorted(set(known))
    parts = []
    hinted = False
    for name in names:
        hint = did_you_mean(name, known)
        hinted = hinted or bool(hint)
        parts.append(f"unknown {kind} {name!r}{hint}")
    text = "; ".join(parts)
    if not hinted and len(known) <= 30:
        text += f"; known: {', '.join(known)}"
    return text
