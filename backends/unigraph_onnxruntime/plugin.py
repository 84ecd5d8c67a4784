"""Registers the ONNX Runtime backend through the `unigraph` entry-point group."""

from unigraph.hookspecs import hookimpl


@hookimpl
def unigraph_backends():
    from unigraph_onnxruntime.backend import OnnxRuntimeBackend

    return [OnnxRuntimeBackend()]
