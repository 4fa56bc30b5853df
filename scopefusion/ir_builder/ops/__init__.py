"""Op definitions by dialect: ``onnx`` (ONNX's operator schemas) and ``tf`` (TensorFlow's op registry)."""
