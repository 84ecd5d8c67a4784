"""The ONNX Runtime backend: `onnxruntime:static`, inference only, built on the ONNX exporter
(`unigraph.onnx`). A plugin package like the others: it uses nothing from the core but the
public plugin contract (`unigraph.backend.Backend`, the `unigraph` entry points)."""
