"""Writing a traced graph as a TensorFlow SavedModel, and as TensorFlow Lite from it.

`save_savedmodel` lowers the IR with the same table and control-flow builders as
`tensorflow:function` (`cond` -> `tf.cond`, `while_loop` -> `tf.while_loop`, so the saved
graph holds TF's own `If`/`While` ops), inside a `tf.Module` that owns the parameters as
`tf.Variable`s, under a `tf.function` with an `input_signature` taken from the IR. The
SavedModel has one serving signature, `serving_default`, whose inputs are named after the
Python arguments and whose outputs are named after the result (`output`, `output_0`, ...):

    loaded = tf.saved_model.load(path)               # TensorFlow alone, no unigraph
    loaded.signatures["serving_default"](x=tf.constant(x))   # {"output": ...}
    loaded.serve(x)                                  # positional, a list of outputs

`save_tflite` converts that SavedModel with `tf.lite.TFLiteConverter`, TFLite builtins
only: TF ops (Flex) would need the Flex delegate, which the plain Lite interpreter does not
carry, so a model using an op without a builtin is refused (`ExportError`, naming the op).
`cond` survives as TFLite's `IF` and `while_loop` as `WHILE` (control flow v2, converted
natively, nested too). What TFLite does not keep: float64 and float16 models (its builtins
take float32: refused, saying so), +-inf inside a constant array (stored as +-3.4e38), and
NaN through MAXIMUM/MINIMUM (a NaN first operand is dropped).

This module imports tensorflow: `unigraph.export` imports it only after
`TensorFlowBackend.load` (paddle first, when installed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile

import tensorflow as tf

from unigraph.backend import lower_nodes
from unigraph.export.prepare import ExportError
from unigraph_tensorflow.control_flow import make_control_flow
from unigraph_tensorflow.lowerings import GRAPH_LOWERINGS
from unigraph_tensorflow.static import op_name


class ServingModule(tf.Module):
    """The parameters as variables and `serve`, the graph as a tf.function."""

    def __init__(self, prepared):
        super().__init__(name=op_name("model", prepared.name))
        graph = prepared.graph
        self._graph = graph
        self._output_names = prepared.output_names
        self._control_flow = make_control_flow(tf, GRAPH_LOWERINGS, gradients="tape")
        self.weights = [tf.Variable(array, trainable=False, name=op_name("param", value.name))
                        for value, array in zip(graph.params, prepared.params)]
        signature = [tf.TensorSpec(value.shape, value.dtype, name=name)
                     for value, name in zip(graph.inputs, prepared.input_names)]
        self.serve = tf.function(self._serve, input_signature=signature, autograph=False)

    def _serve(self, *inputs):
        graph = self._graph
        env = {value.id: x for value, x in zip(graph.inputs, inputs)}
        env.update((p.id, w.read_value()) for p, w in zip(graph.params, self.weights))
        outputs = lower_nodes(graph, env, GRAPH_LOWERINGS, self._control_flow)
        # tf.identity: an output that is an input or a weight still gets its own name.
        return {name: tf.identity(out, name=name)
                for name, out in zip(self._output_names, outputs)}


def save_savedmodel(prepared, path: str) -> str:
    """Write `prepared` (a `unigraph.export.Exportable`) as a SavedModel directory at
    `path`; returns `path`."""
    module = ServingModule(prepared)
    concrete = module.serve.get_concrete_function()
    _replace(path)
    with _quiet_absl():
        tf.saved_model.save(module, path, signatures={"serving_default": concrete})
    return path


@contextlib.contextmanager
def _quiet_absl():
    """SavedModel writing logs an INFO line through absl per captured variable (its
    resource input is renamed), which reaches the user once Paddle has configured the root
    logger at INFO. Warnings still pass; a level the user set on `absl` wins."""
    logger = logging.getLogger("absl")
    if logger.level != logging.NOTSET:
        yield
        return
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(logging.NOTSET)


def save_tflite(prepared, path: str) -> str:
    """Write `prepared` as a TensorFlow Lite flatbuffer at `path`, converted from a
    SavedModel written to a temporary directory; returns `path`."""
    with tempfile.TemporaryDirectory(prefix="unigraph_tflite_") as folder:
        saved = save_savedmodel(prepared, os.path.join(folder, "savedmodel"))
        converter = tf.lite.TFLiteConverter.from_saved_model(saved, ["serving_default"])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        try:
            flatbuffer = converter.convert()
        except Exception as error:  # the converter raises its own ConverterError
            raise ExportError(_conversion_message(prepared, error)) from None
    _replace(path)
    with open(path, "wb") as file:
        file.write(flatbuffer)
    return path


def _conversion_message(prepared, error) -> str:
    """Why TFLite refused the model, in the user's terms: the TF ops it has no builtin for,
    and the dtypes involved (TFLite's builtins are mostly float32 and int32/int64)."""
    text = str(error)
    ops = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op", text)))
    dtypes = sorted({v.dtype for v in [*prepared.graph.inputs, *prepared.graph.params]
                     if v.dtype in ("float16", "float64")})
    what = f"no TFLite builtin for {', '.join(ops)}" if ops else text.strip().splitlines()[0]
    fix = (f"; its tensors are {', '.join(dtypes)}, and TFLite's builtins take float32: "
           "export a float32 copy (model.copy('float32'), float32 inputs)") if dtypes else \
        "; rewrite those ops, or use format 'savedmodel', which keeps every TF op"
    return f"TensorFlow Lite cannot convert {prepared.name}: {what}{fix}"


def _replace(path: str) -> None:
    """Make room for a new artifact at `path` (an older one is overwritten)."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)


# format -> writer(prepared, path) -> path, for `Backend.export` and `unigraph.export`.
WRITERS = {"savedmodel": save_savedmodel, "tflite": save_tflite}
