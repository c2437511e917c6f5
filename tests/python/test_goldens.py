"""The golden regressions (tests/golden/goldens.py): the stored cycles and
statistics of the examples, of a set of kernels and of two models must be
what this build gives. When a change moves them on purpose, rewrite them with
`.venv/bin/python tests/golden/goldens.py --update` in the same commit and say
why in its message."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden"))
import goldens  # noqa: E402


@pytest.mark.parametrize("name", sorted(goldens.SETS))
def test_cycles_and_statistics_are_the_stored_goldens(name):
    diff = goldens.check(name)
    assert not diff, (f"the {name} goldens moved (if on purpose: .venv/bin/python tests/golden/goldens.py --update {name}, "
                      f"committed with the reason):\n{diff[:20000]}")
