"""The backend contract (unigraph.testing.backend_contract) on every registered backend."""

from unigraph.testing.backend_contract import *  # noqa: F401,F403
