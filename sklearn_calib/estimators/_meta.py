"""MetaNetClassifier: a NetClassifier whose regulariser is meta-learned for calibration."""

import numbers
from functools import partial

import numpy as np
import torch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ..losses import resolve_loss
from ..losses._base import GammaWeighted
from ..losses._calibration import SECE_ACCURACIES
from ._device import autocast, autocast_dtype
from ._gamma_net import ElementwiseL2, GammaNet, build_regularizer
from ._inference import evaluate
from ._inputs import split_input
from ._meta_step import (
    META_LOSSES,
    VIRTUAL_STEPS,
    MetaBatches,
    meta_objective,
    meta_step,
    network_meta_step,
)
from ._net import NetClassifier
from ._optimizer import check_optimizer_values
from ._rng import resolve_split_seed
from ._training import FitDataset

_REGULARIZERS = {"gamma_net": GammaNet, "l2": ElementwiseL2}
_POSITIVE = Interval(numbers.Real, 0, None, closed="neither")


class MetaFitDataset(FitDataset):
    """The training part of a meta fit, with the meta-validation batches it learns from.

    :meth:`MetaNetClassifier.get_split_datasets` returns it as ``dataset_train``; the
    training run passes it to the epoch hooks and its steps read the meta batches.

    Parameters
    ----------
    part : FitDataset
        The training part.
    meta_batches : MetaBatches
        The meta-validation part, on the device.
    """

    def __init__(self, part, meta_batches):
        super().__init__(part.X, part.y, part.y_index, part.weight)
        self.meta_batches = meta_batches


class MetaNetClassifier(NetClassifier):
    """A NetClassifier trained with a meta-learned regulariser for calibration.

    Meta-regularisation (Wang and Golebiowski 2024, extending Bohdal et al. 2021): ``fit`` splits
    the data, stratified and seeded by ``random_state``, into training, validation and
    meta-validation parts (8:1:1 by default). Each step takes a training batch and a
    meta-validation batch, makes a virtual SGD step of the network on the regularised
    training loss (``theta' = theta - lr * dL/dtheta``, kept differentiable), computes the
    meta loss of the meta batch through the updated network, steps the regulariser's
    parameters with Adam, and then makes the real update of the network with the updated
    regulariser. The virtual step updates every parameter by default (``virtual_step``);
    Bohdal et al.'s and Wang and Golebiowski's code step the classifier head only, on
    detached features, at the network's learning rate, whose meta-gradient we measured
    pointing away from the best focal gamma (see Notes).

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
        (one coefficient per entry, starting at 0 and kept >= 0).
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
        coefficients; None means 1e-3 (Bohdal et al.'s). Ignored when
        ``meta_optimizer__lr`` is given. See Notes.
    virtual_step : {"network", "head"}, default="network"
        What the virtual SGD step updates: every parameter of the network, or the
        classifier head only on detached features (as Bohdal et al.'s and Wang and
        Golebiowski's code). See Notes.
    virtual_lr : float or None, default=None
        Learning rate of the virtual SGD step. None: ``virtual_lr_scale`` times the network
        optimiser's current learning rate (of its first parameter group).
    virtual_lr_scale : float, default=20.0
        Ratio of the virtual step's learning rate to the network's when ``virtual_lr`` is
        None (Bohdal et al.'s code: 1). See Notes.
    meta_batch_size : int or None, default=512
        Size of the meta-validation batches (at most the meta-validation part's size).
        None: ``batch_size``. See Notes.
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
        parameters and overrides ``meta_lr`` (``meta_optimizer__lr=1e-3`` is the paper's
        literal setting; see Notes). Set on a fitted net, they apply from the next ``fit``
        or ``partial_fit``.

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
    *The gamma-Net's meta learning rate.* The paper (Wang and Golebiowski) fixes
    ``tau = 0.01`` and the initial gamma of 1 but not the gamma-Net's optimiser; it takes
    Bohdal et al.'s defaults, whose Adam (lr 1e-3) steps regularisation strengths directly
    (L2 coefficients, label smoothing). Adam moves every parameter by about its learning
    rate whatever the size of the gradient, and with the ``1 / tau`` gain a step of 1e-3 on
    each entry of A and W moves gamma by up to ``1e-3 (||x~||_1 + ||W||_1) / tau``, about
    1.1, 1.5 and 3.8 for d = 32, 64 (ResNet-20) and 512 (the paper's ResNet-18); measured
    first steps moved it by 0.65 (d = 32) and 1.0 (ResNet-20). The meta-gradient is mostly
    noise (the mean of ``d SECE / d gamma`` over batch pairs is at most a third of its
    standard deviation), so at that step size gamma random-walks, and a large gamma is nearly
    absorbing (the focal weight ``(1 - p)^gamma`` and the meta-gradients vanish). Measured
    with Adam's lr 1e-3 on A and W (``meta_optimizer__lr=1e-3``): ResNet-20 on
    Fashion-MNIST, 1720 steps, gamma 34, ECE 51 % against 3.6 % for focal loss with gamma
    1; an MLP (512, 512) on 10,000 Fashion-MNIST images, 1580 steps, gamma 18, validation
    ECE 34 % against 3.3 %. ``meta_lr`` is therefore a step in units of gamma. Its default
    1e-2 is the largest of 1e-3, 1e-2, 3e-2 and 0.1 under which, on that MLP (20 epochs, learning
    rate 0.05 divided by 10 at epochs 10 and 15, cross-entropy's validation temperature
    1.95), the validation ECE is no worse than focal loss with gamma 1 (2.97 % against
    3.10 %, mean of three seeds; test ECE 3.90 % against 3.66 %): gamma's standard
    deviation grows from about 0.001 after the first epoch to 0.004 to 0.02 and its mean
    ends at 0.78 to 0.95. Larger steps spread gamma further (std 0.04 to 0.1 at 0.1) but
    wander (mean 0.2 to 2.6) and cost calibration on average (validation ECE 3.9 %).
    Learning stalls once the network's learning rate decays: the meta-gradient shrinks
    with the virtual step's learning rate and with the training loss, while Adam's second
    moment remembers the earlier, larger gradients. (These figures were measured with the
    head-only virtual step and the hard SECE.) In the positive control below, Adam's lr
    1e-3 sent gamma to 20-30 within the first epoch (validation ECE 26 %).

    *The virtual step.* Bohdal et al.'s and Wang and Golebiowski's code make the virtual step on
    the classifier head only, at the network's learning rate. We checked the meta-gradient
    against a positive control (``benchmarks/scripts/gamma_control.py``: an MLP (256, 256) trained
    30 epochs with SGD on synthetic data with 20 % noisy labels, whose best fixed focal
    gamma for the final validation ECE is 4 in three seeds, 2.6 to 4.8 % against 15.6 to
    16.7 % for gamma 1). There the head-only step moved the mean gamma down or kept it near
    1 (0.17 to 1.16 at the end, three runs; validation ECE 14.5 to 20 %). Finite differences
    of fixed-gamma continuations show why: the effect of gamma on the validation ECE builds
    up over an epoch or more (``d ECE / d gamma`` about 0 after one step, -0.025 after 31
    steps and -0.044 after 155 steps once the network is overconfident), while a one-step
    meta-gradient sees the immediate effect only, a short-horizon bias (Wu et al. 2018); at
    the network's learning rate, with meta batches of 128, the mean of SECE's meta-gradient
    over 60 batch pairs was within two standard errors of 0 at every checkpoint probed,
    head-only or whole-network. A virtual step of the whole network with a step 20 times the
    network's learning rate (at momentum 0.9, about twice the total displacement that one
    gradient makes) agreed in sign with them at every checkpoint with meta batches of 800
    (-0.014 to -0.058, for every SECE variant and DECE), and it moves gamma where the
    fixed-gamma sweeps say: to 3.6 to 4.3 at the end in the positive control (three seeds;
    validation ECE 3.9 to 6.2 %, test ECE 2.6 to 4.7 % against 3.9 to 4.9 % for the best
    fixed gamma), and to 0.04 to 0.17 (epochs 10 to 20) on the same data without label
    noise, whose best fixed gamma is 0. On the Fashion-MNIST MLP of the previous paragraph,
    whose best fixed gamma is 2, it ends at 2.02 and 1.79 (two seeds; validation ECE 1.16
    and 1.35 % against 1.84 % for gamma 2). Hence the defaults ``virtual_step="network"``,
    ``virtual_lr_scale=20`` (10: 2.5, 40: 4.9 in the positive control) and
    ``meta_batch_size=512`` (the batch size 128: 2.6). SECE's hard accuracy,
    ``include_self=False`` and DECE reached 4.3 to 4.5 there. The step costs a second-order
    pass through the whole network (the positive control's CPU time: 15 to 17 s a fit,
    against 5 s with the head-only step and meta batches of 128, and 2 s for focal loss).
    The scale was measured with SGD and momentum 0.9; with Adam-type network optimisers the
    virtual SGD step has no such reference.

    The meta batch goes through the network in training mode (as the training batch, and as in
    Bohdal et al.'s code). With the whole-network step, batch-norm running statistics are
    updated on copies, so the meta step leaves them unchanged; with the head-only step, the
    meta batch's features are computed without gradient by the network itself, so the
    running statistics also see the meta-validation inputs (never their labels). Meta
    batches are neither augmented nor mixed. The step makes no host synchronisation, so on
    CUDA it is captured in a CUDA graph like NetClassifier's (unless the meta-validation
    data does not fit on the device). The gamma statistics cost one more inference pass over
    the validation part and one more host synchronisation per epoch. skorch's
    ``save_params`` does not save the regulariser; pickling does.

    Sample and class weights (``fit(X, y, sample_weight=...)``, ``class_weight``) weigh
    the regularised training loss, in the virtual step as in the real
    update, and the recorded validation loss; the meta objective on the
    meta-validation part is not weighted.

    The meta step plugs into NetClassifier's training run through skorch's hooks:
    :meth:`get_split_datasets` holds out the meta-validation part and returns it, on the
    device, with the training part (``dataset_train``, a ``MetaFitDataset``);
    ``on_epoch_begin`` reshuffles it and ``on_epoch_end`` records the statistics;
    :meth:`train_step_single` makes the meta step from the run's next meta batch, once
    per training batch, before the network's gradients are computed (outside a training
    run it steps the network with the regulariser as it is).

    References
    ----------
    C. Wang and J. Golebiowski, "Towards Unbiased Calibration using
    Meta-Regularization", Transactions on Machine Learning Research, 2024.

    O. Bohdal, Y. Yang and T. Hospedales, "Meta-Calibration: Learning of Model
    Calibration Using Differentiable Expected Calibration Error", arXiv:2106.09613, 2021.

    Y. Wu, M. Ren, R. Liao and R. Grosse, "Understanding Short-Horizon Bias in
    Stochastic Meta-Optimization", ICLR 2018.

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
        "virtual_step": [StrOptions(set(VIRTUAL_STEPS))],
        "virtual_lr": [_POSITIVE, None],
        "virtual_lr_scale": [_POSITIVE],
        "meta_batch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
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
        tau=0.01,
        bandwidth=0.01,
        include_self=True,
        sece_accuracy="soft",
        n_bins=15,
        t_a=100.0,
        t_b=0.01,
        meta_lr=None,
        virtual_step="network",
        virtual_lr=None,
        virtual_lr_scale=20.0,
        meta_batch_size=512,
        keep_regularizer=True,
        **kwargs,
    ):
        super().__init__(module, criterion=criterion, train_split=train_split, **kwargs)
        self.regularizer = regularizer
        self.meta_loss = meta_loss
        self.meta_fraction = meta_fraction
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

    # ------------------------------------------------------------------ components

    def initialize_criterion(self):
        """Build the loss; None is focal loss (gamma 1) for "gamma_net", cross-entropy for "l2"."""
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
        """Build the network's optimiser, then a new regulariser and its Adam optimiser."""
        super().initialize_optimizer()
        self._build_regularizer(self._checked_head())
        return self

    def on_train_begin(self, net, X=None, y=None, **kwargs):
        """Check the network and criterion; renew the regulariser if they no longer fit it.

        A continued fit keeps a fitting regulariser and writes the current ``tau`` and
        ``meta_optimizer__*`` settings into it and its optimiser.
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

    def get_split_datasets(self, X, y=None, split_seed=None, **fit_params):
        """Hold out the meta-validation part, then split the rest as NetClassifier does.

        Parameters
        ----------
        X, y, split_seed, **fit_params
            As in :meth:`NetClassifier.get_split_datasets`; the seed also draws the
            meta-validation part.

        Returns
        -------
        dataset_train : MetaFitDataset
            The training part with the meta-validation batches on the device.
        dataset_valid : FitDataset or None
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
        meta_batch_size = self.meta_batch_size or self.batch_size
        batches = MetaBatches(data.X[meta], data.y_index[meta], self.device_, meta_batch_size)
        return MetaFitDataset(dataset_train, batches), dataset_valid

    def train_step_is_capturable(self, run=None):
        """Whether :meth:`train_step` may be captured: yes while the meta data is on the device."""
        resident = run is None or run.dataset_train.meta_batches.resident
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
        if run is not None:
            meta_batches = run.dataset_train.meta_batches
            X_meta, y_meta = meta_batches.next_batch()
            step = (regularizer, self.meta_optimizer_, self._training_loss, self._meta_objective())
            if self.virtual_step == "network":
                with autocast(dtype, self.device_):
                    meta_loss = network_meta_step(
                        *step, module, (X, y), (X_meta, y_meta), self._virtual_lr()
                    )
            else:
                with torch.no_grad(), autocast(dtype, self.device_):
                    meta_features = module.features(X_meta)
                meta_loss = meta_step(
                    *step, (features, y), (meta_features.float(), y_meta), head, self._virtual_lr()
                )
            meta_batches.record(meta_loss)
        loss = regularizer.regularized_loss(
            self._training_loss, logits.float(), y, features, head.weight, head.bias, learn=False
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

    def _virtual_lr(self):
        if self.virtual_lr is not None:
            return self.virtual_lr
        return self.virtual_lr_scale * self.optimizer_.param_groups[0]["lr"]

    # ------------------------------------------------------------------ epoch hooks

    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        """Start the history's epoch and reshuffle the meta-validation batches."""
        super().on_epoch_begin(net, dataset_train=dataset_train, dataset_valid=dataset_valid)
        if isinstance(dataset_train, MetaFitDataset):
            dataset_train.meta_batches.shuffle()

    def on_epoch_end(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        """Record ``meta_loss`` and the regulariser's statistics (one host sync).

        The gamma-Net's statistics are those of the validation part, or of the
        meta-validation part without one.
        """
        super().on_epoch_end(net, dataset_train=dataset_train, dataset_valid=dataset_valid)
        if not isinstance(dataset_train, MetaFitDataset):
            return
        meta_batches = dataset_train.meta_batches
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

        Returns
        -------
        gamma : ndarray of shape (n_samples,), dtype float32
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


__all__ = ["MetaFitDataset", "MetaNetClassifier"]
