"""The reference engine: the IR run with the op records' NumPy references and VJP rules.

It is the living definition of every op (STYLE rule 1) and part of the core, not a plugin:
the checker runs it in float64 as the reference every target is compared with, and the
`numpy` backend (`numpy:eager`, `numpy:static`) is a thin adapter over it.

* `eager_op`, `eager_grad` (`eager`): one op at a time, and a VJP tape over a Python
  function, for eager mode;
* `Plan`, `ReferenceExecutable` (`plan`, `executable`): a graph compiled once into steps,
  with reverse mode over `cond`, `while_loop` and `grad`, for static mode; `codegen` turns
  a plan's forward into one Python function (loops and branches inlined), `grad_codegen`
  a `grad` node over plain ops (a training step's gradient) into another;
* `fast_kernels`: faster NumPy kernels and VJP rules of hot ops, for the numpy targets only;
* `float64`: the float64 reference of a graph (`values`, `outputs`, `cotangents`, `vjp`).

Gradients of gradients raise `SecondOrderUnsupported`: the VJP rules are NumPy code, so
they cannot be differentiated again.

>>> from unigraph.reference import float64
>>> env = float64.values(graph, feeds, params)
"""

from unigraph.reference import float64
from unigraph.reference.eager import eager_grad, eager_op
from unigraph.reference.executable import ReferenceExecutable, aligned_copy, read_only
from unigraph.reference.plan import Plan, SecondOrderUnsupported

__all__ = ["Plan", "ReferenceExecutable", "SecondOrderUnsupported", "eager_grad", "eager_op",
           "float64", "read_only", "aligned_copy"]
