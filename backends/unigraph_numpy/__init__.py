"""The NumPy reference engine: `numpy:eager` and `numpy:static`."""
