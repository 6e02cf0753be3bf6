"""The CPU executor: compiled plans, straight-line generated code, IF/WHILE, timeouts.

``compile_model(model)`` compiles every subgraph once (``compiler``), then
generates Python for it (``codegen``, ``control_flow``); ``CompiledModel.run``
executes. Operand decoding helpers live in ``operands``.

Buffers: constants are decoded once at compile time; temporaries are the
fresh arrays the kernels return, held in local variables of the generated
code, and WHILE passes body outputs to the next iteration by rebinding those
names (a swap of references, never a copy). Kernels writing into buffers
allocated once at prepare (``out=``) were measured against this and gained
nothing: numpy's allocator reuses freed blocks (np.add on 2, 1 000 and
1 000 000 float32 elements: 0.26/0.38/465 µs fresh vs 0.26/0.35/482 µs with
``out=``), while ``out=`` would need two buffers per WHILE operand.
"""

from nnhal.driver.executor.model import CompiledModel, compile_model

__all__ = ["CompiledModel", "compile_model"]
