"""Model importers: TFLite and ONNX files to NNAPI models (installed as ``nnhal.importers``)."""
