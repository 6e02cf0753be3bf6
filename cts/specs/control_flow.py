"""Specs: IF and WHILE situations (hal13.md §3; the foundation issue's list).

IF with a constant, a computed and an input condition, both branches naming
the same subgraph, a NO_VALUE condition (must fail at execution); WHILE with
input-output, state-only and input-only values, loops that run zero times
(also from constant initial values), a WHILE inside a WHILE body, an IF
inside a WHILE inside an IF, IF nested three deep, and a Fibonacci loop on
FULLY_CONNECTED. Loop timeouts and the support rule are not specs: they are
the control-flow family (``nnhal.cts.families.control_flow``).
"""

from nnhal.cts.dsl import BOOL8, F32, FLOAT_AND_QUANT8, I32, spec

Q = (0.5, 128)


def _branch_add(g, name="then"):
    """x + y -> out, on [2] float tensors."""
    x, y = g.input("x", F32, [2]), g.input("y", F32, [2])
    out = g.output("out", F32, [2])
    g.op("ADD", [x, y, g.int32(0)], [out])


def _branch_sub(g):
    x, y = g.input("x", F32, [2]), g.input("y", F32, [2])
    out = g.output("out", F32, [2])
    g.op("SUB", [x, y, g.int32(0)], [out])


def _if_constant(value: bool):
    @spec(f"if_constant_{str(value).lower()}", variations=FLOAT_AND_QUANT8, quant=Q)
    def build(s):
        then, other = s.subgraph("then"), s.subgraph("else")
        _branch_add(then)
        _branch_sub(other)
        x, y = s.input("x", F32, [2]), s.input("y", F32, [2])
        out = s.output("out", F32, [2])
        cond = s.const("cond", BOOL8, [value], [1])
        s.op("IF", [cond, s.ref(then), s.ref(other), x, y], [out])
        s.example({x: [1, 2], y: [3, -4]}, {out: [4, -2] if value else [-2, 6]})

    build.description = f"IF with a constant {value} condition"
    return build


@spec("if_computed_condition", variations=FLOAT_AND_QUANT8, quant=Q)
def if_computed_condition(s):
    """IF(LESS(a, b)): then x * 2, else x - 1."""
    then, other = s.subgraph("then"), s.subgraph("else")
    tx = then.input("x", F32, [2])
    tout = then.output("out", F32, [2])
    then.op("MUL", [tx, then.const("two", F32, [2], [1]), then.int32(0)], [tout])
    ex = other.input("x", F32, [2])
    eout = other.output("out", F32, [2])
    other.op("SUB", [ex, other.const("one", F32, [1], [1]), other.int32(0)], [eout])
    a, b, x = s.input("a", F32, [1]), s.input("b", F32, [1]), s.input("x", F32, [2])
    cond = s.temp("cond", BOOL8, [1])
    out = s.output("out", F32, [2])
    s.op("LESS", [a, b], [cond])
    s.op("IF", [cond, s.ref(then), s.ref(other), x], [out])
    s.example({a: [1], b: [2], x: [3, -4.5]}, {out: [6, -9]}, name="then")
    s.example({a: [2], b: [1], x: [3, -4.5]}, {out: [2, -5.5]}, name="else")


@spec("if_condition_input", variations=FLOAT_AND_QUANT8, quant=Q)
def if_condition_input(s):
    """IF on a BOOL8 [1] model input: then x + x, else x * x."""
    then, other = s.subgraph("then"), s.subgraph("else")
    tx = then.input("x", F32, [3])
    tout = then.output("out", F32, [3])
    then.op("ADD", [tx, tx, then.int32(0)], [tout])
    ex = other.input("x", F32, [3])
    eout = other.output("out", F32, [3])
    other.op("MUL", [ex, ex, other.int32(0)], [eout])
    c, x = s.input("cond", BOOL8, [1]), s.input("x", F32, [3])
    out = s.output("out", F32, [3])
    s.op("IF", [c, s.ref(then), s.ref(other), x], [out])
    s.example({c: [True], x: [1, -2, 3]}, {out: [2, -4, 6]}, name="true")
    s.example({c: [False], x: [1, -2, 3]}, {out: [1, 4, 9]}, name="false")


@spec("if_same_branch", variations=FLOAT_AND_QUANT8, quant=Q)
def if_same_branch(s):
    """IF whose then and else operands name the same subgraph."""
    branch = s.subgraph("branch")
    _branch_add(branch)
    c, x, y = s.input("cond", BOOL8, [1]), s.input("x", F32, [2]), s.input("y", F32, [2])
    out = s.output("out", F32, [2])
    s.op("IF", [c, s.ref(branch), s.ref(branch), x, y], [out])
    s.example({c: [True], x: [1, 2], y: [3, 4]}, {out: [4, 6]}, name="true")
    s.example({c: [False], x: [1, 2], y: [3, 4]}, {out: [4, 6]}, name="false")


@spec("if_no_value_condition", expect_failure=True)
def if_no_value_condition(s):
    """IF whose condition operand is NO_VALUE: preparing may succeed, executing must fail."""
    then, other = s.subgraph("then"), s.subgraph("else")
    _branch_add(then)
    _branch_sub(other)
    x, y = s.input("x", F32, [2]), s.input("y", F32, [2])
    out = s.output("out", F32, [2])
    cond = s.no_value(BOOL8, [1], "cond")
    s.op("IF", [cond, s.ref(then), s.ref(other), x, y], [out])
    s.example({x: [1, 2], y: [3, 4]}, {out: [4, 6]})


def _counter_cond(g, extra_inputs):
    """cond(i, ..., n, ...) = LESS(i, n); ``extra_inputs`` declares the rest in order."""
    refs = extra_inputs(g)
    flag = g.output("flag", BOOL8, [1])
    g.op("LESS", [refs["i"], refs["n"]], [flag])


def _sum_inputs(g):
    return {
        "i": g.input("i", I32, [1]),
        "acc": g.input("acc", F32, [2]),
        "n": g.input("n", I32, [1]),
        "x": g.input("x", F32, [2]),
    }


def _sum_body(g):
    r = _sum_inputs(g)
    i2, acc2 = g.output("i_next", I32, [1]), g.output("acc_next", F32, [2])
    g.op("ADD", [r["i"], g.const("one", I32, [1], [1]), g.int32(0)], [i2])
    g.op("ADD", [r["acc"], r["x"], g.int32(0)], [acc2])


@spec("while_sum", variations=FLOAT_AND_QUANT8, quant=Q)
def while_sum(s):
    """WHILE i < n: i += 1, acc += x (2 input-output values, 2 input-only values)."""
    cond, body = s.subgraph("cond"), s.subgraph("body")
    _counter_cond(cond, _sum_inputs)
    _sum_body(body)
    i, acc, n, x = (
        s.input("i", I32, [1]),
        s.input("acc", F32, [2]),
        s.input("n", I32, [1]),
        s.input("x", F32, [2]),
    )
    i_out, acc_out = s.output("i_out", I32, [1]), s.output("acc_out", F32, [2])
    s.op("WHILE", [s.ref(cond), s.ref(body), i, acc, n, x], [i_out, acc_out])
    s.example({i: [0], acc: [1, -1], n: [3], x: [0.5, 2]}, {i_out: [3], acc_out: [2.5, 5]})
    s.example(
        {i: [0], acc: [1, -1], n: [0], x: [0.5, 2]},
        {i_out: [0], acc_out: [1, -1]},
        name="zero_trip",
    )


@spec("while_zero_trip_constant_init", variations=FLOAT_AND_QUANT8, quant=Q)
def while_zero_trip_constant_init(s):
    """A loop that runs zero times on constant initial values: outputs are copies of them."""
    cond, body = s.subgraph("cond"), s.subgraph("body")
    _counter_cond(cond, _sum_inputs)
    _sum_body(body)
    i = s.const("i0", I32, [5], [1])
    acc = s.const("acc0", F32, [7, -7.5], [2])
    n, x = s.input("n", I32, [1]), s.input("x", F32, [2])
    i_out, acc_out = s.output("i_out", I32, [1]), s.output("acc_out", F32, [2])
    s.op("WHILE", [s.ref(cond), s.ref(body), i, acc, n, x], [i_out, acc_out])
    s.example({n: [5], x: [1, 1]}, {i_out: [5], acc_out: [7, -7.5]})


def _state_inputs(g):
    return {
        "acc": g.input("acc", F32, [2]),
        "i": g.input("i", I32, [1]),
        "n": g.input("n", I32, [1]),
        "x": g.input("x", F32, [2]),
    }


@spec("while_state_only", variations=FLOAT_AND_QUANT8, quant=Q)
def while_state_only(s):
    """WHILE with a state-only counter: the body has more outputs than the WHILE."""
    cond, body = s.subgraph("cond"), s.subgraph("body")
    _counter_cond(cond, _state_inputs)
    r = _state_inputs(body)
    acc2, i2 = body.output("acc_next", F32, [2]), body.output("i_next", I32, [1])
    body.op("ADD", [r["acc"], r["x"], body.int32(0)], [acc2])
    body.op("ADD", [r["i"], body.const("one", I32, [1], [1]), body.int32(0)], [i2])
    acc, n, x = s.input("acc", F32, [2]), s.input("n", I32, [1]), s.input("x", F32, [2])
    i0 = s.const("i0", I32, [0], [1])
    out = s.output("acc_out", F32, [2])
    s.op("WHILE", [s.ref(cond), s.ref(body), acc, i0, n, x], [out])
    s.example({acc: [0, 1], n: [4], x: [1.5, -2]}, {out: [6, -7]})


def _nested_inputs(g):
    return {
        "i": g.input("i", I32, [1]),
        "acc": g.input("acc", F32, [1]),
        "n": g.input("n", I32, [1]),
        "m": g.input("m", I32, [1]),
        "x": g.input("x", F32, [1]),
    }


def _inner_inputs(g):
    return {
        "j": g.input("j", I32, [1]),
        "acc": g.input("acc", F32, [1]),
        "m": g.input("m", I32, [1]),
        "x": g.input("x", F32, [1]),
    }


@spec("while_nested", variations=FLOAT_AND_QUANT8, quant=Q)
def while_nested(s):
    """A WHILE inside a WHILE body: acc += x, n * m times."""
    inner_cond, inner_body = s.subgraph("inner_cond"), s.subgraph("inner_body")
    r = _inner_inputs(inner_cond)
    f = inner_cond.output("flag", BOOL8, [1])
    inner_cond.op("LESS", [r["j"], r["m"]], [f])
    r = _inner_inputs(inner_body)
    j2, acc2 = inner_body.output("j_next", I32, [1]), inner_body.output("acc_next", F32, [1])
    inner_body.op(
        "ADD", [r["j"], inner_body.const("one", I32, [1], [1]), inner_body.int32(0)], [j2]
    )
    inner_body.op("ADD", [r["acc"], r["x"], inner_body.int32(0)], [acc2])

    outer_cond, outer_body = s.subgraph("outer_cond"), s.subgraph("outer_body")
    _counter_cond(outer_cond, _nested_inputs)
    r = _nested_inputs(outer_body)
    i2, acc2 = outer_body.output("i_next", I32, [1]), outer_body.output("acc_next", F32, [1])
    outer_body.op(
        "ADD", [r["i"], outer_body.const("one", I32, [1], [1]), outer_body.int32(0)], [i2]
    )
    j_end = outer_body.temp("j_end", I32, [1])
    outer_body.op(
        "WHILE",
        [
            outer_body.ref(inner_cond),
            outer_body.ref(inner_body),
            outer_body.const("j0", I32, [0], [1]),
            r["acc"],
            r["m"],
            r["x"],
        ],
        [j_end, acc2],
    )

    i, acc = s.input("i", I32, [1]), s.input("acc", F32, [1])
    n, m, x = s.input("n", I32, [1]), s.input("m", I32, [1]), s.input("x", F32, [1])
    i_out, acc_out = s.output("i_out", I32, [1]), s.output("acc_out", F32, [1])
    s.op("WHILE", [s.ref(outer_cond), s.ref(outer_body), i, acc, n, m, x], [i_out, acc_out])
    s.example({i: [0], acc: [0], n: [3], m: [4], x: [0.5]}, {i_out: [3], acc_out: [6]})
    s.example(
        {i: [0], acc: [1], n: [2], m: [0], x: [0.5]},
        {i_out: [2], acc_out: [1]},
        name="inner_zero_trip",
    )


@spec("if_while_if", variations=FLOAT_AND_QUANT8, quant=Q)
def if_while_if(s):
    """IF inside a WHILE body inside an IF branch.

    then: WHILE i < n { acc = IF(acc < limit) ? acc + x : acc - x; i += 1 }; else: acc.
    """
    inner_then, inner_else = s.subgraph("inner_then"), s.subgraph("inner_else")
    for g, op in ((inner_then, "ADD"), (inner_else, "SUB")):
        a, x = g.input("acc", F32, [1]), g.input("x", F32, [1])
        out = g.output("out", F32, [1])
        g.op(op, [a, x, g.int32(0)], [out])

    def loop_inputs(g):
        return {
            "i": g.input("i", I32, [1]),
            "acc": g.input("acc", F32, [1]),
            "n": g.input("n", I32, [1]),
            "x": g.input("x", F32, [1]),
            "limit": g.input("limit", F32, [1]),
        }

    cond, body = s.subgraph("cond"), s.subgraph("body")
    _counter_cond(cond, loop_inputs)
    r = loop_inputs(body)
    i2, acc2 = body.output("i_next", I32, [1]), body.output("acc_next", F32, [1])
    body.op("ADD", [r["i"], body.const("one", I32, [1], [1]), body.int32(0)], [i2])
    below = body.temp("below", BOOL8, [1])
    body.op("LESS", [r["acc"], r["limit"]], [below])
    body.op("IF", [below, body.ref(inner_then), body.ref(inner_else), r["acc"], r["x"]], [acc2])

    outer_then, outer_else = s.subgraph("outer_then"), s.subgraph("outer_else")
    r = loop_inputs(outer_then)
    t_out = outer_then.output("out", F32, [1])
    i_end = outer_then.temp("i_end", I32, [1])
    outer_then.op(
        "WHILE",
        [outer_then.ref(cond), outer_then.ref(body), r["i"], r["acc"], r["n"], r["x"], r["limit"]],
        [i_end, t_out],
    )
    r = loop_inputs(outer_else)
    e_out = outer_else.output("out", F32, [1])
    outer_else.op(
        "ADD", [r["acc"], outer_else.const("zero", F32, [0], [1]), outer_else.int32(0)], [e_out]
    )

    c = s.input("cond", BOOL8, [1])
    i, acc, n = s.input("i", I32, [1]), s.input("acc", F32, [1]), s.input("n", I32, [1])
    x, limit = s.input("x", F32, [1]), s.input("limit", F32, [1])
    out = s.output("out", F32, [1])
    s.op("IF", [c, s.ref(outer_then), s.ref(outer_else), i, acc, n, x, limit], [out])
    # acc: 0 -> 2 -> 4 -> 6 (not below 5: -2) -> 4 -> 6
    s.example({c: [True], i: [0], acc: [0], n: [5], x: [2], limit: [5]}, {out: [6]}, name="then")
    s.example(
        {c: [False], i: [0], acc: [1.5], n: [5], x: [2], limit: [5]}, {out: [1.5]}, name="else"
    )


@spec("if_nested_three_deep", variations=FLOAT_AND_QUANT8, quant=Q)
def if_nested_three_deep(s):
    """IF in IF in IF; each level picks x + 1 or descends on the same condition."""
    leaf_then, leaf_else = s.subgraph("leaf_then"), s.subgraph("leaf_else")
    for g, value in ((leaf_then, 1), (leaf_else, -1)):
        c, x = g.input("c", BOOL8, [1]), g.input("x", F32, [2])
        out = g.output("out", F32, [2])
        g.op("ADD", [x, g.const("d", F32, [value], [1]), g.int32(0)], [out])
    below = (leaf_then, leaf_else)
    for level in range(2):
        then, other = s.subgraph(f"l{level}_then"), s.subgraph(f"l{level}_else")
        for g in (then, other):
            c, x = g.input("c", BOOL8, [1]), g.input("x", F32, [2])
            out = g.output("out", F32, [2])
            g.op("IF", [c, g.ref(below[0]), g.ref(below[1]), c, x], [out])
        below = (then, other)
    c, x = s.input("cond", BOOL8, [1]), s.input("x", F32, [2])
    out = s.output("out", F32, [2])
    s.op("IF", [c, s.ref(below[0]), s.ref(below[1]), c, x], [out])
    s.example({c: [True], x: [1, 2]}, {out: [2, 3]}, name="true")
    s.example({c: [False], x: [1, 2]}, {out: [0, 1]}, name="false")


@spec("while_fibonacci", variations=("float16", "relaxed"))
def while_fibonacci(s):
    """Fibonacci with FULLY_CONNECTED in a WHILE body: state [1, 2] -> state x [[0, 1], [1, 1]]."""

    def inputs(g):
        return {
            "state": g.input("state", F32, [1, 2]),
            "i": g.input("i", I32, [1]),
            "n": g.input("n", I32, [1]),
        }

    cond, body = s.subgraph("cond"), s.subgraph("body")
    _counter_cond(cond, inputs)
    r = inputs(body)
    st2, i2 = body.output("state_next", F32, [1, 2]), body.output("i_next", I32, [1])
    w = body.const("w", F32, [0, 1, 1, 1], [2, 2])
    b = body.const("b", F32, [0, 0], [2])
    body.op("FULLY_CONNECTED", [r["state"], w, b, body.int32(0)], [st2])
    body.op("ADD", [r["i"], body.const("one", I32, [1], [1]), body.int32(0)], [i2])
    state, i, n = s.input("state", F32, [1, 2]), s.input("i", I32, [1]), s.input("n", I32, [1])
    st_out, i_out = s.output("state_out", F32, [1, 2]), s.output("i_out", I32, [1])
    s.op("WHILE", [s.ref(cond), s.ref(body), state, i, n], [st_out, i_out])
    s.example({state: [0, 1], i: [0], n: [10]}, {st_out: [55, 89], i_out: [10]})


SPECS = [_if_constant(True), _if_constant(False)]
