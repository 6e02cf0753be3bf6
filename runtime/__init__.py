"""The NNAPI runtime, emulated: partitioning a model across devices, CPU fallback,
and control flow run by the runtime itself (installed as ``nnhal.runtime``)."""
