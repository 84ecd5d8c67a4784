"""The public op functions (`ug.add`, `ug.matmul`, `ug.sum`, ...).

Each one puts its arguments in the form the op record expects (promoted dtypes, normalised
axes and shapes) and hands over to `dispatch.apply`. The meaning of every op lives in its
record in `unigraph/ops/`. One module per kind of op; `unigraph.api.<name>` is every public
function, whichever module holds it (no module is named after a function).
"""

from unigraph.api.composed import clip, logsumexp, norm, sign, std, var
from unigraph.api.creation import (
    arange,
    constant,
    eye,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from unigraph.api.elementwise import (
    abs,
    acos,
    add,
    asin,
    atan,
    atan2,
    cast,
    ceil,
    cos,
    cosh,
    div,
    equal,
    erf,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    mul,
    neg,
    not_equal,
    pow,
    relu,
    round,
    sigmoid,
    sin,
    sinh,
    softplus,
    sqrt,
    stop_gradient,
    sub,
    tan,
    tanh,
    where,
)
from unigraph.api.indexing import getitem, index_update, slice, split
from unigraph.api.linalg import einsum, matmul, tril, triu
from unigraph.api.nn_ops import (
    avg_pool2d,
    conv2d,
    elu,
    gelu,
    leaky_relu,
    log_softmax,
    max_pool2d,
    selu,
    silu,
    softmax,
    sparse_softmax_cross_entropy,
)
from unigraph.api.reductions import (
    all,
    any,
    argmax,
    argmin,
    argsort,
    cumsum,
    max,
    mean,
    min,
    prod,
    sort,
    sum,
    topk,
)
from unigraph.api.shapes import (
    broadcast_to,
    concat,
    ensure_shape,
    ensure_size,
    expand_dims,
    flatten,
    flip,
    gather,
    one_hot,
    pad,
    reshape,
    squeeze,
    stack,
    take,
    tile,
    transpose,
    unsqueeze,
)
from unigraph.api.updates import scatter, scatter_add
from unigraph.tensor import Tensor as _Tensor

# Tensor's forward operators are these functions themselves (see the note in Tensor's class
# body): `x + y` calls `add(x, y)` with no method in between.
_OPERATORS = {
    "__add__": add, "__sub__": sub, "__mul__": mul, "__truediv__": div, "__pow__": pow,
    "__matmul__": matmul, "__neg__": neg, "__abs__": abs, "__lt__": less,
    "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal, "__eq__": equal,
    "__ne__": not_equal, "__and__": logical_and, "__or__": logical_or,
    "__xor__": logical_xor,
    "__invert__": logical_not, "__getitem__": getitem,
}
for _name, _function in _OPERATORS.items():
    setattr(_Tensor, _name, _function)
del _name, _function
