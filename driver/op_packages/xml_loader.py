"""The XML ``OpDefCollection`` loader (QNN and SNPE dialects) -> ``PackageSpec``.

Both dialects share the schema; they differ in datatype names
(``QNN_DATATYPE_FLOAT_32`` vs SNPE's ``FLOAT_32`` / ``FIXED_8``), which
``spec.canonical_datatype`` folds together. Parsed with lxml so every error
names the line of the offending element.
"""

from __future__ import annotations

from typing import Any

from nnhal.driver.op_packages.spec import (
    BACKEND_SPECIFIC,
    LAYOUTS,
    RANKS,
    BackendSpec,
    ConfigError,
    OpSpec,
    PackageSpec,
    TensorOverride,
    TensorSpec,
    canonical_datatype,
    check_package,
    parse_default,
)

_TENSOR_CHILDREN = {
    "Input": {
        "Name", "Description", "Mandatory", "Constraint", "Datatype", "Shape", "Default",
        "Repeated", "IsStaticTensor",
    },
    # Default is not in the schema for outputs: accepted here to say precisely why it is wrong
    "Output": {
        "Name", "Description", "Mandatory", "Constraint", "Datatype", "Shape", "Repeated", "Default",
    },
    "Parameter": {
        "Name", "Description", "Mandatory", "Constraint", "Datatype", "Shape", "Default",
        "Enumeration",
    },
}  # fmt: skip
_OPDEF_CHILDREN = {
    "Name", "Description", "Reference", "Input", "Output", "Parameter",
    "UseDefaultTranslation", "SupportedBackend",
}  # fmt: skip
_SUPP_TENSOR_CHILDREN = {"Name", "Constraint", "Datatype", "Shape", "OnlyDefaultSupported"}
_KIND = {"Input": "input", "Output": "output", "Parameter": "param"}


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines: dict[str, int] = {}

    def fail(self, el: Any, what: str, message: str) -> ConfigError:
        return ConfigError(self.source, getattr(el, "sourceline", None), what, message)

    def children(self, el: Any) -> list[Any]:
        return [c for c in el if isinstance(c.tag, str)]  # no comments / PIs

    def check_children(self, el: Any, allowed: set[str], what: str) -> None:
        for c in self.children(el):
            if c.tag not in allowed:
                raise self.fail(
                    c,
                    f"{what} <{c.tag}>",
                    "unexpected element; expected one of " + ", ".join(sorted(allowed)),
                )

    def text(self, el: Any, tag: str, what: str, required: bool = False) -> str | None:
        found = [c for c in self.children(el) if c.tag == tag]
        if len(found) > 1:
            raise self.fail(found[1], f"{what} <{tag}>", "given more than once")
        if not found or not (found[0].text or "").strip():
            if required:
                raise self.fail(el, what, f"missing <{tag}>")
            return None
        return found[0].text.strip()

    def boolean(self, el: Any, tag: str, what: str, default: bool) -> bool:
        value = self.text(el, tag, what)
        if value is None:
            return default
        low = value.lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        node = next(c for c in self.children(el) if c.tag == tag)
        raise self.fail(node, f"{what} <{tag}>", f"{value!r} is not a boolean (true/false/1/0)")

    def datatypes(self, el: Any, what: str, required: bool) -> tuple[str, ...]:
        out = []
        for c in self.children(el):
            if c.tag != "Datatype":
                continue
            raw = (c.text or "").strip()
            if not raw:
                continue
            name = canonical_datatype(raw)
            if name is None:
                raise self.fail(
                    c,
                    f"{what} <Datatype>",
                    f"unknown datatype {raw!r}; expected a QNN_DATATYPE_* name (e.g. "
                    "QNN_DATATYPE_FLOAT_32), an SNPE name (FLOAT_32, FIXED_8, UINT_8, ...) "
                    "or BACKEND_SPECIFIC",
                )
            out.append(name)
        if required and not out:
            raise self.fail(el, what, "missing <Datatype>")
        return tuple(out)

    def shape(self, el: Any, what: str, supplemental: bool) -> tuple[str | None, str | None]:
        shapes = [c for c in self.children(el) if c.tag == "Shape"]
        if not shapes:
            return None, None
        shape = shapes[0]
        allowed = {"Layout", "Text"} if supplemental else {"Rank", "Layout", "Text"}
        self.check_children(shape, allowed, f"{what} <Shape>")
        rank = self.text(shape, "Rank", f"{what} <Shape>")
        if rank is not None and rank.upper() not in RANKS:
            node = next(c for c in self.children(shape) if c.tag == "Rank")
            raise self.fail(
                node, f"{what} <Rank>", f"{rank!r} is not a rank; expected {', '.join(RANKS)}"
            )
        layout = self.text(shape, "Layout", f"{what} <Shape>")
        if layout is not None and layout.upper() not in LAYOUTS:
            node = next(c for c in self.children(shape) if c.tag == "Layout")
            raise self.fail(
                node,
                f"{what} <Layout>",
                f"{layout!r} is not a layout; expected " + ", ".join(LAYOUTS),
            )
        return (rank.upper() if rank else None), (layout.upper() if layout else None)

    def constraints(self, el: Any) -> tuple[str, ...]:
        out = []
        for c in self.children(el):
            if c.tag == "Constraint" and (c.text or "").strip():
                kind = c.get("Type") or ""
                out.append(f"{kind}: {c.text.strip()}" if kind else c.text.strip())
        return tuple(out)

    # -- OpDef ----------------------------------------------------------

    def tensor(self, el: Any, op: str) -> TensorSpec:
        kind = _KIND[el.tag]
        what = f"OpDef {op} <{el.tag}>"
        self.check_children(el, _TENSOR_CHILDREN[el.tag], what)
        name = self.text(el, "Name", what, required=True)
        what = f"OpDef {op} {el.tag} {name!r}"
        rank, layout = self.shape(el, what, supplemental=False)
        if kind != "param" and rank == "SCALAR":
            raise self.fail(
                el, what, "inputs and outputs of a custom op need rank >= 1, not SCALAR"
            )
        default_text = self.text(el, "Default", what)
        enum = tuple(
            (e.text or "").strip()
            for c in self.children(el)
            if c.tag == "Enumeration"
            for e in self.children(c)
            if e.tag == "Enum"
        )
        mandatory = self.boolean(el, "Mandatory", what, default=kind != "param")
        default = parse_default(default_text) if default_text is not None else None
        if default is not None and mandatory and kind == "output":
            raise self.fail(el, what, "a Default on a mandatory output; outputs take no Default")
        if enum and isinstance(default, str):
            if default not in enum:
                raise self.fail(
                    el, what, f"Default {default!r} is not one of the Enumeration {list(enum)}"
                )
            default = enum.index(default)
        return TensorSpec(
            name=name,
            kind=kind,
            datatypes=self.datatypes(el, what, required=True),
            mandatory=mandatory,
            rank=rank,
            layout=layout,
            default=default,
            repeated=self.boolean(el, "Repeated", what, False) if kind != "param" else False,
            static=self.boolean(el, "IsStaticTensor", what, False) if kind == "input" else False,
            enum=enum,
            scalar=kind == "param" and rank == "SCALAR",
            constraints=self.constraints(el),
            line=el.sourceline,
        )

    def opdef(self, el: Any) -> OpSpec:
        self.check_children(el, _OPDEF_CHILDREN, "<OpDef>")
        name = self.text(el, "Name", "<OpDef>", required=True)
        tensors = [self.tensor(c, name) for c in self.children(el) if c.tag in _KIND]
        description = ""
        ref = ""
        for c in self.children(el):
            if c.tag == "Description":
                description = " ".join(
                    (d.text or "").strip() for d in self.children(c) if (d.text or "").strip()
                )
            elif c.tag == "Reference":
                ref = " ".join(v for v in (c.get("Source"), c.get("Url")) if v)
        backends = tuple(
            (c.text or "").strip()
            for c in self.children(el)
            if c.tag == "SupportedBackend" and (c.text or "").strip()
        )
        return OpSpec(
            name=name,
            inputs=tuple(t for t in tensors if t.kind == "input"),
            outputs=tuple(t for t in tensors if t.kind == "output"),
            params=tuple(t for t in tensors if t.kind == "param"),
            description=description,
            reference=ref,
            use_default_translation=self.boolean(
                el, "UseDefaultTranslation", f"OpDef {name}", False
            ),
            supported_backends=backends,
            line=el.sourceline,
        )

    # -- SupplementalOpDefList -------------------------------------------

    def supplemental_list(self, el: Any) -> BackendSpec:
        backend = (el.get("Backend") or "").strip()
        if not backend:
            raise self.fail(el, "<SupplementalOpDefList>", "missing the Backend attribute")
        what = f"SupplementalOpDefList Backend={backend!r}"
        self.check_children(el, {"SupportedOps", "SupplementalOpDef"}, what)
        supported: list[str] | None = None
        overrides: dict[str, dict[str, TensorOverride]] = {}
        for c in self.children(el):
            if c.tag == "SupportedOps":
                supported = supported or []
                self.check_children(c, {"OpName"}, f"{what} <SupportedOps>")
                for n in self.children(c):
                    op = (n.text or "").strip()
                    supported.append(op)
                    self.lines[f"supported:{backend}:{op}"] = n.sourceline
            else:
                self.check_children(c, {"Name", "Input", "Output", "Parameter"}, what)
                op = self.text(c, "Name", f"{what} <SupplementalOpDef>", required=True)
                self.lines[f"supplement:{backend}:{op}"] = c.sourceline
                tensors = overrides.setdefault(op, {})
                for t in self.children(c):
                    if t.tag not in _KIND:
                        continue
                    twhat = f"SupplementalOpDef {op} <{t.tag}> (backend {backend})"
                    self.check_children(t, _SUPP_TENSOR_CHILDREN, twhat)
                    tname = self.text(t, "Name", twhat, required=True)
                    self.lines[f"supplement:{backend}:{op}:{tname}"] = t.sourceline
                    types = self.datatypes(t, twhat, required=False)
                    if BACKEND_SPECIFIC in types:
                        raise self.fail(
                            t,
                            twhat,
                            "a SupplementalOpDef must give concrete datatypes, "
                            "not BACKEND_SPECIFIC",
                        )
                    _, layout = self.shape(t, twhat, supplemental=True)
                    tensors[tname] = TensorOverride(
                        datatypes=types,
                        layout=layout,
                        only_default=self.boolean(t, "OnlyDefaultSupported", twhat, False),
                        constraints=self.constraints(t),
                    )
        return BackendSpec(
            name=backend,
            supported_ops=None if supported is None else tuple(supported),
            overrides=overrides,
        )


def load_xml(path: str, data: bytes | None = None) -> PackageSpec:
    """Load an OpDefCollection file (raises ConfigError)."""
    from lxml import etree

    source = str(path)
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    parser = etree.XMLParser(remove_blank_text=False, resolve_entities=False, no_network=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        line = exc.position[0] if exc.position else exc.lineno
        raise ConfigError(source, line, "XML", f"not well-formed: {exc.msg}") from None
    r = _Reader(source)
    if root.tag != "OpDefCollection":
        raise r.fail(root, f"<{root.tag}>", "the root element must be <OpDefCollection>")
    attrs = {}
    for key in ("PackageName", "Domain", "Version"):
        value = (root.get(key) or "").strip()
        if not value and key != "Version":
            raise r.fail(root, "<OpDefCollection>", f"missing the {key} attribute")
        attrs[key] = value or "1.0"
    r.check_children(root, {"OpDefList", "SupplementalOpDefList"}, "<OpDefCollection>")
    lists = [c for c in r.children(root) if c.tag == "OpDefList"]
    if len(lists) != 1:
        node = lists[1] if lists else root
        raise r.fail(node, "<OpDefCollection>", f"needs exactly one <OpDefList>, has {len(lists)}")
    r.check_children(lists[0], {"OpDef"}, "<OpDefList>")
    ops = tuple(r.opdef(c) for c in r.children(lists[0]))
    if not ops:
        raise r.fail(lists[0], "<OpDefList>", "needs at least one <OpDef>")
    backends = []
    for c in r.children(root):
        if c.tag == "SupplementalOpDefList":
            b = r.supplemental_list(c)
            if any(x.name.lower() == b.name.lower() for x in backends):
                raise r.fail(c, f"SupplementalOpDefList Backend={b.name!r}", "given twice")
            backends.append(b)
    spec = PackageSpec(
        package_name=attrs["PackageName"],
        domain=attrs["Domain"],
        version=attrs["Version"],
        ops=ops,
        backends=tuple(backends),
        syntax="xml",
        source=source,
    )
    check_package(spec, r.lines)
    return spec
