"""Op records, one per op, grouped by family. `OPS` maps name -> `OpDef`.

Conventions every op follows (the frontend guarantees them before a record is used):

* Inputs of an elementwise op already share one dtype: the frontend inserts `cast` nodes
  following NumPy's promotion rules (`np.result_type`), treating Python scalars as "weak"
  (NEP 50). Broadcasting is NumPy's.
* Attrs are normalised by the frontend: axes are non-negative ints (tuples where several
  are allowed, sorted), `reshape` shapes contain no -1, `slice` bounds are resolved and
  clamped with positive strides. Tuples stay tuples.

Signatures (inputs ; attrs) -> output:

  elementwise  add sub mul div pow maximum minimum (x, y) -> x.dtype   [div, pow: float]
               equal not_equal less less_equal greater greater_equal (x, y) -> bool
               logical_and logical_or logical_xor (x: bool, y: bool) -> bool
               logical_not (x: bool) ; isnan isinf isfinite (x: float) -> bool
               neg abs (x) ; exp log sqrt (x: float)
               stop_gradient (x) -> x, its gradient 0
               where (cond: bool, x, y) -> x.dtype ; cast (x ; dtype)
  math         mod floor_divide (x, y) -> x.dtype, floor semantics ; atan2 (y: float, x)
               floor ceil round sin cos tan asin acos atan sinh cosh erf softplus (x: float)
               log1p expm1 (x: float), accurate near 0
  linalg       matmul (a, b): rank >= 2, batch dims broadcast, float
               einsum (*xs: float ; equation: explicit 'ij,jk->ik', no '...')
               tril triu (x: rank >= 2 ; k: int) -> x.dtype, zeros off the triangle
  reduction    sum mean max min (x ; axis: tuple | None, keepdims: bool) [sum keeps dtype]
               prod (x ; axis, keepdims) -> x.dtype ; cumsum (x ; axis: int) -> x.dtype
               argmax (x ; axis: int, keepdims: bool) -> int64, first maximum wins
               argsort (x ; axis: int) -> int64, stable, NaN last
               topk (x ; k: int, axis: int, largest: bool) -> int64, argsort's order (largest:
               descending, ties still in index order, NaN first), its first k
               any all (x: bool ; axis, keepdims) -> bool, False / True over nothing
  shape        reshape (x ; shape) ; transpose (x ; perm) ; concat stack (*xs ; axis)
               squeeze (x ; axis: tuple) ; expand_dims (x ; axis: int)
               ensure_shape (x, *others ; shape: ints or None, message) -> x, checked
               ensure_size (x ; axes: tuple, minimum: int, message[, multiple: int]) -> x, checked
               broadcast_to (x ; shape) ; flip (x ; axes: tuple) -> x reversed along axes
  indexing     slice (x ; begin, end, stride: tuples, one per dim)
               take (x, indices: int ; axis) ; one_hot (indices: int ; depth, dtype)
  scatter      scatter_add (x, indices: 1-D int, updates ; axis) -> x.dtype, repeats sum
  creation     constant ( ; value: np.ndarray) ; full ( ; shape, value: number, dtype)
               full_like (x ; value: number, dtype) -> x's shape, read when run
  printing     print (*xs ; message: str) -> xs[0], writing the values to stdout
  nn           relu sigmoid tanh (x: float) ; softmax log_softmax (x ; axis)
               conv2d (x: NCHW, w: [O, C/groups, KH, KW][, bias: [O]] ; stride, padding,
                       dilation: pairs, groups) — symmetric zero padding; bias optional
                       (ONNX Conv), added per output channel
               conv_transpose2d (x: NCHW, w: [C, O/groups, KH, KW][, bias: [O]] ; stride,
                       padding, output_padding, dilation: pairs, groups) — conv2d's adjoint
               max_pool2d (x: NCHW ; kernel, stride, padding, dilation, ceil_mode) — pads
                       with -inf; avg_pool2d (x: NCHW ; kernel, stride, padding, ceil_mode,
                       count_include_pad) — divides by the cells counted; padding: a pair,
                       or per dim a pair [before, after]
               sparse_softmax_cross_entropy (logits: [N, C] float, labels: [N] int) -> [N]
"""

from unigraph.ops import (  # noqa: F401  (register)
    creation,
    elementwise,
    indexing,
    linalg,
    math,
    nn,
    pooling,
    printing,
    reduction,
    scatter,
    shape,
)
from unigraph.ops.base import OPS, OpDef, Sample, TensorSpec

__all__ = ["OPS", "OpDef", "Sample", "TensorSpec"]
