"""NetClassifier: a skorch NeuralNetClassifier that behaves as a scikit-learn classifier."""

import inspect
import math
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
from skorch.dataset import ValidSplit
from skorch.exceptions import DeviceWarning
from skorch.history import History
from skorch.utils import TeeGenerator, data_from_dataset, params_for, to_tensor
from torch import nn
from torch.utils.data import Dataset as TorchDataset
from torch.utils.data import Subset

from .._validation import check_class_labels, check_label_types, encode_labels
from ..losses import resolve_loss
from ._augment import AUGMENTATIONS, augment_images, mixup
from ._callbacks import VerboseProgressBar
from ._checkpoint import FitCheckpoint
from ._device import PRECISIONS, autocast, autocast_dtype, resolve_device
from ._faults import ON_NONFINITE
from ._optimizer import OptimizerSettings, same_value
from ._recipes import RECIPES, Recipe
from ._state import (
    component_names,
    history_as_list,
    history_from_list,
    restore_components,
    to_numpy_tree,
    to_torch_tree,
    transaction,
)
from ._targets import MixedTarget, WeightedTarget, class_indices, sample_weights, total_weight
from ._training import (
    EvaluationBatches,
    FitDataset,
    TrainingBatches,
    TrainingRun,
    clip_gradient_norm,
    generator_states,
    stopped_by_early_stopping,
)
from ._weights import fit_weights
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
        ``optimizer__foreach`` or ``optimizer__capturable`` is given. Every learning rate
        (``lr``, ``optimizer__lr``, a parameter group's) must be a finite number > 0, and
        the optimiser class must accept the ``optimizer__*`` values; both are checked
        at each fit before any value reaches the optimiser (a ValueError names it).
    lr : float or None, default=None
        Base learning rate. None: the recipe's (0.1 for the SGD recipes) when its
        optimiser is used, else the optimiser's default
        (:data:`~sklearn_calib.estimators.DEFAULT_LRS`): 3e-3 for AdamW and Adam, 0.1 for
        SGD, 1e-3 for another class. These were chosen by the test accuracy after 3 to
        20 epochs of the MLP and the CNN on digits and on 3,000 Fashion-MNIST images
        (3e-3 reached 79 % on average after 3 epochs where 1e-3 reached 71 %).
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
        recorded losses are the criterion's values (per-sample means). With sample or
        class weights, "mean" is the weighted mean ``sum w_i l_i / sum w_i`` of the
        batch and "sum" is ``sum w_i l_i``: the weights' scale then scales the loss and
        its gradient (as repeating samples does), so weights that sum to the number of
        samples keep the unweighted scale (``class_weight="balanced"`` does).
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
        validation split (in every training call: ``fit``, ``partial_fit``,
        ``fit_loop``). Torch's global RNG is seeded inside ``torch.random.fork_rng``, so
        the caller's RNG is unchanged; with an int, refits on the CPU are identical.
    verbose : int, default=0
        0 is silent; 1 prints a table per epoch and shows skorch's ProgressBar.
    warm_start : bool, default=False
        Whether ``fit`` continues training the fitted network instead of starting anew.
    classes : array-like or None, default=None
        The class labels; None infers them from ``y``. ``classes_`` holds them sorted
        (as ``np.unique`` sorts them), whatever their order here.
    class_weight : dict, "balanced" or None, default=None
        Weights of the classes, as in scikit-learn: a dict maps labels to weights
        (labels it does not name weigh 1); "balanced" weighs class k by
        ``n / (K n_k)`` with ``n_k`` its (sample-weighted) count among the K classes of
        ``y``, computed at each ``fit`` and ``partial_fit`` from its ``y``. The weight of
        a sample is its ``sample_weight`` times its class's weight; it multiplies the
        sample's loss before the reduction (see ``loss_reduction``) for every criterion,
        in training and in the recorded validation loss and accuracy.
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
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
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
    built_params_ : dict
        The parameters the fitted network, loss, optimiser and callbacks were built
        from (see Notes).

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

    Training: ``fit``, ``partial_fit`` and skorch's ``fit_loop`` all run the same loop
    (skorch's protocol: ``on_train_begin``, per epoch ``on_epoch_begin``,
    :meth:`run_single_epoch` over :meth:`get_iterator`'s training batches with
    :meth:`train_step`, then over the validation batches with :meth:`validation_step`,
    ``on_epoch_end``, and ``on_train_end``), with the recipe's schedule, augmentation,
    mixup, the seeded generators, the non-finite guard and, for a fresh ``fit``, the
    checkpoint. These three are part of the epoch rather than skorch callbacks: the
    schedule sets each step's learning rate in :meth:`run_single_epoch` (a per-batch
    callback would cost a host synchronisation per batch and stop the CUDA graph
    replay), the guard checks the epoch's losses there, on the device, and the
    checkpoint is written after ``on_epoch_end`` also when a callback stops training
    or fails. Subclasses change training through :meth:`train_step_single` (forward,
    loss and backward of a batch) or :meth:`train_step` (the whole update): they
    receive ``(X_batch, target)`` on the device, ``target`` a class-index tensor, a
    :class:`WeightedTarget` or a :class:`MixedTarget`. Set ``train_step_capturable =
    True`` on a subclass whose overridden step may be captured in a CUDA graph (no host
    synchronisation, no data-dependent Python control flow); otherwise it runs eagerly.

    Parameters set with :meth:`set_params` are only stored; the next training call
    applies them. A fresh ``fit`` builds the network, loss, optimiser and callbacks
    from the parameters. A continued one (``partial_fit``, ``fit`` with
    ``warm_start=True``, ``fit_loop``) compares them with the parameters the fitted
    parts were built from (``built_params_``): a new network (``module``,
    ``module__*``) or optimiser class (or parameter-group patterns) makes it a fresh
    fit; a new ``criterion``/``criterion__*`` rebuilds the loss; new ``lr`` or
    ``optimizer__*`` values are written into the optimiser in place, keeping its state
    (a new learning rate also becomes the base of the recipe's schedule); new
    ``callbacks``/``callbacks__*`` re-initialise the callbacks. Pickling, copying and
    loading rebuild the fitted parts from ``built_params_`` too.

    A network given as a class or instance is checked at fit, before training: its
    first layer's input width (a ``Linear``'s ``in_features``, a convolution's
    ``in_channels``) must match ``X`` and its output width the number of classes, else
    a ValueError names both numbers.

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

    #: Prefixes of routed parameters (``module__*``, ...) besides skorch's ``prefixes_``,
    #: which lists a component's only once it is built.
    routed_prefixes = ("module", "criterion", "optimizer")

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
        "class_weight": [StrOptions({"balanced"}), dict, None],
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
        class_weight=None,
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
        self.class_weight = class_weight
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

    def get_params(self, deep=True, **kwargs):
        """Get parameters; a stored ``callbacks__*`` value wins over the built callback's."""
        params = super().get_params(deep=deep, **kwargs)
        stored = {k: v for k, v in self._param_values().items() if k.startswith("callbacks__")}
        return {**params, **stored}

    def set_params(self, **params):
        """Store parameters; the next ``fit``, ``partial_fit`` or ``fit_loop`` applies them.

        Every key follows one rule (see the class's Notes): the value is stored and the
        fitted network, loss, optimiser and callbacks stay as they are until the next
        training call, so predicting, pickling and copying keep the fitted model. An
        unknown name raises a ValueError and stores nothing.

        Parameters
        ----------
        **params : dict
            Parameter names (``lr``, ``module__hidden_units``, ``optimizer__momentum``,
            ``callbacks__print_log``, ...) and values.

        Returns
        -------
        self : NetClassifier
        """
        known = set(self._get_param_names())
        prefixes = {*self.prefixes_, *self.routed_prefixes}
        unknown = sorted(
            key
            for key in params
            if key.endswith("_")
            or (key not in known and not ("__" in key and key.split("__")[0] in prefixes))
        )
        if unknown:
            raise ValueError(
                f"Invalid parameter(s) {unknown} for {type(self).__name__}: expected one of "
                f"{sorted(known)} or a name routed by one of the prefixes "
                f"{sorted(prefixes)} (such as module__hidden_units)."
            )
        self._params_to_validate.update(key for key in params if "__" in key)
        vars(self).update(params)  # a network or loss instance is a parameter like any other
        return self

    def _param_values(self):
        """Return the parameters' current values (a dict of the attributes, not copied)."""
        return {name: self.__dict__[name] for name in self._get_param_names()}

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

    def initialize(self):
        """Build the network, loss, optimiser and callbacks on ``device_`` from the parameters.

        The network's input shape and number of classes come from the data, so a fit
        calls this. A network given as a class or instance is checked against them.
        """
        if not hasattr(self, "input_shape_"):
            raise ValueError(
                f"{type(self).__name__} infers the network's input shape and number of "
                "classes from the data: call fit(X, y) instead of initialize()."
            )
        self.check_training_readiness()
        self.device_ = resolve_device(self.device)
        self._initialize_callbacks()
        with self._current_init_context("module"):
            self.initialize_module()
        self._check_network()
        with self._current_init_context("criterion"):
            self.initialize_criterion()
        with self._current_init_context("optimizer"):
            self.initialize_optimizer()
        self._initialize_history()
        self._validate_params()
        self.built_params_ = self._param_values()
        self.initialized_ = True
        return self

    def initialize_module(self):
        """Build the network (``input_shape`` and ``n_classes`` inferred at fit) on ``device_``."""
        self.module_ = self._build_module(self._param_values()).to(self.device_)
        return self

    def initialize_criterion(self):
        """Build the loss from its name or class and the ``criterion__*`` parameters."""
        self.criterion_ = self._build_criterion(self._param_values()).to(self.device_)
        return self

    def initialize_optimizer(self, triggered_directly=None):
        """Build the optimiser (see ``optimizer``); its settings are checked first."""
        settings = OptimizerSettings.from_params(self._param_values())
        self.optimizer_ = settings.build(self.get_all_learnable_params(), self.device_)
        return self

    def _build_module(self, params):
        """Return the network built from ``params`` (current or recorded parameters)."""
        module, kwargs = params["module"], params_for("module", params)
        if isinstance(module, nn.Module):
            return type(module)(**kwargs) if kwargs else module
        network = resolve_network(module)
        inferred = {"input_shape": self.input_shape_, "n_classes": len(self.classes_)}
        signature = inspect.signature(network.__init__).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.values())
        inferred = {k: v for k, v in inferred.items() if takes_any or k in signature}
        return network(**inferred, **kwargs)

    def _build_criterion(self, params):
        """Return the loss built from ``params`` (current or recorded parameters)."""
        criterion, kwargs = params["criterion"], params_for("criterion", params)
        if isinstance(criterion, nn.Module):
            return type(criterion)(**kwargs) if kwargs else criterion
        return resolve_loss(criterion)(**kwargs)

    def _check_network(self):
        """Raise a ValueError naming both numbers if the network does not fit X or the classes.

        One sample of zeros goes through the network in evaluation mode: a layer that
        fails on its input (a ``Linear`` or convolution of another width than X's) and
        an output width other than the number of classes are reported.
        """
        shape, n_classes = self.input_shape_, len(self.classes_)
        layers = (nn.Linear, nn.modules.conv._ConvNd)
        entered = []
        handles = [
            module.register_forward_pre_hook(
                lambda module, args, name=name: entered.append((name, module, args[0].shape))
            )
            for name, module in self.module_.named_modules()
            if isinstance(module, layers)
        ]
        dtype = torch.int64 if self._input_is_integer() else torch.float32
        self.module_.eval()
        try:
            with torch.no_grad():
                width = self.forward_logits(
                    torch.zeros((1, *shape), dtype=dtype, device=self.device_)
                ).shape[-1]
        except RuntimeError as error:
            raise ValueError(
                f"The network fails on samples of shape {shape} (X's){_layer_mismatch(entered)}: "
                f"{error}"
            ) from None
        finally:
            self.module_.train()
            for handle in handles:
                handle.remove()
        if width != n_classes:
            raise ValueError(
                f"The network returns {width} scores per sample, but y has {n_classes} "
                f"classes: its output width must be the number of classes ({n_classes})."
            )

    def _network_class(self):
        if isinstance(self.module, nn.Module):
            return type(self.module)
        return resolve_network(self.module)

    def _input_is_integer(self):
        return getattr(self._network_class(), "input_dtype", torch.float32) in _INTEGER_DTYPES

    def load_params(
        self, f_params=None, f_optimizer=None, f_criterion=None, f_history=None, **kwargs
    ):
        """Load states saved by skorch's ``save_params`` into the fitted net, on ``device_``.

        Parameters
        ----------
        f_params, f_optimizer, f_criterion : file-like object, str or None, default=None
            Files of the network's, the optimiser's and the loss's state (``torch.load``
            with ``weights_only=True``).
        f_history : file-like object, str or None, default=None
            File of the history (JSON).
        **kwargs
            ``f_<name>`` files of other components (``<name>_``).
        """
        check_is_fitted(self)
        if f_history is not None:
            self.history_ = History.from_file(f_history)
        files = {"module_": f_params, "optimizer_": f_optimizer, "criterion_": f_criterion}
        for key, file in kwargs.items():
            if not key.startswith("f_"):
                raise TypeError(f"load_params got an unexpected argument {key!r}.")
            files[key[2:] + "_"] = file
        states = {
            name: torch.load(file, map_location="cpu", weights_only=True)
            for name, file in files.items()
            if file is not None
        }
        restore_components(self, states)

    # ------------------------------------------------------------------ fitting

    def fit(self, X, y, sample_weight=None):
        """Train the network on ``(X, y)`` from a fresh initialisation.

        With ``warm_start=True`` a fitted network is trained further instead, as by
        :meth:`partial_fit`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features) or (n_samples, C, H, W)
            Inputs; images as 4-D arrays.
        y : array-like of shape (n_samples,)
            Class labels of any type.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Non-negative weights of the samples (see ``class_weight`` and
            ``loss_reduction``); integer weights train as repeated samples would.

        Returns
        -------
        self : NetClassifier
        """
        fresh = not (self.warm_start and self.__sklearn_is_fitted__())
        return self._fit(X, y, sample_weight, classes=None, epochs=None, fresh=fresh)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Train the fitted network for ``max_epochs`` more epochs (or fit it if unfitted).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (n_classes,) or None, default=None
            All class labels, for the first call when ``y`` may lack some.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            As in :meth:`fit`.

        Returns
        -------
        self : NetClassifier
        """
        return self._fit(X, y, sample_weight, classes=classes, epochs=None, fresh=False)

    def fit_loop(self, X, y=None, epochs=None, sample_weight=None):
        """Train the fitted network for ``epochs`` more epochs: :meth:`partial_fit`'s loop.

        skorch's training loop: the same as every training call of this class (the
        recipe's schedule over these ``epochs``, augmentation, the seeded generators,
        the non-finite guard and the callbacks' ``on_train_begin``/``on_train_end``).
        An unfitted net is fitted first.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
        y : array-like of shape (n_samples,)
        epochs : int or None, default=None
            None: ``max_epochs``.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            As in :meth:`fit`.

        Returns
        -------
        self : NetClassifier
        """
        return self._fit(X, y, sample_weight, classes=None, epochs=epochs, fresh=False)

    def __sklearn_is_fitted__(self):
        return (
            bool(self.initialized_)
            and hasattr(self, "input_shape_")
            and super().__sklearn_is_fitted__()
        )

    def _fit(self, X, y, sample_weight, classes, epochs, fresh):
        """Validate the data, build or update the net's parts and run the training loop."""
        self._check_params()
        if epochs is not None and not (isinstance(epochs, numbers.Integral) and epochs >= 1):
            raise ValueError(f"Expected `epochs` to be an integer >= 1 or None, got {epochs!r}.")
        fresh = fresh or not self._continuable()
        reused = isinstance(self.module, nn.Module) or isinstance(self.criterion, nn.Module)
        with transaction(self, in_place=not fresh or reused):
            data = self._training_data(X, y, sample_weight, classes, reset=fresh)
            if fresh:
                self.device_ = resolve_device(self.device)
            checkpoint = None
            if fresh and epochs is None and self.checkpoint_dir is not None:
                checkpoint = FitCheckpoint.for_fit(self, data.X, data.y_index)
            self.checkpoint_path_ = checkpoint.path if checkpoint is not None else None
            epochs = epochs or self.max_epochs
            start, length = (0, epochs) if fresh else (len(self.history), epochs)
            with torch.random.fork_rng(devices=self._cuda_devices(), device_type="cuda"):
                if fresh:
                    self._initialize_seeded()
                    remaining = checkpoint.resume(self) if checkpoint is not None else None
                    epochs = epochs if remaining is None else remaining
                generators = self._generators(self.rng_state_)
                if not fresh:
                    self._update_parts()
                if self._input_is_integer():
                    self._check_token_ids(data.X)
                if data.weight is not None:
                    self._check_weighted_criterion()
                self._train(data, generators, epochs, start, length, checkpoint)
        return self

    def _continuable(self):
        """Whether a training call may continue the fitted net (same network and optimiser)."""
        if not self.__sklearn_is_fitted__():
            return False
        current, changed = self._changed_params()
        if any(self._rebuilds_network(name) for name in changed):
            return False
        before = OptimizerSettings.from_params(self.built_params_)
        after = OptimizerSettings.from_params(current)
        return before.optimizer is after.optimizer and same_value(before.patterns, after.patterns)

    def _changed_params(self):
        """The current parameter values and the names of those changed since the parts were
        built (``built_params_``)."""
        built, current = self.built_params_, self._param_values()
        changed = {
            name
            for name in set(built) | set(current)
            if not same_value(built.get(name), current.get(name))
        }
        return current, changed

    def _rebuilds_network(self, name):
        """Whether a new value of the parameter ``name`` needs a new network (a fresh fit)."""
        return name == "module" or name.startswith("module__")

    def _update_parts(self):
        """Apply the parameters set since the parts were built (a continued fit).

        The loss is rebuilt if ``criterion`` or ``criterion__*`` changed, the optimiser's
        changed values are written into it (after the same checks as at a fresh fit), the
        callbacks are re-initialised if ``callbacks`` or ``callbacks__*`` changed.
        """
        current, changed = self._changed_params()
        OptimizerSettings.from_params(current).update(
            self.optimizer_, OptimizerSettings.from_params(self.built_params_)
        )
        if any(name.split("__", 1)[0] == "criterion" for name in changed):
            with self._current_init_context("criterion"):
                self.initialize_criterion()
        if any(name.split("__", 1)[0] == "callbacks" for name in changed):
            self._initialize_callbacks()
        self.built_params_ = current

    def _check_weighted_criterion(self):
        """Raise a ValueError if the criterion's ``forward`` takes no ``sample_weight``."""
        parameters = inspect.signature(self.criterion_.forward).parameters.values()
        if not any(p.name == "sample_weight" or p.kind is p.VAR_KEYWORD for p in parameters):
            raise ValueError(
                f"The fit has sample or class weights, but the criterion "
                f"{type(self.criterion_).__name__} takes no `sample_weight`: use a loss of "
                "sklearn_calib.losses (every one takes it) or a criterion whose forward "
                "accepts sample_weight."
            )

    def _training_data(self, X, y, sample_weight, classes, reset):
        """Validate ``(X, y)`` (for a fresh fit, set the classes and input shape from them)."""
        integer = self._input_is_integer()
        dtype = "numeric" if integer else np.float32
        if not reset:
            self._check_sample_shape(X, before_validation=True)
        X, y = validate_data(self, X, y, reset=reset, dtype=dtype, allow_nd=True)
        if integer:
            X = _as_token_ids(X)
        check_class_labels(y)
        if not reset:
            self._check_sample_shape(X)
            try:
                y_index = encode_labels(y, self.classes_)
            except ValueError:
                raise ValueError(
                    f"`y` contains labels not seen at the first fit: "
                    f"{np.setdiff1d(y, self.classes_).tolist()}; known labels are "
                    f"{self.classes_.tolist()}."
                ) from None
        else:
            y_index = self._set_classes_and_shape(X, y, classes, integer)
        weight = fit_weights(X, y_index, self.classes_, sample_weight, self.class_weight)
        return FitDataset(X, y, y_index, weight)

    def _set_classes_and_shape(self, X, y, classes, integer):
        """Set ``classes_`` and ``input_shape_`` for a fresh fit; return the class indices."""
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
            return encode_labels(y, known)
        except ValueError:
            raise ValueError(
                f"`y` contains labels not in `classes`: {np.setdiff1d(y, known).tolist()}."
            ) from None

    def _cuda_devices(self):
        device = self.device_
        if device.type != "cuda":
            return []
        return [device.index if device.index is not None else torch.cuda.current_device()]

    def _initialize_seeded(self):
        """Seed torch from ``random_state``, build the parts and record the generators' states.

        Call it inside ``torch.random.fork_rng``: it sets torch's global generator, whose
        state after the weights' initialisation starts ``rng_state_``.
        """
        seeds = self._seeds()
        torch.default_generator.manual_seed(seeds[0])
        cuda = self._cuda_devices()
        if cuda:
            with torch.cuda.device(cuda[0]):
                torch.cuda.manual_seed(seeds[0])
        self.initialize()
        generator = torch.Generator(device=self.device_).manual_seed(seeds[1])
        self.rng_state_ = generator_states(
            self.device_, generator, np.random.default_rng(seeds[2]), seeds[3]
        )

    def _seeds(self):
        """Seeds from ``random_state``: torch's global generator, the batch order, numpy, split."""
        return check_random_state(self.random_state).randint(0, 2**31 - 1, size=4).tolist()

    def _generators(self, state):
        """Set torch's global generator from ``state`` and return the run's generators.

        ``state`` is a ``rng_state_``; one recorded on another device type (a model
        fitted on CUDA continued on the CPU) gives generators seeded from
        ``random_state`` instead. Call it inside ``torch.random.fork_rng``.
        """
        generator = torch.Generator(device=self.device_)
        if state["device_type"] != self.device_.type:
            seeds = self._seeds()
            torch.default_generator.manual_seed(seeds[0])
            generator.manual_seed(seeds[1])
            return {
                "generator": generator,
                "numpy": np.random.default_rng(seeds[2]),
                "split_seed": seeds[3],
            }
        torch.set_rng_state(state["torch"])
        cuda = self._cuda_devices()
        if cuda:
            torch.cuda.set_rng_state(state["cuda"], cuda[0])
        generator.set_state(state["generator"])
        np_rng = np.random.default_rng()
        np_rng.bit_generator.state = state["numpy"]
        return {"generator": generator, "numpy": np_rng, "split_seed": state["split_seed"]}

    def _train(self, data, generators, epochs, schedule_start, schedule_epochs, checkpoint):
        """The training loop: ``epochs`` epochs with skorch's callback protocol.

        Parameters
        ----------
        data : FitDataset
            The validated training data.
        generators : dict
            From :meth:`_generators`.
        epochs : int
            Epochs to train.
        schedule_start, schedule_epochs : int
            History index of the recipe schedule's first epoch, and its length.
        checkpoint : FitCheckpoint or None
            Written after each epoch's callbacks, also when one of them stops training
            or fails.
        """
        dataset_train, dataset_valid = self._split(data, generators["split_seed"])
        source = dataset_train.batch_source(self.device_)
        steps = math.ceil(source.n_samples / self.batch_size)
        self._run = TrainingRun(
            self, generators, schedule_start, schedule_epochs, steps, checkpoint
        )
        channels_last = self.device_.type == "cuda" and data.X.ndim == 4
        benchmark = torch.backends.cudnn.benchmark
        try:
            iterator_train = self.get_iterator(dataset_train, training=True)
            iterator_valid = None
            if dataset_valid is not None:
                iterator_valid = self.get_iterator(dataset_valid, training=False)
            self._check_monitors()
            epoch_kwargs = {"dataset_train": dataset_train, "dataset_valid": dataset_valid}
            if self.device_.type == "cuda":
                torch.backends.cudnn.benchmark = True
            if channels_last:
                self.module_.to(memory_format=torch.channels_last)
            self.notify("on_train_begin", X=data.X, y=data.y)
            try:
                for _ in range(epochs):
                    self._run_epoch(iterator_train, iterator_valid, epoch_kwargs)
            except KeyboardInterrupt:
                pass
            finally:
                self.optimizer_.zero_grad(set_to_none=True)
                torch.backends.cudnn.benchmark = benchmark
                if channels_last:
                    self.module_.to(memory_format=torch.contiguous_format)
            self.notify("on_train_end", X=data.X, y=data.y)
        finally:
            del self._run

    def _run_epoch(self, iterator_train, iterator_valid, epoch_kwargs):
        """One epoch: callbacks, training and validation passes, checkpoint."""
        run = self._run
        self.notify("on_epoch_begin", **epoch_kwargs)
        run.begin_epoch()
        self.run_single_epoch(
            iterator_train, training=True, prefix="train", step_fn=self.train_step
        )
        self.run_single_epoch(
            iterator_valid, training=False, prefix="valid", step_fn=self.validation_step
        )
        self.rng_state_ = run.rng_state()
        stopped = False
        try:
            self.notify("on_epoch_end", **epoch_kwargs)
        except KeyboardInterrupt:
            stopped = stopped_by_early_stopping(self.callbacks_)  # else a Ctrl-C: resumable
            raise
        finally:  # also when a callback fails: the fit can be resumed
            if run.checkpoint is not None:
                run.checkpoint.save(self, stopped=stopped)

    def _split(self, data, seed):
        """Return the training and validation FitDatasets (None without ``train_split``)."""
        if self.train_split is None:
            return data, None
        split = self.train_split
        if isinstance(split, numbers.Real):
            split = ValidSplit(float(split), stratified=True, random_state=seed)
        dataset_train, dataset_valid = split(data, data.y)
        dataset_train = self._fit_dataset(dataset_train, data)
        if dataset_valid is not None:
            dataset_valid = self._fit_dataset(dataset_valid, data)
        return dataset_train, dataset_valid

    def _fit_dataset(self, part, data):
        """Return a split's part as a FitDataset (a foreign dataset validated like ``X``)."""
        if part is data or isinstance(part, FitDataset):
            return part
        if isinstance(part, Subset) and part.dataset is data:
            return data.subset(np.asarray(part.indices))
        X, y = data_from_dataset(part)
        y = np.asarray(y)
        return FitDataset(self._validate_X(X), y, encode_labels(y, self.classes_), None)

    def get_iterator(self, dataset, training=False):
        """Return the batches of ``dataset``, on the device for the net's own datasets.

        The training batches of a fit are cut from device tensors in a new random order
        each epoch (the fit's seeded generator) and augmented and mixed as the parameters
        say; validation batches follow the sample order. Other datasets use skorch's
        iterator (prediction on a torch Dataset).

        Parameters
        ----------
        dataset : torch Dataset
        training : bool, default=False

        Returns
        -------
        iterator : iterable of batches ``(X, target)``
        """
        if not isinstance(dataset, FitDataset):
            if not training:
                return super().get_iterator(dataset, training=False)
            dataset = self._fit_dataset(dataset, None)
        source = dataset.batch_source(self.device_)
        if training:
            return TrainingBatches(
                source, self.batch_size, self._run.generator, self._prepare_batch
            )
        channels_last = self.device_.type == "cuda" and source.X.ndim == 4
        return EvaluationBatches(source, self.inference_batch_size(), channels_last)

    def _prepare_batch(self, X, target):
        """Augment and mix a training batch on the device (the fit's generators)."""
        run = self._run
        if self.augment is not None:
            X = augment_images(X, self.augment, run.generator)
        if self.mixup_alpha > 0:
            lam = float(run.np_rng.beta(self.mixup_alpha, self.mixup_alpha))
            X, target = mixup(X, target, lam, run.generator)
        if self.device_.type == "cuda" and X.ndim == 4:
            X = X.contiguous(memory_format=torch.channels_last)
        return X, target

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        """Run ``step_fn`` over the batches of ``iterator``, as skorch's epoch does.

        The batch entries of the history (``{prefix}_loss``, ``{prefix}_batch_size``; for
        validation also ``valid_acc``) are filled in at the end, from device tensors,
        unless a callback does per-batch work: then every batch runs with skorch's
        per-batch notifications and one host synchronisation. The training pass sets the
        recipe's per-step learning rates, replays a CUDA graph where possible and ends
        with the non-finite check (``on_nonfinite``).

        Parameters
        ----------
        iterator : iterable of batches or None
            None: nothing to do.
        training : bool
        prefix : {"train", "valid"}
        step_fn : callable
            ``step_fn(batch) -> {"loss", "y_pred"}``: :meth:`train_step` or
            :meth:`validation_step`.
        """
        if iterator is None:
            return
        run, history = self._run, self.history
        self._set_training(training)
        if training:
            run.guard.epoch_begin()
        losses, accuracies, sizes = [], [], []
        with torch.inference_mode(not training):
            for i, batch in enumerate(iterator):
                target = batch[1]
                size = len(class_indices(target))
                if training:
                    run.before_step(i)
                if run.live:
                    self.notify("on_batch_begin", batch=batch, training=training)
                    step = step_fn(batch, **fit_params)
                else:
                    if training:
                        history.new_batch()
                        history.record_batch("train_batch_size", size)
                    step = (
                        run.stepper.step(batch, full=size == self.batch_size)
                        if training
                        else step_fn(batch, **fit_params)
                    )
                # a copy: a replayed CUDA graph returns the same output tensor every step
                losses.append(step["loss"].detach().float().clone())
                if not training:
                    accuracies.append(_accuracy(step["y_pred"], target))
                sizes.append(size)
                if run.live:
                    history.record_batch(f"{prefix}_loss", losses[-1].item())
                    if not training:
                        history.record_batch("valid_acc", accuracies[-1].item())
                    history.record_batch(f"{prefix}_batch_size", size)
                    self.notify("on_batch_end", batch=batch, training=training, **step)
                elif training:
                    for callback in run.progress:
                        callback.on_batch_end(self, batch=None, training=True)
        history.record(f"{prefix}_batch_count", len(sizes))
        values = torch.stack(losses + accuracies).tolist() if sizes else []
        values, accuracies = values[: len(sizes)], values[len(sizes) :]
        if not run.live and not training:
            for loss, acc, size in zip(values, accuracies, sizes, strict=True):
                history.new_batch()
                history.record_batch("valid_loss", loss)
                history.record_batch("valid_acc", acc)
                history.record_batch("valid_batch_size", size)
                for callback in run.progress:
                    callback.on_batch_end(self, batch=None, training=False)
        if training:
            if not run.live:
                for entry, value in zip(history[-1]["batches"], values, strict=True):
                    entry["train_loss"] = value
            if not run.guard.check(values):
                raise KeyboardInterrupt  # restored to the last finite epoch: training stops

    # ------------------------------------------------------------------ the steps

    @classmethod
    def train_step_is_capturable(cls):
        """Whether :meth:`train_step` may be captured in a CUDA graph."""
        if cls.train_step_capturable is None:
            return (
                cls.train_step is NetClassifier.train_step
                and cls.train_step_single is NetClassifier.train_step_single
            )
        return bool(cls.train_step_capturable)

    def train_step(self, batch, **fit_params):
        """Make one optimisation step on ``batch``: the update of skorch's ``train_step``.

        Zeroes the gradients, computes them with :meth:`train_step_single`, notifies
        ``on_grad_computed``, clips the gradient norm if asked and steps the optimiser.
        On CUDA this whole method is captured once in a CUDA graph and replayed, so it
        must not synchronise with the host.

        Parameters
        ----------
        batch : tuple of (torch.Tensor, target)
            Inputs and targets on ``device_`` (a class-index tensor, a
            :class:`WeightedTarget` or a :class:`MixedTarget`).

        Returns
        -------
        step : dict
            ``"loss"``: the detached 0-dim per-sample (weighted) mean loss; ``"y_pred"``:
            the logits.
        """
        self.optimizer_.zero_grad(set_to_none=True)
        step = self.train_step_single(batch, **fit_params)
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
        return step

    def train_step_single(self, batch, **fit_params):
        """Compute the loss of ``batch`` and its gradients (forward under autocast, backward).

        Parameters
        ----------
        batch : tuple of (torch.Tensor, target)
            As in :meth:`train_step`.

        Returns
        -------
        step : dict
            ``"loss"``: the detached per-sample (weighted) mean loss; ``"y_pred"``: the
            logits.
        """
        X, target = batch
        with autocast(autocast_dtype(self.precision, self.device_), self.device_):
            y_pred = self.module_(X)
        loss = self.get_loss(y_pred.float(), target, X=X, training=True)
        return self._backward(loss, y_pred, target)

    def _backward(self, loss, y_pred, target):
        """Backpropagate the training ``loss`` of a batch; return the step's record."""
        loss.backward()
        if self.loss_reduction == "sum":
            loss = loss / total_weight(target)
        return {"loss": loss.detach(), "y_pred": y_pred}

    def validation_step(self, batch, **fit_params):
        """Return the loss and logits of a validation batch (evaluation mode, no gradient).

        Parameters
        ----------
        batch : tuple of (torch.Tensor, target)

        Returns
        -------
        step : dict
            ``"loss"``: the per-sample (weighted) mean loss; ``"y_pred"``: the logits.
        """
        X, target = batch
        y_pred = self.forward_logits(X)
        return {"loss": self.get_loss(y_pred, target, X=X, training=False), "y_pred": y_pred}

    def get_loss(self, y_pred, y_true, X=None, training=False, **criterion_kwargs):
        """Return the criterion's loss of a batch, weighted and mixed as its target says.

        A :class:`WeightedTarget` passes its weights to the criterion as
        ``sample_weight``; a :class:`MixedTarget` gives ``lam * L(z, y_a) + (1 - lam) *
        L(z, y_b)``. With ``loss_reduction="sum"`` the training loss is multiplied by the
        batch size (the sum of the weights). ``criterion_kwargs`` go to the criterion (a
        per-sample ``gamma``).
        """
        if isinstance(y_true, MixedTarget):
            loss = y_true.lam * self._criterion_loss(y_pred, y_true.y_a, criterion_kwargs) + (
                1.0 - y_true.lam
            ) * self._criterion_loss(y_pred, y_true.y_b, criterion_kwargs)
        else:
            loss = self._criterion_loss(y_pred, y_true, criterion_kwargs)
        if training and self.loss_reduction == "sum":
            loss = loss * total_weight(y_true)
        return loss

    def _criterion_loss(self, y_pred, target, criterion_kwargs):
        if isinstance(target, WeightedTarget):
            return self.criterion_(
                y_pred, target.y, sample_weight=target.weight, **criterion_kwargs
            )
        if not isinstance(target, torch.Tensor):
            target = to_tensor(target, device=self.device_)
        return self.criterion_(y_pred, target, **criterion_kwargs)

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
        state.pop("_run", None)
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
        """Rebuild the net from a state of :meth:`__getstate__` on an available device.

        The fitted parts are built from ``built_params_`` (the parameters they were
        fitted with), then their saved states are loaded. A state saved before
        ``built_params_`` existed takes its parameters, and parameters added since
        then take their defaults.
        """
        state = dict(state)
        components = state.pop(_COMPONENTS_KEY, {})
        if isinstance(state.get("history_"), list):
            state["history_"] = history_from_list(state["history_"])
        if state.get("rng_state_") is not None:
            state["rng_state_"] = to_torch_tree(state["rng_state_"])
        legacy = state.pop("_built_params", None)  # saved by an earlier version
        if state.get("initialized_") and "built_params_" not in state:
            state["built_params_"] = legacy or {
                name: value
                for name, value in state.items()
                if not (name.endswith("_") or name.startswith("_"))
            }
        for cls in type(self).__mro__[: type(self).__mro__.index(NetClassifier) + 1]:
            for name, parameter in inspect.signature(cls.__init__).parameters.items():
                if parameter.default is not parameter.empty:
                    state.setdefault(name, parameter.default)
        self.__dict__.update(state)
        if not state.get("initialized_"):
            return
        requested = self.__dict__["device"]
        self.device_ = self._loading_device(state.get("device_"))
        moved = (
            self.device_.type == "cpu" and torch.device(state.get("device_") or "cpu").type != "cpu"
        )
        if moved and not (isinstance(requested, str) and requested == "auto"):
            self.__dict__["device"] = "cpu"
        self.init_context_ = None
        with torch.random.fork_rng(devices=[]):  # initial weights, replaced just below
            self._build_parts(self.built_params_)
        restore_components(self, to_torch_tree(components))

    def _build_parts(self, params):
        """Build the fitted parts of a net being loaded from the recorded ``params``.

        The network, loss and optimiser are built as they were fitted; the callbacks
        from the current parameters. A subclass whose fit builds more components builds
        them here too.

        Parameters
        ----------
        params : dict
            The parameters the parts were built from (``built_params_``).
        """
        self._initialize_callbacks()
        with self._current_init_context("module"):
            self.module_ = self._build_module(params).to(self.device_)
        with self._current_init_context("criterion"):
            self.criterion_ = self._build_criterion(params).to(self.device_)
        with self._current_init_context("optimizer"):
            self.optimizer_ = OptimizerSettings.from_params(params).build(
                self.get_all_learnable_params(), self.device_
            )
        self.built_params_ = {
            **params,
            **{k: v for k, v in self._param_values().items() if k.split("__")[0] == "callbacks"},
        }

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


def _layer_mismatch(entered):
    """Describe the last layer entered if its input width is not the one it takes."""
    if not entered:
        return ""
    name, layer, shape = entered[-1]
    if isinstance(layer, nn.Linear):
        takes, gets, what = layer.in_features, shape[-1], "input features"
    else:
        takes, gets, what = layer.in_channels, shape[1] if len(shape) > 1 else None, "channels"
    if takes in (0, gets):
        return ""
    return f": its layer {name!r} ({type(layer).__name__}) takes {takes} {what} but gets {gets}"


def _accuracy(logits, target):
    """Return the (weighted) accuracy of a batch's logits as a 0-d tensor."""
    correct = (logits.argmax(1) == class_indices(target)).float()
    weight = sample_weights(target)
    if weight is None:
        return correct.mean()
    return (correct * weight).sum() / weight.sum().clamp_min(torch.finfo(torch.float32).tiny)


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


#: Key of the components' state dicts in the state of :meth:`NetClassifier.__getstate__`.
_COMPONENTS_KEY = "_torch_state_dicts"

#: Attributes rebuilt when an initialised net is loaded, so not stored.
_REBUILT_AT_LOAD = ("callbacks_", "virtual_params_", "init_context_")
