"""The NumPy backend (`numpy:eager`, `numpy:static`): an adapter over `unigraph.reference`."""
