"""ONNX exchange: `export` writes any `@ug.function` or Module as an ONNX model; `load`
reads an ONNX model back as a Module that runs on every target.

    ug.onnx.export(model.eval(), x, path="model.onnx")          # -> "model.onnx"
    model_proto = ug.onnx.to_model(counter, 0, 10, opset=17)      # an onnx.ModelProto
    model = ug.onnx.load("model.onnx")                            # a ug.nn.Module

`cond` becomes `If`, `while_loop` becomes `Loop`, parameters initializers; see
`unigraph.onnx.export`. Needs the `onnx` package (`pip install 'unigraph[onnx]'`);
`import unigraph` does not import this package.
"""

from unigraph.export.prepare import ExportError
from unigraph.onnx.export import export, graph_to_model, to_model
from unigraph.onnx.load import OnnxImportError, OnnxModel, load

__all__ = ["ExportError", "OnnxImportError", "OnnxModel", "export", "graph_to_model", "load",
           "to_model"]
