"""Device and numeric-precision choices of NetClassifier: "auto" resolution and autocast."""

import contextlib

import torch

PRECISIONS = ("auto", "fp32", "bf16")

#: Largest share of the free accelerator memory that the training data may take to be
#: kept on the device for the whole fit; larger data stays in (pinned) host memory.
DEVICE_DATA_FRACTION = 0.5


def resolve_device(device):
    """Return the torch device that ``device`` stands for.

    Parameters
    ----------
    device : str or torch.device
        "auto" (CUDA when available, else CPU) or anything ``torch.device`` accepts.

    Returns
    -------
    device : torch.device
        The device ``device`` names.

    Raises
    ------
    ValueError
        If ``device`` names no torch device, or names CUDA where CUDA is not available.

    Examples
    --------
    >>> from sklearn_calib.estimators import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device("auto").type in ("cpu", "cuda")
    True
    """
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"Expected `device` to be 'auto' or a torch device such as 'cpu' or 'cuda', "
            f"got {device!r}."
        ) from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"`device` is {device!r} but CUDA is not available; use 'auto' or 'cpu'.")
    return resolved


def autocast_dtype(precision, device):
    """Return the autocast dtype for ``precision`` on ``device``, or None for float32.

    Parameters
    ----------
    precision : {"auto", "fp32", "bf16"}
        "auto" is bf16 on CUDA and float32 elsewhere.
    device : torch.device

    Returns
    -------
    dtype : torch.dtype or None
    """
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def autocast(dtype, device):
    """Return an autocast context for ``dtype`` (a null context for None).

    The weight-cast cache is disabled, as CUDA graph capture requires.
    """
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=False)


def fits_on_device(nbytes, device):
    """Whether ``nbytes`` of training data should be kept on ``device`` for the whole fit."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes <= DEVICE_DATA_FRACTION * free
