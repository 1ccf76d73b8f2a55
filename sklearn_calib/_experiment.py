"""The main job's experiment: its data sets and splits, its models and its diagrams.

Post-hoc calibration and evaluation are those of :mod:`sklearn_calib.evaluation`, the
pipeline the experiments of ``benchmarks/`` use too.
"""

import math
import time
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.utils import Bunch

from .calibrators import HistogramBinning, TemperatureScaling
from .datasets import load_digits_images, load_fashion_mnist
from .estimators import NetClassifier
from .evaluation import posthoc_predictions

#: Bins of the histogram-binning calibrator.
HB_BINS = 15

#: Post-hoc calibrations of every model: row suffix to calibrator.
CALIBRATIONS = {"TS": TemperatureScaling(), "HB": HistogramBinning(n_bins=HB_BINS)}


@dataclass(frozen=True)
class _DatasetSpec:
    title: str
    calibration_size: float | int  # default fraction or number of training images held out
    cpu_n_train: int | None  # default training-set cap on the CPU (None: all)
    baselines: bool  # whether scikit-learn's models are also reported


DATASETS = {
    "digits": _DatasetSpec("digits", 0.25, None, True),
    "fashion_mnist": _DatasetSpec("Fashion-MNIST", 5000, 5000, False),
}


def default_n_train(dataset, device):
    """Return the default training-set cap: all the data on CUDA, a subset on the CPU.

    Parameters
    ----------
    dataset : {"digits", "fashion_mnist"}
    device : torch.device
        The device the networks train on.

    Returns
    -------
    n_train : int or None
        None for the whole training split.
    """
    return None if device.type == "cuda" else DATASETS[dataset].cpu_n_train


def load_data(
    dataset, *, data_home=None, test_size=0.4, calibration_size=None, n_train=None, seed=0
):
    """Load a data set as images and split it into training, calibration and test parts.

    Digits are split into a test part (``test_size``) and the rest; Fashion-MNIST keeps
    its own 10,000 test images. The calibration part is then held out of the rest, and
    the training part is cut to ``n_train`` images; all splits are stratified.

    Parameters
    ----------
    dataset : {"digits", "fashion_mnist"}
    data_home : str or path-like, default=None
        Folder of the Fashion-MNIST files (see :func:`~sklearn_calib.datasets.load_fashion_mnist`).
    test_size : float, default=0.4
        Fraction of the digits held out for the report.
    calibration_size : float or int, default=None
        Fraction or number of the non-test images that calibrate; None for the data set's
        default (a quarter of the digits, 5,000 Fashion-MNIST images).
    n_train : int, default=None
        Largest number of training images (a stratified subset); None for all.
    seed : int, default=0
        Seed of the splits.

    Returns
    -------
    data : Bunch
        ``X_train``, ``y_train``, ``X_calibration``, ``y_calibration``, ``X_test``,
        ``y_test`` (images of shape (n, 1, H, W) in [0, 1] and int64 labels), ``classes``,
        ``name`` and ``description``.

    Raises
    ------
    FileNotFoundError
        If the Fashion-MNIST files are missing; the message says how to install them.
    ValueError
        If a size leaves a part without one image of each class.
    """
    spec = DATASETS[dataset]
    if dataset == "digits":
        X, y = load_digits_images(return_X_y=True)
        X, X_test, y, y_test = train_test_split(
            X, y, test_size=test_size, stratify=y, random_state=seed
        )
    else:
        X, y, X_test, y_test = load_fashion_mnist(data_home=data_home, return_X_y=True)
    classes = np.unique(y)
    if calibration_size is None:
        calibration_size = spec.calibration_size
    n_classes, n_images = len(classes), len(y)
    held_out = calibration_size
    if isinstance(calibration_size, float) and 0 < calibration_size < 1:
        held_out = math.ceil(calibration_size * n_images)  # as train_test_split rounds it
    if not n_classes <= held_out <= n_images - n_classes:
        raise ValueError(
            f"Expected `calibration_size` to hold out between {n_classes} and "
            f"{n_images - n_classes} of the {n_images} non-test images (one per class in each "
            f"part), got {calibration_size}"
            + (f" ({held_out} images)." if held_out != calibration_size else ".")
        )
    X_train, X_calibration, y_train, y_calibration = train_test_split(
        X, y, test_size=calibration_size, stratify=y, random_state=seed
    )
    if n_train is not None and n_train < len(y_train):
        if n_train < len(classes):
            raise ValueError(
                f"Expected `n_train` >= {len(classes)} (one image per class), got {n_train}."
            )
        X_train, _, y_train, _ = train_test_split(
            X_train, y_train, train_size=n_train, stratify=y_train, random_state=seed
        )
    size = "x".join(map(str, X_test.shape[2:]))
    description = (
        f"{spec.title}: {size} images, {len(classes)} classes; train {len(y_train)}, "
        f"calibration {len(y_calibration)}, test {len(y_test)} (seed {seed})"
    )
    return Bunch(
        X_train=X_train,
        y_train=y_train,
        X_calibration=X_calibration,
        y_calibration=y_calibration,
        X_test=X_test,
        y_test=y_test,
        classes=classes,
        name=dataset,
        description=description,
    )


def _flat_float64(X):
    """Pixels as float64 rows, the input of scikit-learn's models."""
    return X.reshape(len(X), -1).astype(np.float64)


def build_models(dataset, *, network="mlp", epochs=30, lr=0.01, gamma=3.0, device="auto", seed=0):
    """Return the models to compare, by name: networks trained with CE and focal loss.

    Parameters
    ----------
    dataset : {"digits", "fashion_mnist"}
        Digits also get scikit-learn's LogisticRegression and GaussianNB (on the pixels).
    network : {"mlp", "cnn"}, default="mlp"
        Network of both :class:`~sklearn_calib.estimators.NetClassifier` models.
    epochs : int, default=30
        Training epochs.
    lr : float, default=0.01
        Learning rate (AdamW).
    gamma : float, default=3.0
        Focal loss exponent.
    device : str or torch.device, default="auto"
        Device of the networks.
    seed : int, default=0
        Seed of the networks.

    Returns
    -------
    models : dict of str to classifier
        Unfitted models.
    """
    models = {}
    if DATASETS[dataset].baselines:
        models["LogisticRegression"] = make_pipeline(
            FunctionTransformer(_flat_float64), StandardScaler(), LogisticRegression(max_iter=1000)
        )
        models["GaussianNB"] = make_pipeline(FunctionTransformer(_flat_float64), GaussianNB())
    common = {"max_epochs": epochs, "lr": lr, "device": device, "random_state": seed}
    models[f"{network}-CE"] = NetClassifier(network, criterion="ce", **common)
    models[f"{network}-focal{gamma:g}"] = NetClassifier(
        network, criterion="focal", criterion__gamma=gamma, **common
    )
    return models


def fit_and_calibrate(models, data, *, log=print):
    """Fit each model, calibrate it post hoc, and predict the test images.

    Every model is fitted on the training part; each of :data:`CALIBRATIONS` is then
    fitted on its scores of the calibration part
    (:func:`~sklearn_calib.evaluation.posthoc_predictions`).

    Parameters
    ----------
    models : dict of str to classifier
        Unfitted models, by name.
    data : Bunch
        Splits from :func:`load_data`.
    log : callable, default=print
        Called with one line per fitted model.

    Returns
    -------
    predictions : dict of str to Prediction
        Row name (the model's name, then ``+TS`` and ``+HB``) to its test probabilities
        and fitted temperature (None but for temperature scaling).
    """
    predictions = {}
    for name, model in models.items():
        start = time.perf_counter()
        model.fit(data.X_train, data.y_train)
        log(f"fitted {name} in {time.perf_counter() - start:.1f} s")
        calibrated = posthoc_predictions(
            model, CALIBRATIONS, data.X_calibration, data.y_calibration, data.X_test
        )
        for suffix, prediction in calibrated.items():
            predictions[f"{name}+{suffix}" if suffix else name] = prediction
    return predictions


def save_reliability_diagrams(predictions, y_test, path, *, labels=None, n_bins=15):
    """Draw one reliability diagram per row of ``predictions`` and save them as a PNG.

    The panels fill a grid with one row per model and one column per calibration
    (uncalibrated, then :data:`CALIBRATIONS`), in the order of ``predictions``.

    Parameters
    ----------
    predictions : dict of str to Prediction
        As returned by :func:`fit_and_calibrate`.
    y_test : ndarray of shape (n_test,)
        True test labels.
    path : str or path-like
        PNG file to write.
    labels : array-like of shape (n_classes,), default=None
        Class of each probability column.
    n_bins : int, default=15
        Number of bins.
    """
    from matplotlib.figure import Figure

    from .plotting import ReliabilityDisplay

    n_columns = 1 + len(CALIBRATIONS)
    n_rows = -(-len(predictions) // n_columns)
    figure = Figure(figsize=(4.5 * n_columns, 5.5 * n_rows), layout="constrained")
    axes = figure.subplots(2 * n_rows, n_columns, squeeze=False, height_ratios=[3, 1] * n_rows)
    for index, (name, (proba, _)) in enumerate(predictions.items()):
        row, column = divmod(index, n_columns)
        display = ReliabilityDisplay.from_predictions(
            y_test,
            proba,
            n_bins=n_bins,
            labels=labels,
            ax=axes[2 * row, column],
            hist_ax=axes[2 * row + 1, column],
        )
        display.ax_.get_legend().remove()
        display.ax_.set_title(f"{name} (ECE {100 * display.ece:.2f} %)")
    figure.legend(
        [display.bars_, display.gap_bars_, display.line_],
        ["Accuracy", "Gap to confidence", "Perfectly calibrated"],
        loc="outside upper center",
        ncols=3,
    )
    figure.savefig(path, dpi=80)
