"""MetaNetClassifier: a NetClassifier whose regulariser is meta-learned for calibration."""

import numbers
import warnings
from functools import partial

import numpy as np
import torch
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ..losses import resolve_loss
from ..losses._base import GammaWeighted
from ..losses._calibration import SECE_ACCURACIES
from ._device import autocast, autocast_dtype
from ._gamma_net import ElementwiseL2, GammaNet, build_regularizer
from ._inference import evaluate
from ._inputs import split_input
from ._lookahead import LOOKAHEAD_PARAMETERS, LOOKAHEADS, Lookahead, resolve_lookahead
from ._meta_step import (
    META_LOSSES,
    MetaBatches,
    meta_objective,
    meta_step,
    network_meta_step,
)
from ._net import NetClassifier
from ._optimizer import check_optimizer_values
from ._rng import resolve_split_seed
from ._targets import class_indices

_REGULARIZERS = {"gamma_net": GammaNet, "l2": ElementwiseL2}
_POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
_DEPRECATED = Hidden(StrOptions({"deprecated"}))

#: The former parameters of the virtual step and their former defaults.
_FORMER_LOOKAHEAD = {
    "virtual_step": "network",
    "virtual_lr": None,
    "virtual_lr_scale": 20.0,
    "meta_batch_size": 512,
}


def former_lookahead(values, loss_reduction):
    """Return the Lookahead that the former parameters of the virtual step meant.

    The virtual step followed the gradient of the training loss as the net reduced it.

    Parameters
    ----------
    values : dict
        Some of ``virtual_step``, ``virtual_lr``, ``virtual_lr_scale`` and
        ``meta_batch_size``; the others take their former defaults.
    loss_reduction : {"mean", "sum"}

    Returns
    -------
    lookahead : Lookahead
    """
    values = {**_FORMER_LOOKAHEAD, **values}
    return Lookahead(
        values["virtual_step"],
        loss=loss_reduction,
        lr_scale=values["virtual_lr_scale"],
        lr=values["virtual_lr"],
        meta_batch_size=values["meta_batch_size"],
    )


class MetaNetClassifier(NetClassifier):
    """A NetClassifier trained with a meta-learned regulariser for calibration.

    Meta-regularisation (Wang and Golebiowski 2024, extending Bohdal et al. 2021): ``fit``
    splits the data, stratified and seeded by ``random_state``, into training, validation
    and meta-validation parts (8:1:1 by default). Each step takes a training batch and a
    meta-validation batch and *looks ahead*: it makes a virtual SGD step on the
    regularised training loss, kept differentiable, computes the meta loss of the meta
    batch through the stepped network, steps the regulariser's parameters with Adam, and
    then makes the real update of the network with the updated regulariser (reduced and
    clipped as ``loss_reduction`` and ``grad_clip`` say).

    The default lookahead is Bohdal et al.'s (2021), which Wang and Golebiowski's code
    takes: it steps the classifier head only, on the gradient of the training batch's
    summed loss, at the optimiser's current learning rate, unclipped, and the meta batches
    have the training batch's size. Under ``loss_reduction="mean"`` the same displacement
    is the learning rate times the batch size times the gradient of the mean loss, so the
    lookahead moves the head alike in every recipe (see ``lookahead``).

    The four meta-learning methods of Wang and Golebiowski's Table 1:

    ================  ===============  =============
    method            ``regularizer``  ``meta_loss``
    ================  ===============  =============
    FLgamma-SECE      "gamma_net"      "sece"
    FLgamma-DECE      "gamma_net"      "dece"
    CE-DECE           "l2"             "dece"
    CE-SECE           "l2"             "sece"
    ================  ===============  =============

    Parameters
    ----------
    module : str or type of torch.nn.Module or torch.nn.Module, default="mlp"
        As in :class:`NetClassifier`; the network must have ``features`` (the penultimate
        representation, shape (n, d)) and ``head`` (an ``nn.Linear``) with ``forward(x) ==
        head(features(x))``, as every network of the zoo has.
    regularizer : {"gamma_net", "l2"}, default="gamma_net"
        "gamma_net": a gamma-Net predicts one focal-loss gamma per training sample
        from its detached penultimate features (``gamma = |x~ W| / tau``, starting at 1).
        "l2": a learnable element-wise L2 penalty on the head's weight and bias
        (one coefficient per entry, starting at 0 and kept >= 0), added to the summed
        training loss as in Bohdal et al.'s code (under ``loss_reduction="mean"`` the
        real step's penalty is divided by the batch size, as the loss is).
    meta_loss : {"sece", "dece", "ce_dece"}, default="sece"
        Meta objective on the meta-validation batch: SECE (Wang and Golebiowski), DECE
        (Bohdal et al.), or CE + 0.5 DECE, the objective of Bohdal et al.'s code.
    criterion : str, type of torch.nn.Module or None, default=None
        The training loss. None: focal loss with ``gamma=1`` for "gamma_net" (the
        per-sample gamma replaces the criterion's own, which is used only for the recorded
        ``valid_loss``), cross-entropy for "l2". "gamma_net" needs a criterion whose weight
        takes a per-sample ``gamma`` ("focal", "focal_gra", "inverse_focal",
        "dual_focal", ...).
    train_split : float, callable or None, default=0.1
        The validation part. A float is its fraction of all the data (stratified, seeded);
        a callable ``(dataset, y) -> (train, valid)`` is applied to what remains after the
        meta-validation part; None: no validation part. The history records
        ``valid_loss`` and ``valid_acc`` as in :class:`NetClassifier`.
    meta_fraction : float, default=0.1
        Fraction of all the data held out as the meta-validation part (stratified, seeded).
    lookahead : {"bohdal2021", "network_tuned"} or Lookahead, default="bohdal2021"
        The virtual step (:class:`~sklearn_calib.estimators.Lookahead`). "bohdal2021":
        Bohdal et al.'s step, described above. "network_tuned": a variant of ours that
        steps every parameter of the network by 20 times the current learning rate on
        the gradient of the mean loss, with meta batches of 512, tuned on a positive
        control with noisy labels (see the user guide); it costs a second-order pass
        through the whole network. A ``Lookahead`` sets each part.
    tau : float, default=0.01
        Temperature of the gamma-Net.
    bandwidth : float, default=0.01
        SECE's Gaussian-kernel bandwidth (the paper's value).
    include_self : bool, default=True
        Whether SECE's sums include ``j = i`` (see
        :func:`~sklearn_calib.losses.smooth_calibration_error`).
    sece_accuracy : {"soft", "hard"}, default="soft"
        The accuracy that SECE smooths: "soft", the all-pairs soft accuracy of Qin et al.
        (2010) with temperature ``t_a``, as Wang and Golebiowski train with (the gradient
        also flows through the accuracy); "hard", the 0/1 correctness of the SECE metric.
    n_bins : int, default=15
        DECE's number of soft bins.
    t_a : float, default=100.0
        Soft-ranking temperature of DECE's accuracy and SECE's soft accuracy.
    t_b : float, default=0.01
        DECE's soft-binning temperature.
    meta_lr : float or None, default=None
        Step size of the regulariser's Adam optimiser, in the regulariser's own units.
        "gamma_net": about the largest change of a sample's gamma that one Adam step
        makes (Adam's learning rate is ``meta_lr * tau / (max_k ||A_k||_1 + ||W||_1)``
        with the gamma-Net's parameters at its initialisation, about
        ``meta_lr / (100 sqrt(d))``); None means 1e-2. "l2": Adam's learning rate on the
        coefficients; None means 1e-3 (Bohdal et al.'s default). Ignored when
        ``meta_optimizer__lr`` is given. See Notes.
    virtual_step : {"network", "head"}
        Deprecated since 0.2.0 and removed in 0.3.0, as are ``virtual_lr``,
        ``virtual_lr_scale`` and ``meta_batch_size``: use ``lookahead=Lookahead(
        parameters=virtual_step, loss=loss_reduction, lr_scale=virtual_lr_scale,
        lr=virtual_lr, meta_batch_size=meta_batch_size)``, which is what any of them set
        means (with their former defaults "network", 20.0, None and 512).
    virtual_lr : float or None
        Deprecated (see ``virtual_step``).
    virtual_lr_scale : float
        Deprecated (see ``virtual_step``).
    meta_batch_size : int or None
        Deprecated (see ``virtual_step``).
    keep_regularizer : bool, default=True
        Whether pickling keeps the regulariser (``meta_regularizer_``) and its optimiser.
        Prediction never needs them; they are needed to continue meta-learning with
        ``partial_fit``/``warm_start`` (a continued fit without them starts a new
        regulariser) and by :meth:`sample_gamma`.
    **kwargs
        Every other parameter of :class:`NetClassifier` (``lr``, ``max_epochs``,
        ``batch_size``, ``optimizer``, ``recipe``, ``augment``, ``device``,
        ``random_state``, ...) and the prefixed ones (``module__*``, ``criterion__*``,
        ``optimizer__*``). ``meta_optimizer__*`` are keyword arguments of
        the regulariser's ``torch.optim.Adam`` (``betas``, ``eps``, ``weight_decay``, ...);
        ``meta_optimizer__lr`` is Adam's actual learning rate on the regulariser's
        parameters and overrides ``meta_lr`` (``meta_optimizer__lr=1e-3`` is Bohdal et
        al.'s default, which Wang and Golebiowski's code runs with; see Notes). Set on a
        fitted net, they apply from the next ``fit`` or ``partial_fit``.

    Attributes
    ----------
    meta_regularizer_ : torch.nn.Module or None
        The learned regulariser: ``GammaNet`` or ``ElementwiseL2`` (module
        ``sklearn_calib.estimators._gamma_net``); None after unpickling with
        ``keep_regularizer=False``.
    meta_optimizer_ : torch.optim.Adam or None
        Its optimiser.
    history_ : skorch.History
        Per epoch, besides :class:`NetClassifier`'s entries: ``meta_loss`` (mean over the
        epoch's steps, before each regulariser step) and, for "gamma_net", ``gamma_mean``
        and ``gamma_std`` (population std) of the per-sample gamma on the validation part
        (on the meta-validation part when ``train_split=None``), computed in evaluation
        mode at the end of the epoch; for "l2", ``l2_mean`` and ``l2_std`` of the learned
        coefficients.
    Other attributes are those of :class:`NetClassifier`.

    Notes
    -----
    *The gamma-Net's step is in units of gamma,* a deviation from Bohdal et al.'s
    defaults, which Wang and Golebiowski's code runs with: their Adam (learning rate
    1e-3) steps regularisation strengths directly (L2 coefficients, label smoothing).
    With the gamma-Net's ``1 / tau`` gain (``tau = 0.01``), a step of 1e-3 on each of its
    parameters moves gamma by up to ``1e-3 (||x~||_1 + ||W||_1) / tau``, about one unit
    for the zoo's networks: gamma then jumps to tens within the first epoch and
    accuracy collapses. ``meta_lr`` is therefore the largest change of gamma per step;
    ``meta_optimizer__lr=1e-3`` gives the literal setting. The user guide gives the
    measurements behind ``meta_lr``'s default and the lookaheads.

    The meta batch goes through the network in training mode (as the training batch, and
    as in Bohdal et al.'s code). With the head-only lookahead the meta batch's features
    are computed without gradient by the network itself, so batch-norm running
    statistics also see the meta-validation inputs (never their labels); with the
    whole-network one they are updated on copies, so the meta step leaves them
    unchanged. Meta batches are neither augmented nor mixed. The step makes no host
    synchronisation, so on CUDA it is captured in a CUDA graph like NetClassifier's
    (unless the meta-validation data does not fit on the device). The gamma statistics
    cost one more inference pass over the validation part and one more host
    synchronisation per epoch. skorch's ``save_params`` does not save the regulariser;
    pickling does.

    Sample and class weights (``fit(X, y, sample_weight=...)``, ``class_weight``) weigh
    the regularised training loss, in the virtual step as in the real update, and the
    recorded validation loss; the meta objective on the meta-validation part is not
    weighted.

    The meta step plugs into NetClassifier's training run through skorch's hooks:
    :meth:`get_split_datasets` holds out the meta-validation part and hands its batches,
    on the device, to the run (``run.held_out["meta"]``); the net's ``on_epoch_begin``
    reshuffles them and its ``on_epoch_end`` records the statistics;
    :meth:`train_step_single` makes the meta step from the run's next meta batch, once
    per training batch, before the network's gradients are computed (outside a training
    run it steps the network with the regulariser as it is).

    References
    ----------
    C. Wang and J. Golebiowski, "Towards Unbiased Calibration using
    Meta-Regularization", Transactions on Machine Learning Research, 2024.

    O. Bohdal, Y. Yang and T. Hospedales, "Meta-Calibration: Learning of Model
    Calibration Using Differentiable Expected Calibration Error", arXiv:2106.09613, 2021.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_calib.estimators import MetaNetClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> net = MetaNetClassifier(max_epochs=3, random_state=0).fit(X / 16, y)
    >>> net.predict_proba(X[:2] / 16).shape
    (2, 10)
    >>> sorted(k for k in net.history[-1] if k.startswith("gamma"))
    ['gamma_mean', 'gamma_std']
    """

    train_step_capturable = True

    #: ``meta_optimizer__*`` parameters route to the regulariser's Adam (skorch's prefixes);
    #: ``meta_optimizer_`` is a component to persist like the network's optimiser.
    prefixes_ = [*NetClassifier.prefixes_, "meta_optimizer"]
    cuda_dependent_attributes_ = [*NetClassifier.cuda_dependent_attributes_, "meta_optimizer_"]

    #: A new regulariser or ``tau`` shapes the fitted regulariser (and ``regularizer`` the
    #: default loss): a continued fit becomes a fresh one.
    fresh_fit_params = ("regularizer", "tau")

    _parameter_constraints = {
        **NetClassifier._parameter_constraints,
        "regularizer": [StrOptions(set(_REGULARIZERS))],
        "meta_loss": [StrOptions(set(META_LOSSES))],
        "meta_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "tau": [_POSITIVE],
        "bandwidth": [_POSITIVE],
        "include_self": ["boolean"],
        "sece_accuracy": [StrOptions(set(SECE_ACCURACIES))],
        "n_bins": [Interval(numbers.Integral, 1, None, closed="left")],
        "t_a": [_POSITIVE],
        "t_b": [_POSITIVE],
        "meta_lr": [_POSITIVE, None],
        "lookahead": [StrOptions(set(LOOKAHEADS)), Lookahead],
        "virtual_step": [StrOptions(set(LOOKAHEAD_PARAMETERS)), _DEPRECATED],
        "virtual_lr": [_POSITIVE, None, _DEPRECATED],
        "virtual_lr_scale": [_POSITIVE, _DEPRECATED],
        "meta_batch_size": [Interval(numbers.Integral, 1, None, closed="left"), None, _DEPRECATED],
        "keep_regularizer": ["boolean"],
    }

    def __init__(
        self,
        module="mlp",
        *,
        regularizer="gamma_net",
        meta_loss="sece",
        criterion=None,
        train_split=0.1,
        meta_fraction=0.1,
        lookahead="bohdal2021",
        tau=0.01,
        bandwidth=0.01,
        include_self=True,
        sece_accuracy="soft",
        n_bins=15,
        t_a=100.0,
        t_b=0.01,
        meta_lr=None,
        virtual_step="deprecated",
        virtual_lr="deprecated",
        virtual_lr_scale="deprecated",
        meta_batch_size="deprecated",
        keep_regularizer=True,
        **kwargs,
    ):
        super().__init__(module, criterion=criterion, train_split=train_split, **kwargs)
        self.regularizer = regularizer
        self.meta_loss = meta_loss
        self.meta_fraction = meta_fraction
        self.lookahead = lookahead
        self.tau = tau
        self.bandwidth = bandwidth
        self.include_self = include_self
        self.sece_accuracy = sece_accuracy
        self.n_bins = n_bins
        self.t_a = t_a
        self.t_b = t_b
        self.meta_lr = meta_lr
        self.virtual_step = virtual_step
        self.virtual_lr = virtual_lr
        self.virtual_lr_scale = virtual_lr_scale
        self.meta_batch_size = meta_batch_size
        self.keep_regularizer = keep_regularizer

    # ------------------------------------------------------------------ the lookahead

    def _check_params(self):
        super()._check_params()
        self._resolved_lookahead(warn=True)

    def _resolved_lookahead(self, warn=False):
        """Return the Lookahead of ``lookahead``, or of the deprecated parameters if set.

        Raises a ValueError when both are set; ``warn`` warns of the deprecated ones.
        """
        former = {name: getattr(self, name) for name in _FORMER_LOOKAHEAD}
        former = {name: value for name, value in former.items() if value != "deprecated"}
        if not former:
            return resolve_lookahead(self.lookahead)
        if not (isinstance(self.lookahead, str) and self.lookahead == "bohdal2021"):
            raise ValueError(
                f"Expected either `lookahead` or the deprecated {sorted(former)}, got "
                f"lookahead={self.lookahead!r} and {former}."
            )
        lookahead = former_lookahead(former, self.loss_reduction)
        if warn:
            names = ", ".join(f"`{name}`" for name in sorted(former))
            verb = "is" if len(former) == 1 else "are"
            warnings.warn(
                f"{names} {verb} deprecated since 0.2.0 and will be removed in 0.3.0; use "
                f"lookahead={lookahead!r}, the same virtual step.",
                FutureWarning,
                stacklevel=5,
            )
        return lookahead

    # ------------------------------------------------------------------ components

    def initialize_criterion(self):
        """Build the loss; None is focal loss (gamma 1) for "gamma_net", cross-entropy for "l2".

        Returns
        -------
        self : MetaNetClassifier
            The net, with ``criterion_``.
        """
        if self.criterion is not None:
            return super().initialize_criterion()
        kwargs = self.get_params_for("criterion")
        if self.regularizer == "gamma_net":
            loss = resolve_loss("focal")(**{"gamma": 1.0, **kwargs})
        else:
            loss = resolve_loss("ce")(**kwargs)
        self.criterion_ = loss.to(self.device_)
        return self

    def initialize_optimizer(self, triggered_directly=None):
        """Build the network's optimiser, then a new regulariser and its Adam optimiser.

        Parameters
        ----------
        triggered_directly : None
            Unused; skorch's signature.

        Returns
        -------
        self : MetaNetClassifier
            The net, with ``optimizer_``, ``meta_regularizer_`` and ``meta_optimizer_``.
        """
        super().initialize_optimizer()
        self._build_regularizer(self._checked_head())
        return self

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        """Check the network and criterion; renew the regulariser if they no longer fit it.

        A continued fit keeps a fitting regulariser and writes the current ``tau`` and
        ``meta_optimizer__*`` settings into it and its optimiser.

        Parameters
        ----------
        net : MetaNetClassifier
            The net (skorch's callback signature).
        X, y : array-like, default=None
            The training data.
        **kwargs
            Passed to skorch's ``on_train_begin``.
        """
        super().on_train_begin(net, X=X, y=y, **kwargs)
        head = self._checked_head()
        current = self.meta_regularizer_
        if not (isinstance(current, _REGULARIZERS[self.regularizer]) and current.matches(head)):
            self._build_regularizer(head)
            return
        if isinstance(current, GammaNet):
            current.tau = self.tau
        settings = self._meta_optimizer_params(current)
        for group in self.meta_optimizer_.param_groups:
            for name, value in settings.items():
                if isinstance(group.get(name), torch.Tensor):
                    group[name].fill_(value)
                else:
                    group[name] = value

    def _checked_head(self):
        """Return the network's classifier head after checking the network and criterion."""
        head = getattr(self.module_, "head", None)
        if not isinstance(head, nn.Linear) or not callable(getattr(self.module_, "features", None)):
            raise ValueError(
                f"{type(self).__name__} needs a network with a `features` module (the "
                "penultimate representation) and a `head` nn.Linear, with forward(x) == "
                f"head(features(x)); got {type(self.module_).__name__}."
            )
        if self.regularizer == "gamma_net" and not isinstance(self.criterion_, GammaWeighted):
            raise ValueError(
                "regularizer='gamma_net' needs a criterion that takes a per-sample gamma "
                "(focal, focal_gra, inverse_focal, dual_focal, dual_focal_gra, bsce, "
                f"bsce_gra), got {type(self.criterion_).__name__}."
            )
        return head

    def _build_regularizer(self, head):
        """Build a new regulariser for ``head`` and its Adam optimiser (on CUDA fused,
        capturable, with its learning rate as a device tensor)."""
        with self._current_init_context("regularizer"):
            self.meta_regularizer_ = build_regularizer(self.regularizer, head, self.tau)
            params = self._meta_optimizer_params(self.meta_regularizer_)
            if self.device_.type == "cuda":
                params["lr"] = torch.tensor(params["lr"], dtype=torch.float32, device=self.device_)
                params = {"fused": True, "capturable": True, **params}
            self.meta_optimizer_ = torch.optim.Adam(self.meta_regularizer_.parameters(), **params)

    def _meta_optimizer_params(self, regularizer):
        """Adam's keyword arguments: ``meta_optimizer__*``; lr from ``meta_lr`` if unset.

        They are checked as the network optimiser's are (a finite lr > 0, then Adam's own
        checks) before they reach the optimiser.
        """
        settings = self.get_params_for("meta_optimizer")
        sources = {name: f"meta_optimizer__{name}" for name in settings}
        if "lr" not in settings:
            step = regularizer.default_meta_lr if self.meta_lr is None else self.meta_lr
            settings["lr"] = step * regularizer.lr_scale()
            sources["lr"] = "meta_lr"
        check_optimizer_values(torch.optim.Adam, settings, sources)
        return settings

    # ------------------------------------------------------------------ fitting

    def get_split_datasets(self, X, y=None, split_seed=None, run=None, **fit_params):
        """Hold out the meta-validation part, then split the rest as NetClassifier does.

        Parameters
        ----------
        X : FitDataset or array-like of shape (n_samples, ...)
            As in :meth:`NetClassifier.get_split_datasets`.
        y : array-like of shape (n_samples,) or None, default=None
            As in :meth:`NetClassifier.get_split_datasets`.
        split_seed : int or None, default=None
            As in :meth:`NetClassifier.get_split_datasets`; it also draws the
            meta-validation part.
        run : TrainingRun or None, default=None
            The training run, which receives the meta-validation batches on the device
            (``run.held_out["meta"]``, a ``MetaBatches``).
        **fit_params
            As in :meth:`NetClassifier.get_split_datasets`.

        Returns
        -------
        dataset_train : FitDataset
            The training part.
        dataset_valid : FitDataset or None
            The validation part, None without a split.
        """
        data = split_input(self, X, y)
        seed = resolve_split_seed(self.random_state, split_seed)
        float_split = isinstance(self.train_split, numbers.Real)
        if float_split and self.train_split + self.meta_fraction >= 1:
            raise ValueError(
                f"Expected `train_split + meta_fraction` < 1 so that training data remains, "
                f"got {self.train_split} + {self.meta_fraction}."
            )
        n = len(data.X)
        n_meta = max(1, round(self.meta_fraction * n))
        n_valid = max(1, round(self.train_split * n)) if float_split else 0
        if n - n_meta - n_valid < 1:
            raise ValueError(
                f"{type(self).__name__} needs at least one training sample besides "
                f"{n_meta} meta-validation and {n_valid} validation samples, got {n} samples."
            )
        rng = np.random.default_rng(seed)
        meta, rest = _stratified_holdout(data.y_index, n_meta, rng)
        if float_split:
            holdout = _stratified_holdout(data.y_index[rest], n_valid, rng)
            valid, train = (rest[part] for part in holdout)
            dataset_train, dataset_valid = data.subset(train), data.subset(valid)
        else:
            dataset_train, dataset_valid = super().get_split_datasets(
                data.subset(rest), split_seed=seed, **fit_params
            )
        if run is not None:
            size = self._resolved_lookahead().meta_batch(self.batch_size)
            run.held_out["meta"] = MetaBatches(data.X[meta], data.y_index[meta], self.device_, size)
        return dataset_train, dataset_valid

    def train_step_is_capturable(self, run=None):
        """Whether :meth:`train_step` may be captured: yes while the meta data is on the device.

        Parameters
        ----------
        run : TrainingRun or None, default=None
            The training run, whose meta-validation batches are checked.

        Returns
        -------
        capturable : bool
            Whether the step may be captured.
        """
        resident = run is None or run.held_out["meta"].resident
        return super().train_step_is_capturable(run) and resident

    def train_step_single(self, batch, run=None, **fit_params):
        """Make one meta step, then compute the network's regularised loss and gradients.

        The meta step (:func:`~sklearn_calib.estimators._meta_step.meta_step`) updates
        the regulariser from the run's next meta-validation batch; ``train_step`` then
        steps the network with these gradients. Outside a training run (``run=None``)
        there are no meta batches: the network's step uses the regulariser as it is
        (NetClassifier's step if there is none, after loading a model pickled with
        ``keep_regularizer=False``).

        Parameters
        ----------
        batch : tuple of (torch.Tensor, target)
            Inputs and targets of a training batch on ``device_`` (a class-index tensor,
            a WeightedTarget or a MixedTarget).
        run : TrainingRun or None, default=None
            The training run, which holds the meta-validation batches.
        **fit_params
            Unused; skorch's signature.

        Returns
        -------
        step : dict
            ``"loss"``: the detached 0-d regularised training loss; ``"y_pred"``: the
            logits.
        """
        module, head, regularizer = self.module_, self.module_.head, self.meta_regularizer_
        if regularizer is None:
            return super().train_step_single(batch, run=run, **fit_params)
        X, y = batch
        dtype = autocast_dtype(self.precision, self.device_)
        with autocast(dtype, self.device_):
            features = module.features(X)
            logits = head(features)
        features = features.detach().float()
        batch_size = len(class_indices(y))
        penalty_scale = 1.0 if self.loss_reduction == "sum" else 1.0 / batch_size
        if run is not None:
            meta_batches = run.held_out["meta"]
            X_meta, y_meta = meta_batches.next_batch()
            lookahead = self._resolved_lookahead()
            lr_now = self.optimizer_.param_groups[0]["lr"]
            lr = lookahead.step_size(lr_now, self.loss_reduction, batch_size)
            step = (regularizer, self.meta_optimizer_, self._training_loss, self._meta_objective())
            if lookahead.parameters == "network":
                with autocast(dtype, self.device_):
                    meta_loss = network_meta_step(
                        *step, module, (X, y), (X_meta, y_meta), lr, penalty_scale
                    )
            else:
                with torch.no_grad(), autocast(dtype, self.device_):
                    meta_features = module.features(X_meta)
                meta_loss = meta_step(
                    *step, (features, y), (meta_features.float(), y_meta), head, lr, penalty_scale
                )
            meta_batches.record(meta_loss)
        loss = regularizer.regularized_loss(
            self._training_loss,
            logits.float(),
            y,
            features,
            head.weight,
            head.bias,
            learn=False,
            penalty_scale=penalty_scale,
        )
        return self._backward(loss, logits, y)

    def _meta_objective(self):
        """The meta loss of a batch of logits, ``objective(logits, target)``."""
        return partial(
            meta_objective,
            meta_loss=self.meta_loss,
            bandwidth=self.bandwidth,
            include_self=self.include_self,
            accuracy=self.sece_accuracy,
            n_bins=self.n_bins,
            t_a=self.t_a,
            t_b=self.t_b,
        )

    def _training_loss(self, logits, target, **criterion_kwargs):
        """The training loss of float32 logits (weighted, mixed and summed as ``get_loss``)."""
        return self.get_loss(logits, target, training=True, **criterion_kwargs)

    # ------------------------------------------------------------------ epoch hooks

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, run=None, **kwargs):
        """Start the history's epoch and, in a training run, reshuffle its meta batches.

        Parameters
        ----------
        net : MetaNetClassifier
            The net (skorch's callback signature).
        dataset_train, dataset_valid : FitDataset or None, default=None
            The training and validation parts.
        run : TrainingRun or None, default=None
            The training run, whose meta-validation batches are reshuffled.
        **kwargs
            Unused; skorch's signature.
        """
        super().on_epoch_begin(net, dataset_train=dataset_train, dataset_valid=dataset_valid)
        if run is not None:
            run.held_out["meta"].shuffle()

    def on_epoch_end(self, net, dataset_train=None, dataset_valid=None, run=None, **kwargs):
        """In a training run, record ``meta_loss`` and the regulariser's statistics (one
        host sync).

        The gamma-Net's statistics are those of the validation part, or of the
        meta-validation part without one.

        Parameters
        ----------
        net : MetaNetClassifier
            The net (skorch's callback signature).
        dataset_train, dataset_valid : FitDataset or None, default=None
            The training and validation parts.
        run : TrainingRun or None, default=None
            The training run, whose meta-validation batches give the statistics.
        **kwargs
            Unused; skorch's signature.
        """
        super().on_epoch_end(net, dataset_train=dataset_train, dataset_valid=dataset_valid)
        if run is None:
            return
        meta_batches = run.held_out["meta"]
        steps = max(1, self.history[-1, "train_batch_count"])
        stats = {"meta_loss": meta_batches.loss_sum / steps}
        if isinstance(self.meta_regularizer_, GammaNet):
            source = meta_batches.source
            if dataset_valid is not None:
                source = dataset_valid.batch_source(self.device_)
            stats.update(self.meta_regularizer_.statistics(self._source_features(source)))
        else:
            stats.update(self.meta_regularizer_.statistics())
        for name, value in zip(stats, torch.stack(list(stats.values())).tolist(), strict=True):
            self.history.record(name, value)

    # ------------------------------------------------------------------ gamma

    def _features(self, X):
        """Float32 penultimate features of a device batch (evaluation, autocast as in fit)."""
        with autocast(autocast_dtype(self.precision, self.device_), self.device_):
            return self.module_.features(X).float()

    def _source_features(self, source):
        """Features of every sample of a BatchSource, in evaluation mode."""
        self._set_training(False)
        channels_last = self.device_.type == "cuda" and source.X.ndim == 4
        chunks = []
        with torch.inference_mode():
            for X, _ in source.slices(self.inference_batch_size()):
                if channels_last:
                    X = X.contiguous(memory_format=torch.channels_last)
                chunks.append(self._features(X))
        return torch.cat(chunks)

    def sample_gamma(self, X):
        """Return the gamma-Net's per-sample focal gamma of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Inputs, as in :meth:`fit`.

        Returns
        -------
        gamma : ndarray of shape (n_samples,), dtype float32
            The gamma of each sample.
        """
        check_is_fitted(self)
        if not isinstance(getattr(self, "meta_regularizer_", None), GammaNet):
            raise ValueError(
                "sample_gamma needs the fitted gamma-Net: fit with regularizer='gamma_net' "
                "(and unpickle a model pickled with keep_regularizer=True)."
            )
        gamma = evaluate(self, X, lambda batch: self.meta_regularizer_(self._features(batch)))
        return gamma.cpu().numpy()

    # ------------------------------------------------------------------ persistence

    def __setstate__(self, state):
        """Rebuild the net; a state with the former virtual-step parameters gets the
        ``lookahead`` they meant."""
        state = dict(state)
        former = {name: state.pop(name) for name in _FORMER_LOOKAHEAD if name in state}
        former = {name: value for name, value in former.items() if value != "deprecated"}
        if former and "lookahead" not in state:
            reduction = state.get("loss_reduction", "mean")
            state["lookahead"] = former_lookahead(former, reduction)
        super().__setstate__(state)

    def __getstate__(self):
        """Return NetClassifier's state; without the regulariser if ``keep_regularizer`` is
        False (then it is None after loading)."""
        if self.keep_regularizer:
            return super().__getstate__()
        names = ("meta_regularizer_", "meta_optimizer_")
        kept = {name: self.__dict__.pop(name) for name in names if name in self.__dict__}
        try:
            state = super().__getstate__()
        finally:
            self.__dict__.update(kept)
        state.update(dict.fromkeys(kept))
        return state


def _stratified_holdout(y, n_holdout, rng):
    """Split ``range(len(y))`` into a stratified random holdout of ``n_holdout`` and the rest.

    Each class gives ``n_holdout * n_class / n`` samples rounded down, and the remaining
    samples go to the classes with the largest fractional parts (ties at random), so the
    holdout has exactly ``n_holdout`` samples for any class sizes.

    Returns
    -------
    holdout, rest : ndarray of int
        Sorted indices.
    """
    n = len(y)
    _, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    ideal = counts * (n_holdout / n)
    quota = np.floor(ideal).astype(np.int64)
    remaining = n_holdout - int(quota.sum())
    if remaining > 0:
        priority = np.lexsort((rng.random(len(counts)), quota - ideal))
        quota[priority[:remaining]] += 1
    order = rng.permutation(n)
    order = order[np.argsort(codes[order], kind="stable")]
    rank = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
    in_holdout = rank < np.repeat(quota, counts)
    return np.sort(order[in_holdout]), np.sort(order[~in_holdout])


__all__ = ["MetaNetClassifier"]
