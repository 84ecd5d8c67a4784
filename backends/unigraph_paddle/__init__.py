"""unigraph's PaddlePaddle backend: `paddle:eager` (dygraph) and `paddle:static` (a PIR
Program run by an Executor). Importing this package does not import paddle."""
