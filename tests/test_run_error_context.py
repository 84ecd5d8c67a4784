"""A static run that fails raises unigraph's error in the user's terms (`Executable._run_error`,
the one translation: `_run_feeds`, `run_all`, the backends' `run_known`, a @ug.function's
generated caller) as `raise ... from None` raised it: no `__cause__`, the framework's error
kept as the suppressed `__context__`; the same class and message on the first call, the
one that makes the caller and the caller's own, with tensors and with NumPy arrays, on all
9 targets (an eager target raises the error from the op itself)."""

import numpy as np
import pytest
from conftest import TARGETS

import unigraph as ug
from unigraph.config import Target
from unigraph.errors import IndexOutOfRangeError

REPEATS = 4  # first call, second (makes the caller), then the caller's own calls


def on(target):
    t = Target.parse(target)
    return ug.use_backend(t.backend, t.mode)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("as_tensors", [True, False])
def test_a_translated_run_error_keeps_its_context_suppressed(target, as_tensors):
    take = ug.function(lambda x, i: ug.take(x, i))
    x, good, bad = np.float32([1.0, 2.0, 4.0]), np.int64([2, 0]), np.int64([3, 0])
    static = Target.parse(target).mode != "eager"
    with on(target):
        wrap = ug.tensor if as_tensors else np.asarray
        assert take(wrap(x), wrap(good)).numpy().tolist() == [4.0, 1.0]
        messages = set()
        for _ in range(REPEATS):
            with pytest.raises(IndexOutOfRangeError) as caught:
                take(wrap(x), wrap(bad))
            error = caught.value
            messages.add(str(error))
            assert type(error) is IndexOutOfRangeError
            assert error.__cause__ is None
            if static:  # the framework's failure, suppressed as `from None` suppresses it
                assert error.__suppress_context__ is True
                assert error.__context__ is not None and error.__context__ is not error
        assert len(messages) == 1, messages
        message = messages.pop()
        assert message.startswith(f"take on {target} at "), message
        assert "test_run_error_context.py:" in message
        assert "index 3 is out of range for size 3" in message
        assert take(wrap(x), wrap(good)).numpy().tolist() == [4.0, 1.0]
