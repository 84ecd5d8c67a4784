"""The seed article's counter loop, written once: a = 0, b = 10; while a < b: a += 2, b += 1.

TensorFlow 1 needs `tf.while_loop(cond, body, [a, b])` inside a Session; PyTorch needs a plain
`while`. Here the same function runs on every target: on tensorflow:static it is a real
`tf.while_loop` in a `tf.compat.v1.Graph`, on paddle:static a `paddle.static.nn.while_loop`
in a Program, on torch:static a `while` in generated code. Both spellings are shown: the
explicit `ug.while_loop`, and plain Python that autograph converts into the same graph.

    python examples/counter_loop.py --backend tensorflow --mode static
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _cli import parse_args, target_context, target_name  # noqa: E402

import unigraph as ug  # noqa: E402


@ug.function
def counter(a, b):
    """The explicit spelling: one `while_loop` node."""
    return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))


@ug.function
def counter_python(a, b):
    """The PyTorch spelling; on static targets autograph turns it into the same node."""
    while a < b:
        a = a + 2
        b = b + 1
    return a, b


# For `unigraph check examples/counter_loop.py`: function -> example inputs.
CHECKS = {"counter": (counter, (0, 10)), "counter_python": (counter_python, (0, 10))}


def run(args) -> dict:
    with target_context(args):
        a, b = counter(0, 10)
        a2, b2 = counter_python(0, 10)
    return {"a": a.item(), "b": b.item(), "a_python": a2.item(), "b_python": b2.item()}


def main(argv=None) -> dict:
    args = parse_args(__doc__.splitlines()[0], None, argv)
    result = run(args)
    print(f"target: {target_name(args)}")
    print(f"ug.while_loop: a = {result['a']}, b = {result['b']}")
    print(f"plain Python : a = {result['a_python']}, b = {result['b_python']}")
    return result


if __name__ == "__main__":
    main()
