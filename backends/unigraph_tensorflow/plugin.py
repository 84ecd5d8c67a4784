"""Registers the TensorFlow backend through the `unigraph` entry-point group."""

from unigraph.hookspecs import hookimpl


@hookimpl
def unigraph_backends():
    from unigraph_tensorflow.backend import TensorFlowBackend

    return [TensorFlowBackend()]
