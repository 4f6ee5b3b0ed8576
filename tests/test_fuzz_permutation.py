"""strategies._permutation draws the same permutation as random.Random.sample(range(n), n) from the same generator
state (the interleaver's device and workgroup orders use it: a different list would change the explored orders)."""
import random

import pytest

from hcqsim.strategies import _permutation


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 21, 22, 64, 65, 200, 4096])
def test_same_as_sample(n):
    for seed in range(40 if n < 100 else 4):
        a, b = random.Random(f"{seed}/gpu"), random.Random(f"{seed}/gpu")
        for _ in range(3):  # consecutive draws: the generators stay in step
            assert _permutation(a, n) == b.sample(range(n), n)
        assert a.random() == b.random()
