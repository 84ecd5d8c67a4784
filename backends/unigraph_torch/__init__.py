"""The PyTorch backend: `torch:eager` (torch ops one by one) and `torch:static` (the graph
compiled once into a generated Python function over torch ops)."""
