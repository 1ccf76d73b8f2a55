"""Expected calibration error of temperature-scaled logits over a grid of temperatures.

Dividing logits by ``T > 0`` keeps the predicted class, so only the confidence
``1 / sum_k exp((z_k - z_max) / T)`` depends on ``T``; one vectorised pass per block of
temperatures gives every grid point's ECE. Bins follow the library's rule ((lower, upper]
on ``linspace(0, 1, M + 1)``, 0 in the first bin) and sums are float64, so the values equal
:func:`sklearn_calib.scoring.expected_calibration_error` of ``softmax(logits / T)``.
"""

import numpy as np
import torch

from ..metrics._core._binning import uniform_bin_edges

#: Elements of one (temperatures x samples x classes) block.
_BLOCK = 1 << 24


def _tensor(values, device):
    """Return ``values`` as a tensor on ``device``; read-only arrays (memmaps) are copied.

    torch shares a numpy array's memory and warns when the array is read-only.
    """
    if isinstance(values, np.ndarray):
        values = torch.from_numpy(np.require(values, requirements=["W"]))
    return torch.as_tensor(values, device=device)


def grid_ece(logits, y_index, temperatures, *, n_bins=15, sample_weight=None, device=None):
    """ECE (top-label, equal-width bins, l1) of ``softmax(logits / T)`` for every ``T``.

    Parameters
    ----------
    logits : ndarray or torch.Tensor of shape (n_samples, n_classes)
        Finite logits.
    y_index : ndarray or torch.Tensor of shape (n_samples,)
        Column index of each sample's class.
    temperatures : array-like of shape (n_temperatures,)
        Positive temperatures.
    n_bins : int, default=15
        Number of equal-width bins.
    sample_weight : ndarray of shape (n_samples,), default=None
        Non-negative sample weights.
    device : str, torch.device or None, default=None
        Where to compute; None: where ``logits`` is (the CPU for numpy input).

    Returns
    -------
    ece : ndarray of shape (n_temperatures,), float64
        The ECE at each temperature of ``temperatures``.

    See Also
    --------
    TemperatureScaling : ``objective="ece"`` picks the grid temperature of lowest ECE.
    sklearn_calib.metrics.expected_calibration_error : The ECE of one set of probabilities.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_calib.calibrators import grid_ece
    >>> logits = np.array([[4.0, 0.0], [0.0, 4.0], [3.0, 0.0], [0.0, 2.0]])
    >>> grid_ece(logits, np.array([0, 1, 1, 1]), [0.5, 1.0, 2.0]).round(4)
    array([0.2447, 0.259 , 0.3312])
    """
    z = _tensor(logits, device).to(torch.float64)
    device = z.device
    y = _tensor(y_index, device).long()
    temps = torch.as_tensor(np.asarray(temperatures, dtype=np.float64), device=device)
    if temps.ndim != 1 or len(temps) == 0 or not bool((temps > 0).all()):
        raise ValueError(f"Expected a non-empty 1-D grid of positive temperatures, got {temps}.")
    n, k = z.shape
    weight = (
        torch.ones(n, dtype=torch.float64, device=device)
        if sample_weight is None
        else _tensor(sample_weight, device).to(torch.float64)
    )
    offsets = z - z.max(dim=1, keepdim=True).values
    correct = (z.argmax(dim=1) == y).to(torch.float64)
    edges = torch.as_tensor(uniform_bin_edges(n_bins), device=device)
    step = max(1, _BLOCK // max(n * k, 1))
    result = []
    for start in range(0, len(temps), step):
        block = temps[start : start + step]
        confidence = 1.0 / torch.exp(offsets[None] / block[:, None, None]).sum(dim=2)
        bins = (torch.searchsorted(edges, confidence, right=False) - 1).clamp_(0, n_bins - 1)
        bins += n_bins * torch.arange(len(block), device=device)[:, None]
        gaps = torch.zeros(len(block) * n_bins, dtype=torch.float64, device=device)
        gaps.index_add_(0, bins.reshape(-1), ((correct - confidence) * weight).reshape(-1))
        result.append(gaps.view(len(block), n_bins).abs().sum(dim=1) / weight.sum())
    return torch.cat(result).cpu().numpy()
