"""The AOSP sample drivers' support rules as a backend wrapper (profile keys
``include_operations``, ``first_input_types``, ``type_input``).

``sample_rules(backend, profile)`` returns ``backend`` itself when the
profile sets none of these keys; otherwise a ``SampleRuleBackend`` that first
applies ``Profile.sample_rule`` to each non-control-flow operation, then asks
the wrapped backend. IF and WHILE are left to the recursive rule of
``nnhal.driver.support`` (supported exactly when everything they reference is),
which is where nnhal deliberately differs from the samples: they judge an IF
by its first input (a TENSOR_BOOL8 condition) and so never support it.
"""

from __future__ import annotations

from typing import Any

from nnhal.driver.backends import OpQuery


class SampleRuleBackend:
    def __init__(self, inner: Any, profile: Any) -> None:
        self.inner = inner
        self.profile = profile
        self.name = getattr(inner, "name", "reference")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def supports(self, query: OpQuery) -> tuple[bool, str]:
        if not query.is_control_flow:
            types = [None if info.omitted else info.type for info in query.inputs]
            reason = self.profile.sample_rule(query.type, types)
            if reason is not None:
                return False, reason
        return self.inner.supports(query)


def sample_rules(backend: Any, profile: Any) -> Any:
    if profile.include_operations is None and profile.first_input_types is None:
        return backend
    return SampleRuleBackend(backend, profile)
