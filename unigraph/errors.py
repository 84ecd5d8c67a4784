"""Errors raised by unigraph, each phrased in the user's terms."""


class UnigraphError(Exception):
    """Base class of every error unigraph raises on purpose."""


class ShapeError(UnigraphError, ValueError):
    """An op received inputs whose shapes or dtypes it cannot take."""


class TracingError(UnigraphError):
    """Python code did something with a symbolic tensor that a static graph cannot express."""


class ControlFlowError(UnigraphError):
    """A `cond` or `while_loop` was given branches or bodies that do not match."""


class BackendError(UnigraphError):
    """A backend or mode is unknown, not installed, or cannot run what it was given."""


class GraphError(UnigraphError):
    """A graph is not well formed (found by `Graph.verify`)."""


class ConfigError(UnigraphError, ValueError):
    """A setting (environment variable or config file key) has a value unigraph cannot use."""


class ConfigWarning(UserWarning):
    """A config file holds something unigraph ignores (an unknown, perhaps misspelt, key)."""
