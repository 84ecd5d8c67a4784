"""The float64 reference the optimizer tests compare with: least squares on small random
data, trained by each optimizer's documented formula written out by hand (not by unigraph).

>>> data = least_squares_data(seed=7, rows=5)
>>> params, slots = trained_by_formula("adam", data, steps=3, lr=0.1)
"""

from __future__ import annotations

import numpy as np


def least_squares_data(seed: int, rows: int) -> tuple:
    """float32 (x [rows, 3], y [rows, 2], w [3, 2], b [2]) from one seeded generator."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 3)).astype(np.float32)
    y = rng.standard_normal((rows, 2)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal((2,)).astype(np.float32)
    return x, y, w, b


def trained_by_formula(name: str, data: tuple, steps: int, lr: float, momentum: float = 0.9):
    """float64, by the documented formulas: loss = sum(r**2) / n with r = x @ w + b - y, so
    dloss/dr = 2 r / n. `name`: "sgd", "momentum", "momentum_nesterov" or "adam" (betas
    0.9, 0.999, eps 1e-8). Returns ([w, b], [{"velocity", "m", "v"} per parameter]) after
    `steps`."""
    x, y, w, b = (a.astype(np.float64) for a in data)
    params = [w, b]
    slots = [{"velocity": np.zeros_like(p), "m": np.zeros_like(p), "v": np.zeros_like(p)}
             for p in params]
    for t in range(1, steps + 1):
        r = 2 * (x @ params[0] + params[1] - y) / len(x)
        for p, g, s in zip(params, [x.T @ r, r.sum(0)], slots):
            if name == "sgd":
                p -= lr * g
            elif name.startswith("momentum"):
                s["velocity"] = momentum * s["velocity"] + g
                p -= lr * (g + momentum * s["velocity"] if name == "momentum_nesterov"
                           else s["velocity"])
            elif name == "adam":
                s["m"] = 0.9 * s["m"] + 0.1 * g
                s["v"] = 0.999 * s["v"] + 0.001 * g * g
                m_hat, v_hat = s["m"] / (1 - 0.9**t), s["v"] / (1 - 0.999**t)
                p -= lr * m_hat / (np.sqrt(v_hat) + 1e-8)
            else:
                raise ValueError(f"no reference formula for optimizer {name!r}")
    return params, slots
