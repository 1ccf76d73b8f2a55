"""Putting objects' attributes back as they were when a block raises."""

import contextlib


@contextlib.contextmanager
def restored_on_failure(*objects):
    """Put the attributes of ``objects`` back as they were if the block raises.

    Each object's ``__dict__`` is copied (shallowly) on entry; if the block raises, every
    object gets exactly the copied attributes back (those the block added are removed)
    and the exception propagates. Values changed in place (an array's entries, a list's
    items) are not restored.

    Parameters
    ----------
    *objects : object
        Objects with a ``__dict__``.

    Yields
    ------
    None
    """
    saved = [(obj, dict(obj.__dict__)) for obj in objects]
    try:
        yield
    except BaseException:
        for obj, attributes in saved:
            obj.__dict__.clear()
            obj.__dict__.update(attributes)
        raise
