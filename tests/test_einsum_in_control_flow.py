"""`ug.einsum` inside a `cond` branch and a `while_loop` body, and the gradient through
them, on all 9 targets (and onnxruntime:static forward): numpy:eager's values.
paddle:static's einsum there failed when the Program ran under a gradient (Paddle 3.3.1:
"DenseTensor shouldn't be null"; random tester, seed 11008): in a block it is a product
of broadcast operands summed over the contracted letters.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FORWARD_TARGETS, INFERENCE_TARGETS, run_on

import unigraph as ug

CASES = {  # equation -> operand shapes
    "ij,jk->ik": [(2, 3), (3, 4)],
    "bij,bkj->bki": [(2, 2, 3), (2, 4, 3)],
    "i,i->": [(3,), (3,)],
    "ij->ji": [(2, 3)],
    "ij,j,k->ik": [(2, 3), (3,), (2,)],
}


def _programs(equation):
    @ug.function
    def in_cond(*xs):
        return ug.cond(ug.sum(xs[0]) > -100.0, lambda: ug.tanh(ug.einsum(equation, *xs)),
                       lambda: ug.einsum(equation, *xs) * 2.0)

    @ug.function
    def in_loop(*xs):
        start = ug.einsum(equation, *xs) * 0.0

        def body(k, v):
            return k + 1, v * 0.5 + ug.sin(ug.einsum(equation, *xs))

        return ug.while_loop(lambda k, v: k < 2, body, (ug.tensor(0), start))[1]

    return {"cond": in_cond, "loop": in_loop}


@pytest.mark.parametrize("where", ["cond", "loop"])
@pytest.mark.parametrize("equation", list(CASES))
@pytest.mark.parametrize("target", FORWARD_TARGETS)
def test_einsum_in_a_block(target, equation, where):
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-1.0, 1.0, shape).astype(np.float32) for shape in CASES[equation]]
    program = _programs(equation)[where]
    argnums = tuple(range(len(xs)))

    def grad(*a):
        return ug.grad(lambda *b: ug.sum(program(*b) * 1.5), argnums=argnums)(*a)

    with ug.use_backend("numpy", "eager"):
        wide = [ug.tensor(x.astype(np.float64)) for x in xs]
        expected = program(*wide).numpy()
        expected_grads = [g.numpy() for g in ug.function(grad)(*wide)]
    np.testing.assert_allclose(run_on(target, program, *xs), expected, rtol=1e-5, atol=1e-6)
    if target in INFERENCE_TARGETS:
        return
    for got, want in zip(run_on(target, ug.function(grad), *xs), expected_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
