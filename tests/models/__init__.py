"""Builders of small test models, shared by the test suites and the benchmarks.

Plain functions, no fixtures: ``tests/conftest.py`` wraps them in session-scoped fixtures. TensorFlow and
onnx are imported inside the builders that need them.
"""
