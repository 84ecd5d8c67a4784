"""Embedding: a table of learned vectors looked up by integer ids (a `take`).

>>> emb = ug.nn.Embedding(1000, 64, padding_idx=0)
>>> vectors = emb(np.array([[5, 0, 17]]))   # [1, 3, 64]
"""

from __future__ import annotations

from unigraph import init as initializers
from unigraph.nn import functional_layers as F
from unigraph.nn.module import Module
from unigraph.tensor import Parameter

__all__ = ["Embedding"]


class Embedding(Module):
    """weight [num_embeddings, embedding_dim], drawn from N(0, 1) (PyTorch's default) unless
    `weight_init` is given; `emb(ids)` is weight[ids]: shape ids.shape + [embedding_dim],
    gradients adding into the rows read. With `padding_idx`, that row starts at zero, and
    positions holding it give zeros and send it no gradient.

    >>> ug.nn.Embedding(10, 3)(np.array([1, 2, 1]))   # [3, 3]
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, weight_init=None,
                 dtype="float32"):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            padding_idx = int(padding_idx)
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is not a row of a "
                                 f"table of {self.num_embeddings}")
            padding_idx %= self.num_embeddings
        self.padding_idx = padding_idx
        shape = (self.num_embeddings, self.embedding_dim)
        values = (weight_init or initializers.normal())(shape, dtype, fan_in=shape[0],
                                                        fan_out=shape[1])
        if padding_idx is not None:
            values[padding_idx] = 0
        self.weight = Parameter(values)

    def forward(self, ids):
        return F.embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self):
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"
