"""unigraph: write a model once; run it on NumPy, PyTorch, TensorFlow and PaddlePaddle,
eagerly or as a compiled static graph; prove, number by number, that they agree.

`import unigraph` imports no framework: each backend imports its own on first use.
"""

from unigraph import random
from unigraph.api import (
    abs,
    acos,
    add,
    all,
    any,
    arange,
    argmax,
    argmin,
    argsort,
    asin,
    atan,
    atan2,
    avg_pool2d,
    broadcast_to,
    cast,
    ceil,
    clip,
    concat,
    constant,
    conv2d,
    cos,
    cosh,
    cumsum,
    div,
    einsum,
    elu,
    ensure_shape,
    ensure_size,
    equal,
    erf,
    exp,
    expand_dims,
    expm1,
    eye,
    flatten,
    flip,
    floor,
    floor_divide,
    full,
    full_like,
    gather,
    gelu,
    greater,
    greater_equal,
    index_update,
    isfinite,
    isinf,
    isnan,
    leaky_relu,
    less,
    less_equal,
    linspace,
    log,
    log1p,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logsumexp,
    matmul,
    max,
    max_pool2d,
    maximum,
    mean,
    min,
    minimum,
    mod,
    mul,
    neg,
    norm,
    not_equal,
    one_hot,
    ones,
    ones_like,
    pad,
    pow,
    prod,
    relu,
    reshape,
    round,
    scatter,
    scatter_add,
    selu,
    sigmoid,
    sign,
    silu,
    sin,
    sinh,
    slice,
    softmax,
    softplus,
    sort,
    sparse_softmax_cross_entropy,
    split,
    sqrt,
    squeeze,
    stack,
    std,
    stop_gradient,
    sub,
    sum,
    take,
    tan,
    tanh,
    tile,
    topk,
    transpose,
    tril,
    triu,
    unsqueeze,
    var,
    where,
    zeros,
    zeros_like,
)
from unigraph.autodiff import grad, value_and_grad
from unigraph.config import Target, current_target, set_backend, use_backend
from unigraph.control_flow import cond, while_loop
from unigraph.dtypes import bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from unigraph.errors import (
    BackendError,
    ConfigError,
    ConfigWarning,
    ControlFlowError,
    ControlFlowShapeError,
    GraphError,
    IndexOutOfRangeError,
    ShapeError,
    TracingError,
    UnigraphError,
)
from unigraph.function import Function, assign, function
from unigraph.ir import Graph
from unigraph.random import manual_seed
from unigraph.spec import Spec
from unigraph.tensor import Parameter, Tensor, tensor

__version__ = "0.1.0"
bool = bool_  # noqa: A001  (ug.bool, the dtype constant; builtins.bool is untouched)

# Imported on first use, so that `import unigraph` stays small (measured in bench/).
_LAZY = {
    "nn": ("unigraph.nn", None),
    "init": ("unigraph.init", None),
    "optim": ("unigraph.optim", None),
    "data": ("unigraph.data", None),
    "autograph": ("unigraph.autograph", None),
    "testing": ("unigraph.testing", None),
    "range": ("unigraph.autograph.runtime", "range"),
    "check": ("unigraph.checking", "check"),
    "check_training": ("unigraph.checking", "check_training"),
    "check_suite": ("unigraph.checking", "check_suite"),
    "Report": ("unigraph.checking", "Report"),
    "Trainer": ("unigraph.training", "Trainer"),
    "save": ("unigraph.weights", "save"),
    "load": ("unigraph.weights", "load"),
    "WeightFileError": ("unigraph.weights", "WeightFileError"),
    "quirks": ("unigraph.quirks", None),
    "view": ("unigraph.graph_view", "view"),
    "print": ("unigraph.printing", "print"),
    "from_native": ("unigraph.interop", "from_native"),
    "from_dlpack": ("unigraph.interop", "from_dlpack"),
    "conv_transpose2d": ("unigraph.nn.functional_layers", "conv_transpose2d"),
    "onnx": ("unigraph.onnx", None),
    "export": ("unigraph.export", None),  # a callable package: ug.export(fn, *inputs, ...)
    "loop_limit": ("unigraph.control_flow", "loop_limit"),
    "set_threads": ("unigraph.threads", "set_threads"),
    "get_threads": ("unigraph.threads", "get_threads"),
    "set_flush_denormal": ("unigraph.tuning", "set_flush_denormal"),
    "get_flush_denormal": ("unigraph.tuning", "get_flush_denormal"),
    "set_tuned": ("unigraph.tuning", "set_tuned"),
    "get_tuned": ("unigraph.tuning", "get_tuned"),
    "RetraceWarning": ("unigraph.function", "RetraceWarning"),
}


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'unigraph' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_LAZY])
