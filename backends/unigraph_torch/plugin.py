"""Registers the PyTorch backend through the `unigraph` entry-point group."""

from unigraph.hookspecs import hookimpl


@hookimpl
def unigraph_backends():
    from unigraph_torch.backend import TorchBackend

    return [TorchBackend()]
