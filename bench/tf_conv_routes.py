"""conv_n64 on tensorflow:function: the native function and unigraph's two conv routes, in one
process, called in turn (CPU time and wall time medians, ratios to native).

    python bench/tf_conv_routes.py [ROUNDS]

"returned NHWC": the route a conv whose result is an output takes (`layout.
conv_reaches_an_output`: NHWC kernels, the result returned NHWC and handed back as NumPy's
transposed view); "NCHW kernel": the same function built with that check answering no
(oneDNN's NCHW kernels, the result NCHW in TF). Both give the same values (checked).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import measure  # noqa: E402
import numpy as np  # noqa: E402
import workloads  # noqa: E402

import unigraph as ug  # noqa: E402
from unigraph.config import Target  # noqa: E402


def main(rounds: int = 30, calls_per_sample: int = 20) -> None:
    target = Target.parse("tensorflow:function")
    data = workloads.make_data("conv_n64")
    with ug.use_backend(target.backend, target.mode):
        ug.set_threads(1)
        from unigraph_tensorflow import layout

        calls = {"native": measure.native_builders("conv_n64", target)["native"](data),
                 "returned NHWC": measure.unigraph_call("conv_n64", target, data)}
        reaches = layout.conv_reaches_an_output
        layout.conv_reaches_an_output = lambda graph: False
        try:
            calls["NCHW kernel"] = measure.unigraph_call("conv_n64", target, data)
            calls["NCHW kernel"]()  # compiled now, with the check answering no
        finally:
            layout.conv_reaches_an_output = reaches
        assert np.array_equal(calls["returned NHWC"]().numpy(), calls["NCHW kernel"]().numpy())
        samples: dict = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(calls_per_sample):
                    call()
                samples[name].append(((time.process_time() - cpu) / calls_per_sample,
                                      (time.perf_counter() - wall) / calls_per_sample))
    native_cpu, native_wall = np.median(samples["native"], axis=0)
    for name, times in samples.items():
        cpu, wall = np.median(times, axis=0)
        print(f"{name:14s} cpu {cpu * 1e3:.3f} ms ({cpu / native_cpu:.2f}x)  "
              f"wall {wall * 1e3:.3f} ms ({wall / native_wall:.2f}x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
