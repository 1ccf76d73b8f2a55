"""``restored_on_failure``: attributes put back when a block raises, kept when it returns."""

import pytest

from sklearn_calib._rollback import restored_on_failure


class Holder:
    def __init__(self, value):
        self.value = value


def test_a_failed_block_gets_every_object_its_attributes_back():
    first, second = Holder([1]), Holder(2)
    kept = first.value
    with pytest.raises(KeyError), restored_on_failure(first, second):
        first.value = [3]
        first.added = 4
        del second.value
        raise KeyError("boom")
    assert vars(first) == {"value": [1]} and first.value is kept
    assert vars(second) == {"value": 2}


def test_a_block_that_returns_keeps_its_changes():
    holder = Holder(1)
    with restored_on_failure(holder):
        holder.value = 2
        holder.added = 3
    assert vars(holder) == {"value": 2, "added": 3}
