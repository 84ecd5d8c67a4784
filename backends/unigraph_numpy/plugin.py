"""Registers the NumPy backend through the `unigraph` entry-point group."""

from unigraph.hookspecs import hookimpl


@hookimpl
def unigraph_backends():
    from unigraph_numpy.backend import NumpyBackend

    return [NumpyBackend()]
