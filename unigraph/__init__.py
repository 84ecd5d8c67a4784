"""unigraph: write a model once; run it on NumPy, PyTorch, TensorFlow and PaddlePaddle,
eagerly or as a compiled static graph; prove, number by number, that they agree.

`import unigraph` imports no framework: each backend imports its own on first use.
"""

from unigraph import data, init, nn, optim, random
from unigraph.api import (
    abs,
    add,
    argmax,
    avg_pool2d,
    broadcast_to,
    cast,
    concat,
    constant,
    conv2d,
    div,
    equal,
    exp,
    expand_dims,
    gather,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    matmul,
    max,
    max_pool2d,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    not_equal,
    one_hot,
    pow,
    relu,
    reshape,
    sigmoid,
    slice,
    softmax,
    sparse_softmax_cross_entropy,
    sqrt,
    squeeze,
    stack,
    sub,
    sum,
    take,
    tanh,
    transpose,
    where,
)
from unigraph.autodiff import grad, value_and_grad
from unigraph.autograph.runtime import range
from unigraph.check import Report, check, check_training
from unigraph.config import Target, current_target, set_backend, use_backend
from unigraph.control_flow import cond, while_loop
from unigraph.errors import (
    BackendError,
    ControlFlowError,
    GraphError,
    ShapeError,
    TracingError,
    UnigraphError,
)
from unigraph.function import Function, assign, function
from unigraph.ir import Graph
from unigraph.random import manual_seed
from unigraph.tensor import Parameter, Tensor, tensor
from unigraph.training import Trainer

__version__ = "0.1.0"
