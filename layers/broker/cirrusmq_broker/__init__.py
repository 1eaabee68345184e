"""CirrusMQ broker core: model, batch codec, storage and services (protocol-agnostic)."""

__version__ = "0.1.0"
