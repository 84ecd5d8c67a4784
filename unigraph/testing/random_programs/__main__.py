"""`python -m unigraph.testing.random_programs --seed 0 --count 2000`: see `__init__`."""

from unigraph.testing.random_programs.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
