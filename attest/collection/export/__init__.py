"""The export check: the model exported to ONNX, run under onnxruntime against eager PyTorch."""
