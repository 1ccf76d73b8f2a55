"""NetClassifier: a skorch NeuralNetClassifier that behaves as a scikit-learn classifier."""

import contextlib
import inspect
import numbers
import os
import warnings
from functools import partial

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import (
    Interval,
    Options,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils.validation import check_is_fitted, validate_data
from skorch import NeuralNetClassifier
from skorch.callbacks import EpochTimer, PassthroughScoring, PrintLog
from skorch.dataset import Dataset, ValidSplit
from skorch.exceptions import DeviceWarning
from skorch.utils import TeeGenerator, data_from_dataset, to_tensor
from torch import nn
from torch.utils.data import Dataset as TorchDataset
from torch.utils.data import Subset

from .._validation import check_class_labels, check_label_types, encode_labels
from ..losses import resolve_loss
from ._augment import AUGMENTATIONS, MixedTarget
from ._callbacks import VerboseProgressBar
from ._checkpoint import FitCheckpoint
from ._device import PRECISIONS, autocast, autocast_dtype, resolve_device
from ._faults import ON_NONFINITE
from ._recipes import RECIPES, Recipe, base_lr, resolve_optimizer, resolve_recipe
from ._state import (
    component_names,
    history_as_list,
    history_from_list,
    restore_components,
    to_numpy_tree,
    to_torch_tree,
    transaction,
)
from ._training import BatchSource, TrainingLoop, _as_float, clip_gradient_norm
from .networks import resolve_network

_INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)


class NetClassifier(NeuralNetClassifier):
    """A PyTorch network trained as a scikit-learn classifier, fast on a GPU.

    A :class:`skorch.NeuralNetClassifier` whose network and loss are chosen by name, whose
    input and output shapes are inferred from the data, and whose ``fit`` keeps the data
    on the device and (on CUDA) replays the whole training step as one CUDA graph. It
    works in pipelines, grid searches and cross-validation like any scikit-learn
    classifier; hyperparameters route by prefix (``module__hidden_units``,
    ``criterion__gamma``, ``optimizer__weight_decay``).

    Parameters
    ----------
    module : str or type of torch.nn.Module or torch.nn.Module, default="mlp"
        A network name from :data:`~sklearn_calib.estimators.networks.NETWORKS` or a
        class; ``input_shape`` (the shape of one sample) and ``n_classes`` are passed to
        its constructor when it accepts them. A class attribute ``input_dtype`` of an
        integer dtype (token ids) keeps ``X`` integer (float ``X`` must hold integers, and
        the ids must index the network's first ``nn.Embedding``, else a ValueError);
        otherwise ``X`` is cast to float32.
    criterion : str or type of torch.nn.Module, default="ce"
        A loss name from :mod:`sklearn_calib.losses` or a class; ``forward(logits,
        target)`` returns the mean loss.
    optimizer : {"sgd", "adam", "adamw"}, type of torch.optim.Optimizer or None, \
default=None
        None: the recipe's optimiser, or AdamW without a recipe. On CUDA, SGD is built
        with ``fused=True`` and Adam/AdamW with ``fused=True, capturable=True``, with the
        learning rate as a device tensor, unless ``optimizer__fused``,
        ``optimizer__foreach`` or ``optimizer__capturable`` is given.
    lr : float or None, default=None
        Base learning rate. None: the recipe's (0.1 for the SGD recipes) when its
        optimiser is used, else 1e-3.
    max_epochs : int, default=20
        Epochs of ``fit`` (and of each ``partial_fit``).
    batch_size : int, default=128
        Training batch size; also the inference batch size unless
        ``iterator_valid__batch_size`` is given.
    train_split : None, float or callable, default=None
        None trains on all the data. A float in (0, 1) holds out that fraction,
        stratified and seeded by ``random_state``; a callable ``(dataset, y) ->
        (dataset_train, dataset_valid)`` such as :class:`skorch.dataset.ValidSplit` or
        ``skorch.helper.predefined_split`` is used as in skorch. With a validation split
        the history records ``valid_loss`` and ``valid_acc`` each epoch (so
        ``EarlyStopping`` and ``Checkpoint`` work); a callback whose ``monitor`` names a
        ``valid_*`` score raises a ValueError at fit without a split.
    callbacks : list of skorch callbacks or None, default=None
        Epoch-level hooks (``on_train_begin``/``end``, ``on_epoch_begin``/``end``) always
        run. A callback with per-batch hooks (``on_batch_begin``, ``on_batch_end``,
        ``on_grad_computed``) makes each epoch run eagerly with skorch's per-batch
        protocol: the batch is the pair of device tensors ``(X_batch, y_batch)`` and the
        batch loss is in the history before ``on_batch_end``; this costs one host
        synchronisation per step and turns CUDA graphs off. skorch's ProgressBar is the
        exception: it is advanced per batch without slowing training, and the batch
        losses reach the history when the epoch ends.
    recipe : {"seed001", "seed002", "onecycle"}, Recipe or None, default=None
        Optimiser and learning-rate preset. "seed001": the recipe of Wang et al. (2021),
        SGD (momentum 0.9, weight decay 1e-4, lr 0.1), lr x0.1 at 50 % and 75 % of
        ``max_epochs``. "seed002": the recipe of Mukhoti et al. (2020) and the papers
        built on their code, SGD (momentum 0.9, weight decay 5e-4, lr 0.1), lr x0.1 at
        150/350 and 250/350 of ``max_epochs``. These epochs are rounded and never the first, which
        always runs at the base rate. "onecycle": SGD (momentum 0.9, Nesterov, weight
        decay 5e-4), lr rising linearly from lr/10 to lr (0.1) over the first 25 % of the steps,
        then falling linearly to 0 (per step), for short budgets. None: constant lr. The
        history records the epoch's starting ``lr``. A continued fit (``partial_fit``,
        ``fit`` with ``warm_start=True``) runs the whole schedule again over its own
        ``max_epochs`` epochs, from the previous fit's base lr or one set since with
        ``set_params``; a fit resumed from a checkpoint continues it.
    augment : {"crop_flip", "crop", "flip"} or None, default=None
        On-device augmentation of image batches ``(n, C, H, W)``: random crop after zero
        padding by an eighth of the image size (4 pixels for 32x32 and 28x28 images) and
        random horizontal flip.
    mixup_alpha : float, default=0.0
        Mixup (Zhang et al. 2018): each batch is mixed with a permutation of itself by
        a weight ``lam ~ Beta(alpha, alpha)`` and the loss is ``lam * L(z, y_a) + (1 -
        lam) * L(z, y_b)`` for every criterion. 0 turns it off.
    grad_clip : float or None, default=None
        Maximum gradient norm (all parameters together); None for no clipping.
    loss_reduction : {"mean", "sum"}, default="mean"
        "sum" multiplies the criterion's batch mean by the batch size (the summed
        per-sample loss). The reference pairing of Mukhoti et al.'s code is ``loss_reduction="sum",
        grad_clip=2.0`` (:data:`~sklearn_calib.estimators.REFERENCE_PAIRING`). The
        recorded losses are the criterion's values (per-sample means).
    precision : {"auto", "fp32", "bf16"}, default="auto"
        "auto": bf16 autocast on CUDA, float32 elsewhere. Applies to training and
        inference; logits and probabilities are returned as float32.
    cuda_graphs : "auto" or bool, default="auto"
        Replay the whole training step (``train_step``) as one CUDA graph after three
        eager warm-up steps; the last, partial batch of an epoch runs eagerly. "auto"
        uses graphs on CUDA when possible and runs eagerly otherwise: on the CPU, with a
        callback that does per-batch work, with an optimiser other than SGD, Adam or
        AdamW (unless capturable with a tensor lr), or with a subclass whose
        ``train_step`` is not marked capturable. True warns when it falls back.
    device : str or torch.device, default="auto"
        "auto" is CUDA when available, else the CPU; the device used is ``device_``.
    random_state : int, RandomState instance or None, default=None
        Seeds weight initialisation, shuffling, augmentation, mixup, dropout and the
        validation split. Torch's global RNG is seeded inside ``torch.random.fork_rng``,
        so the caller's RNG is unchanged; with an int, refits on the CPU are identical.
    verbose : int, default=0
        0 is silent; 1 prints a table per epoch and shows skorch's ProgressBar.
    warm_start : bool, default=False
        Whether ``fit`` continues training the fitted network instead of starting anew.
    classes : array-like or None, default=None
        The class labels; None infers them from ``y``. ``classes_`` holds them sorted
        (as ``np.unique`` sorts them), whatever their order here.
    on_nonfinite : {"raise", "restore"}, default="raise"
        What a non-finite training loss (or non-finite weights) does. The losses stay on
        the device and are checked once per epoch, at its end. "raise": a
        :class:`~sklearn_calib.estimators.NonFiniteLossError` naming the epoch and the
        first bad batch; the estimator is left as it was before the call. "restore": the
        weights and optimiser state from before that epoch are loaded back, the epoch is
        dropped from the history, a ``RuntimeWarning`` says what happened and ``fit``
        returns with the last finite epoch's model (it keeps one device copy of the
        weights and optimiser state per epoch).
    checkpoint_dir : str, path-like or None, default=None
        Directory of per-epoch checkpoints. A ``fit`` from a fresh start writes, after
        every epoch, one file named by a fingerprint of the fit (the parameters except
        ``checkpoint_dir``, ``callbacks``, ``verbose``, ``device``, ``on_nonfinite`` and
        ``warm_start``, the classes and the training data); files are replaced
        atomically. To resume a fit whose process died, call ``fit`` again with the same
        parameters and data: it loads the checkpoint (weights, optimiser state, history,
        random-generator states) and trains the remaining epochs only, reaching the same
        weights as an uninterrupted fit on the same device (bit for bit on the CPU). A
        finished fit's checkpoint is kept, so fitting it again trains nothing, except
        with ``random_state=None``: an unseeded fit draws new random numbers each time, so
        it trains anew over a finished checkpoint (it still resumes an unfinished one). A
        truncated, corrupt or foreign file is ignored with a ``CheckpointWarning``.
        An epoch that a callback ends is saved too: a stop by skorch's EarlyStopping marks
        the fit finished for fits with an EarlyStopping callback (a ``UserWarning`` says
        that it trains nothing; a fit without one trains the remaining epochs); an error,
        or any other ``KeyboardInterrupt`` (a Ctrl-C, also one landing during the
        callbacks), leaves it to be resumed; the callbacks' own state is not saved. ``partial_fit``
        and ``warm_start`` continuations do not checkpoint.
    use_caching : False, default=False
        skorch's scoring cache, off (the only accepted value): the engine does not feed
        skorch's per-batch cache, so every ``EpochScoring`` scores the whole
        ``dataset_valid`` (or ``dataset_train`` with ``on_train=True``) with
        :meth:`predict` at the end of each epoch, whatever its own ``use_caching``, and
        does not slow the training steps. skorch's default (``"auto"``, the callbacks'
        ``use_caching=True``) would score cached class indices against labels.
    **kwargs
        skorch's other parameters (``predict_nonlinearity``, ``iterator_valid__batch_size``,
        ...) and prefixed hyperparameters (``module__*``, ``criterion__*``,
        ``optimizer__*``, ``callbacks__*``). ``iterator_train``, ``dataset`` and
        ``compile`` are accepted but not used: batches are cut from device tensors.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels, sorted, in the order of the columns of ``predict_proba``.
    n_features_in_ : int
        ``X.shape[1]`` at fit (the number of channels for images).
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of a DataFrame ``X``.
    input_shape_ : tuple of int
        Shape of one sample, ``X.shape[1:]``.
    device_ : torch.device
        Device of the network.
    module_, criterion_, optimizer_ : torch objects
        The fitted network, loss and optimiser.
    history_ : skorch.History
        Per epoch: ``train_loss``, ``lr``, ``dur``, ``cuda_graph`` (whether full batches
        replayed a CUDA graph) and, with a validation split, ``valid_loss`` and
        ``valid_acc``; per batch ``train_loss``, ``train_batch_size``.
    rng_state_ : dict
        Random-generator states at the end of the last epoch; ``partial_fit`` (and
        ``fit`` with ``warm_start=True``) continues from them.
    checkpoint_path_ : str or None
        The checkpoint file of the last ``fit`` (None without ``checkpoint_dir``).

    Notes
    -----
    ``predict_proba`` is the softmax of the logits for every criterion;
    ``decision_function`` returns the logits, or ``z[:, 1] - z[:, 0]`` for two classes
    (scikit-learn's convention).

    A call that raises (bad input to ``fit``, ``partial_fit`` or ``predict``, a
    non-finite loss) leaves the estimator as it was: its attributes are restored and
    its weights copied back.

    Persistence: the pickled state holds the weights and optimiser state as numpy
    arrays, not pickled torch objects; loading rebuilds the network from the parameters
    and loads them, so the same state works with pickle, joblib and skops
    (:mod:`sklearn_calib.persistence`). A model loads on the device it was fitted on
    when that device exists, otherwise on the CPU (a ``DeviceWarning`` when ``device``
    named CUDA explicitly); with ``device="auto"`` it then predicts on the CPU.

    Subclasses change training through :meth:`train_step`, the per-batch hook: it
    receives ``(X_batch, y_batch)`` on the device (``y_batch`` a class-index tensor or
    a :class:`MixedTarget`) and makes the whole update. Set ``train_step_capturable =
    True`` on a subclass whose overridden step may be captured in a CUDA graph (no host
    synchronisation, no data-dependent Python control flow); otherwise it runs eagerly.

    References
    ----------
    D.-B. Wang, L. Feng and M.-L. Zhang, "Rethinking Calibration of Deep Neural
    Networks: Do Not Be Afraid of Overconfidence", NeurIPS 2021.

    J. Mukhoti, V. Kulharia, A. Sanyal, S. Golodetz, P. H. S. Torr and P. K. Dokania,
    "On using Focal Loss for Neural Network Calibration", ICML 2020 Workshop on
    Uncertainty and Robustness in Deep Learning.

    H. Zhang, M. Cisse, Y. N. Dauphin and D. Lopez-Paz, "mixup: Beyond Empirical Risk
    Minimization", ICLR 2018.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn_calib.estimators import NetClassifier
    >>> X, y = load_digits(return_X_y=True)
    >>> net = NetClassifier(max_epochs=5, random_state=0).fit(X / 16, y)
    >>> net.predict_proba(X[:2] / 16).shape
    (2, 10)
    """

    #: Whether :meth:`train_step` may be captured in a CUDA graph. None: only when it is
    #: NetClassifier's own.
    train_step_capturable = None

    _parameter_constraints = {
        "max_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "train_split": [Interval(numbers.Real, 0, 1, closed="neither"), callable, None],
        "recipe": [StrOptions(set(RECIPES)), Recipe, None],
        "augment": [StrOptions(set(AUGMENTATIONS)), None],
        "mixup_alpha": [Interval(numbers.Real, 0, None, closed="left")],
        "grad_clip": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "loss_reduction": [StrOptions({"mean", "sum"})],
        "precision": [StrOptions(set(PRECISIONS))],
        "cuda_graphs": [StrOptions({"auto"}), "boolean"],
        "device": [str, torch.device],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "on_nonfinite": [StrOptions(set(ON_NONFINITE))],
        "checkpoint_dir": [str, os.PathLike, None],
        "use_caching": [Options(bool, {False})],
    }

    def __init__(
        self,
        module="mlp",
        *,
        criterion="ce",
        optimizer=None,
        lr=None,
        max_epochs=20,
        batch_size=128,
        train_split=None,
        callbacks=None,
        recipe=None,
        augment=None,
        mixup_alpha=0.0,
        grad_clip=None,
        loss_reduction="mean",
        precision="auto",
        cuda_graphs="auto",
        device="auto",
        random_state=None,
        verbose=0,
        warm_start=False,
        classes=None,
        on_nonfinite="raise",
        checkpoint_dir=None,
        use_caching=False,
        **kwargs,
    ):
        super().__init__(
            module,
            criterion=criterion,
            optimizer=optimizer,
            lr=lr,
            max_epochs=max_epochs,
            batch_size=batch_size,
            train_split=train_split,
            callbacks=callbacks,
            verbose=verbose,
            device=device,
            warm_start=warm_start,
            classes=classes,
            use_caching=use_caching,
            **kwargs,
        )
        self.recipe = recipe
        self.augment = augment
        self.mixup_alpha = mixup_alpha
        self.grad_clip = grad_clip
        self.loss_reduction = loss_reduction
        self.precision = precision
        self.cuda_graphs = cuda_graphs
        self.random_state = random_state
        self.on_nonfinite = on_nonfinite
        self.checkpoint_dir = checkpoint_dir

    # ------------------------------------------------------------------ parameters

    @property
    def _default_callbacks(self):
        return [
            ("epoch_timer", EpochTimer()),
            ("train_loss", PassthroughScoring(name="train_loss", on_train=True)),
            ("valid_loss", PassthroughScoring(name="valid_loss")),
            ("valid_acc", PassthroughScoring(name="valid_acc", lower_is_better=False)),
            ("progress_bar", VerboseProgressBar()),
            ("print_log", PrintLog()),
        ]

    def _get_param_names(self):
        # skorch lists every attribute not ending in "_", which includes its private
        # bookkeeping (e.g. ``_params_to_validate``); parameters never start with "_".
        return [name for name in super()._get_param_names() if not name.startswith("_")]

    def set_params(self, **params):
        """Set parameters (skorch's routing); ``callbacks`` is only checked at fit.

        On an initialised net, a new ``module``, ``module__*`` or ``optimizer`` (with any
        other parameters of the same call) is only stored: the fitted model is kept until
        the next ``fit`` or ``partial_fit``, which builds the net anew (the network's
        shapes come from the data) instead of continuing; until then every parameter set
        is only stored, and pickling or copying the net keeps the fitted model. Other
        parameters follow skorch (``criterion`` rebuilds the loss at once). A new learning
        rate (``lr``, ``optimizer__lr`` or a param group's) also becomes the base of the
        recipe's schedule in a continued fit. A call that raises leaves the parameters as
        they were.

        Parameters
        ----------
        **params : dict
            Parameter names and values.

        Returns
        -------
        self : NetClassifier
        """
        pending = self.__dict__.get("_built_params") is not None
        deferred = bool(self.initialized_ and (pending or any(map(self._defers, params))))
        before = self._param_values()
        groups = self._optimizer_settings()
        if deferred:
            self.initialized_ = False  # skorch then stores the parameters only
        try:
            if not self.initialized_ and "callbacks" in params:
                self.callbacks = params.pop("callbacks")
            super().set_params(**params)
        except BaseException:
            self._set_param_values(before)
            for group, settings in groups:  # skorch sets ``lr``, ``optimizer__*`` first
                group.update(settings)
            raise
        finally:
            if deferred:
                self.initialized_ = True
        for group, settings in groups:
            if "lr" in settings and group["lr"] is not settings["lr"]:
                group["initial_lr"] = _as_float(group["lr"])  # a recipe's base from now on
        if deferred and not pending:
            self._built_params = before  # what the fitted components were built from
        return self

    def _defers(self, name):
        """Whether setting ``name`` on an initialised net waits for the next fit."""
        return name in _DEFERRED_PARAMS or name.startswith("module__")

    def _param_values(self):
        """Return the parameters' current values (a dict of the attributes, not copied)."""
        return {name: self.__dict__[name] for name in self._get_param_names()}

    def _optimizer_settings(self):
        """Return ``(param_group, settings)`` pairs of the optimisers, settings copied."""
        optimizers = [self.__dict__.get(name + "_") for name in self._optimizers]
        return [
            (group, {key: value for key, value in group.items() if key != "params"})
            for optimizer in optimizers
            if optimizer is not None
            for group in optimizer.param_groups
        ]

    def _set_param_values(self, values):
        """Make ``values`` (from :meth:`_param_values`) the parameters, dropping any others."""
        for name in self._get_param_names():
            del self.__dict__[name]
        self.__dict__.update(values)

    @contextlib.contextmanager
    def _params_as_built(self):
        """Give the net the parameters its fitted components were built from (not ``device``).

        Inside, the parameters are those before a deferred :meth:`set_params` (a no-op
        when none awaits the next fit).
        """
        built = self.__dict__.get("_built_params")
        if built is None:
            yield
            return
        current = self._param_values()
        self._set_param_values({**built, "device": current["device"]})
        try:
            yield
        finally:
            self._set_param_values(current)

    def _continuable(self):
        """Whether the next fit may continue the fitted net (no component awaits a rebuild)."""
        return self.__sklearn_is_fitted__() and self.__dict__.get("_built_params") is None

    @property
    def classes_(self):
        """The sorted class labels of the fit (``classes`` or those of ``y``)."""
        try:
            return self.__dict__["classes_inferred_"]
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute 'classes_'"
            ) from None

    def _check_params(self):
        params = {name: getattr(self, name) for name in self._parameter_constraints}
        validate_parameter_constraints(
            self._parameter_constraints, params, caller_name=type(self).__name__
        )

    # ------------------------------------------------------------------ components

    @contextlib.contextmanager
    def _skorch_device(self):
        """Let skorch's own code move components to ``device_``; ``device`` stays as given."""
        requested = self.__dict__["device"]
        self.__dict__["device"] = self.device_
        try:
            yield
        finally:
            self.__dict__["device"] = requested

    def initialize(self):
        """Resolve the device and build the network, loss, optimiser and callbacks."""
        self.device_ = resolve_device(self.device)
        return super().initialize()

    def _initialize_module(self, reason=None):
        with self._skorch_device():
            return super()._initialize_module(reason=reason)

    def _initialize_criterion(self, reason=None):
        with self._skorch_device():
            return super()._initialize_criterion(reason=reason)

    def load_params(self, *args, **kwargs):
        """Load parameters saved by ``save_params`` onto ``device_`` (see skorch)."""
        with self._skorch_device():
            return super().load_params(*args, **kwargs)

    def _network_class(self):
        if isinstance(self.module, nn.Module):
            return type(self.module)
        return resolve_network(self.module)

    def _input_is_integer(self):
        return getattr(self._network_class(), "input_dtype", torch.float32) in _INTEGER_DTYPES

    def initialize_module(self):
        """Build the network with ``input_shape`` and ``n_classes`` inferred at fit."""
        kwargs = self.get_params_for("module")
        if isinstance(self.module, nn.Module):
            self.module_ = type(self.module)(**kwargs) if kwargs else self.module
            return self
        if not hasattr(self, "input_shape_"):
            raise ValueError(
                f"{type(self).__name__} infers the network's input shape and number of "
                "classes from the data: call fit(X, y) instead of initialize()."
            )
        network = resolve_network(self.module)
        inferred = {"input_shape": self.input_shape_, "n_classes": len(self.classes_)}
        signature = inspect.signature(network.__init__).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.values())
        inferred = {k: v for k, v in inferred.items() if takes_any or k in signature}
        self.module_ = network(**inferred, **kwargs)
        return self

    def initialize_criterion(self):
        """Build the loss from its name or class and the ``criterion__*`` parameters."""
        kwargs = self.get_params_for("criterion")
        if isinstance(self.criterion, nn.Module):
            self.criterion_ = type(self.criterion)(**kwargs) if kwargs else self.criterion
        else:
            self.criterion_ = resolve_loss(self.criterion)(**kwargs)
        return self

    def initialize_optimizer(self, triggered_directly=None):
        """Build the optimiser; on CUDA, fused/capturable with the lr as a device tensor."""
        recipe = resolve_recipe(self.recipe)
        optimizer, defaults = resolve_optimizer(self.optimizer, recipe)
        args, kwargs = self.get_params_for_optimizer("optimizer", self.get_all_learnable_params())
        lr = base_lr(kwargs.pop("lr"), recipe if defaults else None)
        kwargs = {**defaults, **kwargs}
        graphable = (
            self.device_.type == "cuda"
            and optimizer in (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)
            and not {"fused", "foreach", "capturable"} & set(kwargs)
        )
        if graphable:
            kwargs["fused"] = True
            if optimizer is not torch.optim.SGD:
                kwargs["capturable"] = True
            lr = torch.tensor(lr, dtype=torch.float32, device=self.device_)
        self.optimizer_ = optimizer(*args, lr=lr, **kwargs)
        if graphable:
            for group in self.optimizer_.param_groups:
                if not isinstance(group["lr"], torch.Tensor):
                    group["lr"] = torch.tensor(
                        group["lr"], dtype=torch.float32, device=self.device_
                    )
        return self

    # ------------------------------------------------------------------ fitting

    def fit(self, X, y):
        """Train the network on ``(X, y)`` from a fresh initialisation.

        With ``warm_start=True`` a fitted network is trained further instead.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs; images as 4-D arrays.
        y : array-like of shape (n_samples,)
            Class labels of any type.

        Returns
        -------
        self : NetClassifier
        """
        self._check_params()
        continuing = self.warm_start and self._continuable()
        return self._fit(X, y, continuing=continuing, classes=None)

    def partial_fit(self, X, y, classes=None):
        """Train the fitted network for ``max_epochs`` more epochs (or fit it if unfitted).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,) or None, default=None
            All class labels, for the first call when ``y`` may lack some.

        Returns
        -------
        self : NetClassifier
        """
        self._check_params()
        return self._fit(X, y, continuing=self._continuable(), classes=classes)

    def __sklearn_is_fitted__(self):
        return (
            bool(self.initialized_)
            and hasattr(self, "input_shape_")
            and super().__sklearn_is_fitted__()
        )

    def _fit(self, X, y, continuing, classes):
        reused = isinstance(self.module, nn.Module) or isinstance(self.criterion, nn.Module)
        with transaction(self, in_place=continuing or reused):
            X, y, y_index = self._validate_training_data(X, y, continuing, classes)
            if not continuing:
                self.device_ = resolve_device(self.device)
            checkpoint = None
            if self.checkpoint_dir is not None and not continuing:
                checkpoint = FitCheckpoint.for_fit(self, X, y_index)
            self.checkpoint_path_ = checkpoint.path if checkpoint is not None else None
            with self._random_generators(continuing) as rngs:
                epochs = self.max_epochs
                schedule_start = len(self.history) if continuing else 0
                if not continuing:
                    self.initialize()
                    self._built_params = None
                    remaining = checkpoint.resume(self) if checkpoint is not None else None
                    if remaining is not None:
                        rngs = self._seed_generators(self.rng_state_)
                        epochs = remaining
                if self._input_is_integer():
                    self._check_token_ids(X)
                self._check_monitors()
                self._train(X, y, y_index, rngs, epochs, checkpoint, schedule_start)
        return self

    def _validate_training_data(self, X, y, continuing, classes):
        integer = self._input_is_integer()
        dtype = "numeric" if integer else np.float32
        if continuing:
            self._check_sample_shape(X, before_validation=True)
        X, y = validate_data(self, X, y, reset=not continuing, dtype=dtype, allow_nd=True)
        if integer:
            X = _as_token_ids(X)
        check_class_labels(y)
        if continuing:
            self._check_sample_shape(X)
            try:
                return X, y, encode_labels(y, self.classes_)
            except ValueError:
                raise ValueError(
                    f"`y` contains labels not seen at the first fit: "
                    f"{np.setdiff1d(y, self.classes_).tolist()}; known labels are "
                    f"{self.classes_.tolist()}."
                ) from None
        if classes is None and self.classes is not None:
            classes = self.classes
        if classes is not None:
            classes = np.asarray(classes)
            check_label_types(classes, "classes")
        known = np.unique(y if classes is None else classes)
        if len(known) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes to train, "
                f"got 1 class: {known.tolist()}."
            )
        if self.augment is not None and X.ndim != 4:
            raise ValueError(
                f"augment={self.augment!r} needs images of shape (n, C, H, W), got X of "
                f"shape {X.shape}."
            )
        if self.mixup_alpha > 0 and integer:
            raise ValueError("mixup_alpha > 0 needs float inputs, but the network takes token ids.")
        self.classes_inferred_ = known
        self.input_shape_ = X.shape[1:]
        try:
            y_index = encode_labels(y, known)
        except ValueError:
            raise ValueError(
                f"`y` contains labels not in `classes`: {np.setdiff1d(y, known).tolist()}."
            ) from None
        return X, y, y_index

    def _cuda_devices(self):
        device = self.device_
        if device.type != "cuda":
            return []
        return [device.index if device.index is not None else torch.cuda.current_device()]

    @contextlib.contextmanager
    def _random_generators(self, resume):
        """Seed torch inside ``fork_rng`` and yield the fit's generators."""
        with torch.random.fork_rng(devices=self._cuda_devices(), device_type="cuda"):
            state = getattr(self, "rng_state_", None) if resume else None
            yield self._seed_generators(state)

    def _seed_generators(self, state):
        """Set torch's global RNG and return the fit's generators.

        From ``state`` (a ``rng_state_`` recorded on the same device type), else seeded
        from ``random_state``. Call it inside ``torch.random.fork_rng``.
        """
        device = self.device_
        cuda = self._cuda_devices()
        generator = torch.Generator(device=device)
        if state is not None and state["device_type"] == device.type:
            torch.set_rng_state(state["torch"])
            if cuda:
                torch.cuda.set_rng_state(state["cuda"], cuda[0])
            generator.set_state(state["generator"])
            np_rng = np.random.default_rng()
            np_rng.bit_generator.state = state["numpy"]
            split_seed = state["split_seed"]
        else:
            seeds = check_random_state(self.random_state).randint(0, 2**31 - 1, size=4)
            torch.default_generator.manual_seed(int(seeds[0]))
            if cuda:
                with torch.cuda.device(cuda[0]):
                    torch.cuda.manual_seed(int(seeds[0]))
            generator.manual_seed(int(seeds[1]))
            np_rng = np.random.default_rng(int(seeds[2]))
            split_seed = int(seeds[3])
        return {"generator": generator, "numpy": np_rng, "split_seed": split_seed}

    def record_rng_state(self, rngs):
        """Store the fit's generator states as ``rng_state_`` (at the end of each epoch).

        Parameters
        ----------
        rngs : dict
            The generators yielded for the fit: ``"generator"`` (torch, on the device),
            ``"numpy"`` and ``"split_seed"``.
        """
        cuda = self.device_.type == "cuda"
        self.rng_state_ = {
            "device_type": self.device_.type,
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state(self.device_) if cuda else None,
            "generator": rngs["generator"].get_state(),
            "numpy": rngs["numpy"].bit_generator.state,
            "split_seed": rngs["split_seed"],
        }

    def _train(self, X, y, y_index, rngs, epochs, checkpoint=None, schedule_start=0):
        (X_train, y_train), valid, dataset_train, dataset_valid = self._split(
            X, y, y_index, rngs["split_seed"]
        )
        train = BatchSource(X_train, y_train, self.device_)
        valid = BatchSource(*valid, self.device_) if valid is not None else None
        epoch_kwargs = {"dataset_train": dataset_train, "dataset_valid": dataset_valid}
        loop = TrainingLoop(
            self, train, valid, rngs, resolve_recipe(self.recipe), epoch_kwargs, checkpoint
        )
        self.notify("on_train_begin", X=X, y=y)
        try:
            loop.run(epochs, schedule_start)
        except KeyboardInterrupt:
            pass
        finally:
            self.optimizer_.zero_grad(set_to_none=True)
        self.notify("on_train_end", X=X, y=y)

    def _split(self, X, y, y_index, seed):
        """Return the training arrays, validation arrays (or None) and skorch datasets."""
        dataset = Dataset(X, y)
        if self.train_split is None:
            return (X, y_index), None, dataset, None
        split = self.train_split
        if isinstance(split, numbers.Real):
            split = ValidSplit(float(split), stratified=True, random_state=seed)
        dataset_train, dataset_valid = split(dataset, y)
        train = self._split_arrays(dataset_train, dataset, X, y_index)
        valid = None
        if dataset_valid is not None:
            valid = self._split_arrays(dataset_valid, dataset, X, y_index)
        return train, valid, dataset_train, dataset_valid

    def _split_arrays(self, part, dataset, X, y_index):
        if part is dataset:
            return X, y_index
        if isinstance(part, Subset) and part.dataset is dataset:
            index = np.asarray(part.indices)
            return X[index], y_index[index]
        X_part, y_part = data_from_dataset(part)
        X_part = self._validate_X(X_part)
        return X_part, encode_labels(np.asarray(y_part), self.classes_)

    # ------------------------------------------------------------------ the step hook

    @classmethod
    def train_step_is_capturable(cls):
        """Whether :meth:`train_step` may be captured in a CUDA graph."""
        if cls.train_step_capturable is None:
            return cls.train_step is NetClassifier.train_step
        return bool(cls.train_step_capturable)

    def train_step(self, batch, **fit_params):
        """Make one optimisation step on ``batch``; the per-batch hook of the engine.

        Zeroes the gradients, runs the network under autocast, computes the loss on
        float32 logits (:meth:`get_loss`), backpropagates, notifies
        ``on_grad_computed``, clips the gradient norm if asked, and steps the optimiser.
        On CUDA this whole method is captured once in a CUDA graph and replayed, so it
        must not synchronise with the host.

        Parameters
        ----------
        batch : tuple of (torch.Tensor, torch.Tensor or MixedTarget)
            Inputs and targets on ``device_``.

        Returns
        -------
        step : dict
            ``"loss"``: the detached 0-dim loss tensor; ``"y_pred"``: the logits.
        """
        X, y = batch
        self.optimizer_.zero_grad(set_to_none=True)
        with autocast(autocast_dtype(self.precision, self.device_), self.device_):
            y_pred = self.module_(X)
        loss = self.get_loss(y_pred.float(), y, X=X, training=True)
        return self._backward_and_step(loss, y_pred, batch)

    def _backward_and_step(self, loss, y_pred, batch):
        """Backpropagate ``loss``, notify, clip, step; return the step's record.

        Parameters
        ----------
        loss : torch.Tensor
            The 0-d training loss of ``batch`` (summed when ``loss_reduction="sum"``).
        y_pred : torch.Tensor of shape (batch_size, n_classes)
            The logits of ``batch``.
        batch : tuple
            The batch, passed on to ``on_grad_computed``.

        Returns
        -------
        step : dict
            ``"loss"``: the detached per-sample mean loss; ``"y_pred"``: the logits.
        """
        loss.backward()
        self.notify(
            "on_grad_computed",
            named_parameters=TeeGenerator(self.get_all_learnable_params()),
            batch=batch,
            training=True,
        )
        if self.grad_clip is not None:
            parameters = [p for _, p in self.get_all_learnable_params()]
            clip_gradient_norm(parameters, self.grad_clip)
        self.optimizer_.step()
        if self.loss_reduction == "sum":
            loss = loss / y_pred.shape[0]
        return {"loss": loss.detach(), "y_pred": y_pred}

    def get_loss(self, y_pred, y_true, X=None, training=False):
        """Return the criterion's loss; mixup targets give the weighted pair of losses.

        With ``loss_reduction="sum"`` the training loss is multiplied by the batch size.
        """
        if not isinstance(y_true, (torch.Tensor, MixedTarget)):
            y_true = to_tensor(y_true, device=self.device_)
        if isinstance(y_true, MixedTarget):
            loss = y_true.lam * self.criterion_(y_pred, y_true.y_a) + (
                1.0 - y_true.lam
            ) * self.criterion_(y_pred, y_true.y_b)
        else:
            loss = self.criterion_(y_pred, y_true)
        if training and self.loss_reduction == "sum":
            loss = loss * y_pred.shape[0]
        return loss

    # ------------------------------------------------------------------ inference

    def forward_logits(self, X):
        """Return the float32 logits of a batch on the device (autocast as in training)."""
        with autocast(autocast_dtype(self.precision, self.device_), self.device_):
            out = self.module_(X)
        if isinstance(out, tuple):
            out = out[0]
        return out.float()

    def infer(self, x, **fit_params):
        """Run the network on a batch (skorch's hook behind ``forward``, on ``device_``).

        A float tensor or array is cast to the network's floating dtype (float32 unless
        its parameters are another); token ids are checked as in :meth:`predict`.
        """
        x = to_tensor(x, device=self.device_)
        if isinstance(x, torch.Tensor):
            if self._input_is_integer():
                x = self._model_input(x)
            elif x.is_floating_point():
                parameter = next(self.module_.parameters(), None)
                dtype = parameter.dtype if parameter is not None else torch.float32
                x = x.to(dtype if dtype.is_floating_point else torch.float32)
        return self.module_(x, **fit_params)

    def inference_batch_size(self):
        """Batch size of validation and prediction."""
        size = self.get_params_for("iterator_valid").get("batch_size", self.batch_size)
        return size if size > 0 else self.batch_size

    def _validate_X(self, X):
        integer = self._input_is_integer()
        self._check_sample_shape(X, before_validation=True)
        X = validate_data(
            self, X, reset=False, dtype="numeric" if integer else np.float32, allow_nd=True
        )
        self._check_sample_shape(X)
        if integer:
            X = _as_token_ids(X)
            self._check_token_ids(X)
        return X

    def _check_monitors(self):
        """Raise a ValueError if a callback monitors a validation score without a split."""
        if self.train_split is not None:
            return
        for _, callback in self.callbacks_:
            monitor = getattr(callback, "monitor", None)
            if isinstance(monitor, str) and monitor.startswith("valid_"):
                raise ValueError(
                    f"The callback {type(callback).__name__!r} monitors {monitor!r}, which is "
                    "recorded only with a validation split, but train_split=None: set "
                    "train_split (a fraction such as 0.2, or a callable)."
                )

    def _check_sample_shape(self, X, before_validation=False):
        """Raise a ValueError if ``X`` (when it has a shape) has samples of another shape.

        Before ``validate_data``, two-dimensional input to a net fitted on two-dimensional
        input is left to it (scikit-learn's "X has n features" message).
        """
        shape = getattr(X, "shape", None)
        if shape is None or len(shape) < 2:
            return
        if before_validation and len(shape) == 2 and len(self.input_shape_) == 1:
            return
        if tuple(shape[1:]) != self.input_shape_:
            raise ValueError(
                f"Expected samples of shape {self.input_shape_} (as at fit), got "
                f"{tuple(shape[1:])}."
            )

    def _check_token_ids(self, X):
        """Raise a ValueError unless the ids ``X`` index the network's first embedding.

        Parameters
        ----------
        X : ndarray or torch.Tensor of integer dtype
            Token ids of a network with an integer ``input_dtype``.
        """
        embedding = next((m for m in self.module_.modules() if isinstance(m, nn.Embedding)), None)
        if embedding is None or not len(X):
            return
        low, high = int(X.min()), int(X.max())
        if low < 0 or high >= embedding.num_embeddings:
            raise ValueError(
                f"Expected token ids in [0, {embedding.num_embeddings}) (the network's "
                f"vocabulary), got ids from {low} to {high}."
            )

    def _logits(self, X):
        """Validate ``X`` and return its float32 logits on the device."""
        return self._evaluate_batches(X, self.forward_logits)

    def _evaluate_batches(self, X, function):
        """Validate ``X`` and return ``function`` of its device batches, concatenated.

        The network is in evaluation mode and no gradient is recorded.
        """
        check_is_fitted(self)
        if isinstance(X, TorchDataset):
            batches = self._dataset_batches(X)
        else:
            batches = self._array_batches(self._validate_X(X))
        self._set_training(False)
        with torch.inference_mode():
            chunks = [function(batch) for batch in batches]
        if not chunks:
            raise ValueError(f"Expected at least 1 sample, got an empty {type(X).__name__}.")
        return torch.cat(chunks)

    def _array_batches(self, X):
        """Yield the inference batches of a validated array on the device."""
        batch_size = self.inference_batch_size()
        for start in range(0, len(X), batch_size):
            chunk = np.require(X[start : start + batch_size], requirements=["C", "W"])
            yield torch.from_numpy(chunk).to(self.device_, non_blocking=True)

    def _dataset_batches(self, dataset):
        """Yield the inputs of a torch Dataset's batches (skorch's iterator) on the device.

        skorch passes its own datasets (the validation ``Subset`` to ``EpochScoring``),
        which are not re-validated as arrays: each batch is cast to the network's input
        dtype and its sample shape checked.
        """
        for X, _ in self.get_iterator(dataset, training=False):
            self._check_sample_shape(X)
            yield self._model_input(to_tensor(X, device=self.device_))

    def _model_input(self, X):
        """Cast an input tensor to the network's dtype: int64 ids (checked) or float32."""
        if self._input_is_integer():
            if X.is_floating_point():
                _check_integral(X[X != torch.round(X)], X[X.abs() >= _INT64_BOUND])
            X = X if X.dtype in _INTEGER_DTYPES else X.to(torch.int64)
            self._check_token_ids(X)
            return X
        return X if X.dtype == torch.float32 else X.to(torch.float32)

    def _get_predict_nonlinearity(self):
        nonlin = self.predict_nonlinearity
        if nonlin is None:
            return lambda logits: logits
        if isinstance(nonlin, str) and nonlin == "auto":
            return partial(torch.softmax, dim=1)
        if not callable(nonlin):
            raise TypeError("predict_nonlinearity has to be a callable, 'auto' or None")
        return nonlin

    def predict_proba(self, X):
        """Return class probabilities, the softmax of the logits (float32).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...) or torch Dataset
            A torch Dataset (skorch's ``Dataset``, a ``Subset``) is batched by skorch's
            ``iterator_valid``; its targets are ignored.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), dtype float32
        """
        logits = self._logits(X)
        with torch.inference_mode():
            proba = self._get_predict_nonlinearity()(logits)
        return proba.float().cpu().numpy()

    def decision_function(self, X):
        """Return the logits; for two classes, ``z[:, 1] - z[:, 0]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...) or torch Dataset

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes) or (n_samples,), dtype float32
        """
        logits = self._logits(X)
        if logits.shape[1] == 2:
            logits = logits[:, 1] - logits[:, 0]
        return logits.cpu().numpy()

    def predict(self, X):
        """Return the most probable class label of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...) or torch Dataset

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        index = self._logits(X).argmax(1).cpu().numpy()
        return self.classes_[index]

    # ------------------------------------------------------------------ persistence

    def __getstate__(self):
        """Return the state with torch objects replaced by numpy arrays.

        The torch components (``module_``, ``criterion_``, ``optimizer_`` and any a
        subclass registers) are stored as their state dicts, tensors as numpy arrays;
        callbacks and skorch's bookkeeping are rebuilt at load; ``history_`` becomes a
        list of dicts and ``device_`` a string.
        """
        state = self.__dict__.copy()
        state[_COMPONENTS_KEY] = {
            name: to_numpy_tree(state.pop(name).state_dict()) for name in component_names(self)
        }
        if state.get("initialized_"):
            for name in _REBUILT_AT_LOAD:
                state.pop(name, None)
        if isinstance(state.get("history_"), list):
            state["history_"] = history_as_list(state["history_"])
        if state.get("device_") is not None:
            state["device_"] = str(state["device_"])
        if state.get("rng_state_") is not None:
            state["rng_state_"] = to_numpy_tree(state["rng_state_"])
        return state

    def __setstate__(self, state):
        """Rebuild the net from a state of :meth:`__getstate__` on an available device."""
        state = dict(state)
        components = state.pop(_COMPONENTS_KEY, {})
        rows = state.get("history_")
        if isinstance(rows, list):
            state["history_"] = history_from_list(rows)
        if state.get("rng_state_") is not None:
            state["rng_state_"] = to_torch_tree(state["rng_state_"])
        self.__dict__.update(state)
        if not state.get("initialized_"):
            return
        requested = self.__dict__["device"]
        device = self._loading_device(state.get("device_"))
        self.__dict__["device"] = str(device)
        self.initialized_ = False
        try:
            with torch.random.fork_rng(devices=[]), self._params_as_built():
                self._rebuild_components(set(components))
        finally:
            moved = device.type == "cpu" and torch.device(state.get("device_") or "cpu") != device
            auto = isinstance(requested, str) and requested == "auto"
            self.__dict__["device"] = "cpu" if moved and not auto else requested
        self.history_ = history_from_list(rows) if isinstance(rows, list) else rows
        restore_components(self, to_torch_tree(components))

    def _rebuild_components(self, names):
        """Build the torch components of a net being loaded, before their states are loaded.

        ``initialize`` builds the network, loss and optimiser; a subclass whose fit
        builds more components (named in ``names``, the saved ones) builds them here too.

        Parameters
        ----------
        names : set of str
            Attribute names of the saved component states.
        """
        self.initialize()

    def _loading_device(self, fitted):
        """Return the fitted device if it exists here, else the CPU (warning if CUDA was named)."""
        fitted = torch.device(fitted) if fitted is not None else torch.device("cpu")
        if fitted.type != "cuda":
            return fitted
        if torch.cuda.is_available():
            if fitted.index is not None and fitted.index >= torch.cuda.device_count():
                return torch.device("cuda")  # fitted on a GPU this machine lacks
            return fitted
        requested = self.__dict__["device"]
        if not (isinstance(requested, str) and requested == "auto"):
            warnings.warn(
                f"{type(self).__name__} was fitted on {fitted} (device={requested!r}) but CUDA "
                "is not available here; it is loaded on the CPU and its device set to 'cpu'.",
                DeviceWarning,
                stacklevel=3,
            )
        return torch.device("cpu")


#: Float token ids at least this large in magnitude do not fit in int64.
_INT64_BOUND = 2.0**63


def _as_token_ids(X):
    """Return a validated numeric array as int64 token ids; non-integral values raise."""
    if X.dtype.kind == "f":
        _check_integral(X[X != np.round(X)], X[np.abs(X) >= _INT64_BOUND])
    return X.astype(np.int64, copy=False)


def _check_integral(non_integral, too_large):
    """Raise a ValueError naming the first non-integral or too large float id, if any."""
    for values, expected in (
        (non_integral, "integer values"),
        (too_large, "integer values within int64"),
    ):
        if len(values):
            raise ValueError(
                f"The network takes token ids: expected {expected}, got "
                f"{values.reshape(-1)[0].item()!r}."
            )


#: Parameters that, set on an initialised net, are stored and applied by the next fit.
_DEFERRED_PARAMS = {"module", "optimizer"}

#: Key of the components' state dicts in the state of :meth:`NetClassifier.__getstate__`.
_COMPONENTS_KEY = "_torch_state_dicts"

#: Attributes that ``initialize`` rebuilds when an initialised net is loaded, so not stored.
_REBUILT_AT_LOAD = ("callbacks_", "virtual_params_", "init_context_")
