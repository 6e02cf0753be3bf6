"""The HAL's .proto sources (``nnhal/v1_3/*.proto``), installed as package data.

``python proto/generate.py`` regenerates the committed stubs in ``nnhal._proto``
from them; ``nnhal proto`` prints or copies them for grpcurl and other clients.
"""
