"""Registers the PaddlePaddle backend with unigraph's plugin manager (entry point `paddle`)."""

from unigraph.hookspecs import hookimpl


@hookimpl
def unigraph_backends():
    from unigraph_paddle.backend import PaddleBackend

    return [PaddleBackend()]
