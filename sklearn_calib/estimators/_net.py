"""NetClassifier: a skorch NeuralNetClassifier that behaves as a scikit-learn classifier."""

import copy
import inspect
import numbers
import os
from functools import partial

import torch
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import (
    Interval,
    Options,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils.validation import check_is_fitted
from skorch import NeuralNetClassifier
from skorch.callbacks import EpochTimer, PassthroughScoring, PrintLog
from skorch.dataset import ValidSplit
from skorch.utils import to_tensor
from torch import nn

from ..losses import resolve_loss
from ._augment import AUGMENTATIONS
from ._callbacks import VerboseProgressBar
from ._checkpoint import FitCheckpoint
from ._continuation import continuable, update_parts
from ._device import PRECISIONS, autocast, autocast_dtype, resolve_device
from ._faults import ON_NONFINITE
from ._inference import evaluate
from ._inputs import (
    as_fit_dataset,
    check_network,
    check_token_ids,
    check_weighted_criterion,
    model_input,
    split_input,
    takes_token_ids,
    training_data,
)
from ._optimizer import OptimizerSettings
from ._persistence import loaded_state, loading_device, net_state, saved_params
from ._recipes import RECIPE_ALIASES, RECIPES, Recipe
from ._rng import RunGenerators, cuda_devices, fit_seeds, resolve_split_seed, seed_torch
from ._run import TrainingRun, notify_grad_computed, per_batch_pass
from ._signature import declare_inherited_parameters
from ._state import component_names, restore_components, transaction
from ._targets import MixedTarget, WeightedTarget, target_loss, total_weight
from ._training import EvaluationBatches, FitDataset, TrainingBatches, clip_gradient_norm
from .networks import resolve_network


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
        its constructor when it accepts them. An instance is copied at each fresh fit:
        training starts from its weights (pretrained, or initialised as you chose) and
        leaves the instance unchanged, so refits and clones start alike. A class
        attribute ``input_dtype`` of an integer dtype (token ids) keeps ``X`` integer
        (float ``X`` must hold integers, and the ids must index the network's first
        ``nn.Embedding``, else a ValueError); otherwise ``X`` is cast to float32.
    criterion : str or type of torch.nn.Module or torch.nn.Module, default="ce"
        A loss name from :mod:`sklearn_calib.losses`, a class, or an instance (copied at
        each fresh fit); ``forward(logits, target)`` returns the mean loss.
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
        optimiser is used, else the optimiser's default: 3e-3 for AdamW and Adam, 0.1 for
        SGD, 1e-3 for another class (``benchmarks/RESULTS.md`` records the sweep that
        chose them).
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
    recipe : {"wang2021", "mukhoti2020", "onecycle"}, Recipe or None, default=None
        Optimiser and learning-rate preset. "wang2021": the recipe of Wang et al. (2021),
        SGD (momentum 0.9, weight decay 1e-4, lr 0.1), lr x0.1 at 50 % and 75 % of
        ``max_epochs``. "mukhoti2020": the recipe of Mukhoti et al. (2020) and the papers
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
        per-sample loss). The reference pairing of Mukhoti et al.'s code is
        ``loss_reduction="sum", grad_clip=2.0``. The
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
        ``warm_start``, the classes and the training data), replaced atomically. Calling
        ``fit`` again with the same parameters and data after the process died loads it
        (weights, optimiser state, history, random-generator states) and trains the
        remaining epochs only, reaching the same weights as an uninterrupted fit on the
        same device (bit for bit on the CPU). A finished fit's checkpoint is kept, so
        fitting it again trains nothing, except with ``random_state=None`` (an unseeded
        fit trains anew over a finished checkpoint, and resumes an unfinished one). A
        truncated, corrupt or foreign file is ignored with a ``CheckpointWarning``. An
        epoch that a callback ends is saved too: a stop by skorch's EarlyStopping marks
        the fit finished for fits with an EarlyStopping callback (a ``UserWarning`` says
        that it trains nothing; a fit without one trains the remaining epochs); an error
        or another ``KeyboardInterrupt`` (a Ctrl-C) leaves it to be resumed; the
        callbacks' own state is not saved. ``partial_fit`` and ``warm_start``
        continuations do not checkpoint.
    use_caching : False, default=False
        The scoring cache of skorch, off (the only accepted value): the engine does not feed
        skorch's per-batch cache, so every ``EpochScoring`` scores the whole
        ``dataset_valid`` (or ``dataset_train`` with ``on_train=True``) with
        :meth:`predict` at the end of each epoch, whatever its own ``use_caching``, and
        does not slow the training steps. skorch's default (``"auto"``, the callbacks'
        ``use_caching=True``) would score cached class indices against labels.
    **kwargs
        The other parameters of skorch (``predict_nonlinearity``, ``iterator_valid__batch_size``,
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
    arrays, not torch objects, so it works with pickle, joblib and skops
    (:mod:`sklearn_calib.persistence`); loading rebuilds the parts with
    :meth:`initialize_module`, :meth:`initialize_criterion` and
    :meth:`initialize_optimizer` under the parameters they were fitted with. A model
    loads on the device it was fitted on when that device exists, otherwise on the CPU
    (a ``DeviceWarning`` when ``device`` named CUDA explicitly).

    Training: ``fit``, ``partial_fit`` and skorch's ``fit_loop`` each make one training
    run with skorch's protocol (``on_train_begin``; per epoch ``on_epoch_begin``,
    :meth:`run_single_epoch` over :meth:`get_iterator`'s batches of
    :meth:`get_split_datasets`'s training part with :meth:`train_step`, then of the
    validation part with :meth:`validation_step`, ``on_epoch_end``; ``on_train_end``),
    the recipe's schedule, augmentation, mixup, the seeded generators, the non-finite
    guard and, for a fresh ``fit``, the checkpoint. The run is passed to these hooks as
    ``run``; without one (outside ``fit``) they work as in skorch: shuffling with
    torch's global generator, skorch's per-batch protocol, the steps setting the
    training or evaluation mode. The schedule, guard and checkpoint belong to the run,
    not to skorch callbacks: a per-batch callback would cost a host synchronisation per
    batch and stop the CUDA graph replay. Subclasses change training through
    :meth:`train_step_single` (forward, loss and backward of a batch) or
    :meth:`train_step` (the whole update), which receive ``(X_batch, target)`` on the
    device (``target`` a class-index tensor, a :class:`WeightedTarget` or a
    :class:`MixedTarget`) and the run. Set ``train_step_capturable = True`` on a
    subclass whose step may be captured in a CUDA graph (no host synchronisation, no
    data-dependent Python control flow); otherwise it runs eagerly.

    Parameters set with :meth:`set_params` are only stored; the next training call
    applies them. A continued one (``partial_fit``, ``fit`` with ``warm_start=True``,
    ``fit_loop``) compares them with the parameters the fitted parts were built from
    (``built_params_``): a new network (``module``, ``module__*``, a name in
    ``fresh_fit_params``) or optimiser class (or parameter-group patterns) makes it a
    fresh fit; a new ``criterion``/``criterion__*`` rebuilds the loss; new ``lr`` or
    ``optimizer__*`` values are written into the optimiser, keeping its state (a new
    learning rate also becomes the base of the recipe's schedule); new
    ``callbacks``/``callbacks__*`` re-initialise the callbacks.

    A network given as a class or instance is checked at fit, before training: its
    first layer's input width (a ``Linear``'s ``in_features``, a convolution's
    ``in_channels``) must match ``X``, it must return one row of scores per sample and
    its output width must be the number of classes, else a ValueError names the numbers.

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

    #: Parameters besides ``module`` and ``module__*`` whose change makes a continued fit
    #: a fresh one (they shape the network or a part built with it).
    fresh_fit_params = ()

    _parameter_constraints = {
        "max_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "train_split": [Interval(numbers.Real, 0, 1, closed="neither"), callable, None],
        "recipe": [StrOptions(set(RECIPES), deprecated=set(RECIPE_ALIASES)), Recipe, None],
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

    #: scikit-learn's repr: the class name and the parameters set to other values than
    #: their defaults (skorch's lists the network instead).
    __repr__ = BaseEstimator.__repr__

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        declare_inherited_parameters(cls)

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
        """Get parameters; a stored ``callbacks__*`` value wins over the built callback's.

        Parameters
        ----------
        deep : bool, default=True
            Whether to include the parameters of the parts (``module__*``, ...).
        **kwargs
            Passed to skorch's ``get_params``.

        Returns
        -------
        params : dict
            Parameter names and values.
        """
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
            The net, its parameters stored.
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

        Returns
        -------
        self : NetClassifier
            The initialised net.
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
        check_network(self)
        with self._current_init_context("criterion"):
            self.initialize_criterion()
        with self._current_init_context("optimizer"):
            self.initialize_optimizer()
        self.initialize_history()
        self._validate_params()
        self.built_params_ = self._param_values()
        self.initialized_ = True
        return self

    def initialize_module(self):
        """Build the network on ``device_`` (``input_shape`` and ``n_classes`` from the data).

        A network instance is copied (with ``module__*`` parameters, its class is built
        with them instead).

        Returns
        -------
        self : NetClassifier
            The net, with ``module_``.
        """
        module, kwargs = self.module, self.get_params_for("module")
        if isinstance(module, nn.Module):
            network = type(module)(**kwargs) if kwargs else copy.deepcopy(module)
        else:
            network = resolve_network(module)
            inferred = {"input_shape": self.input_shape_, "n_classes": len(self.classes_)}
            signature = inspect.signature(network.__init__).parameters
            takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.values())
            inferred = {k: v for k, v in inferred.items() if takes_any or k in signature}
            network = network(**inferred, **kwargs)
        self.module_ = network.to(self.device_)
        return self

    def initialize_criterion(self):
        """Build the loss from its name, class or instance (copied) and ``criterion__*``.

        Returns
        -------
        self : NetClassifier
            The net, with ``criterion_``.
        """
        criterion, kwargs = self.criterion, self.get_params_for("criterion")
        if isinstance(criterion, nn.Module):
            loss = type(criterion)(**kwargs) if kwargs else copy.deepcopy(criterion)
        else:
            loss = resolve_loss(criterion)(**kwargs)
        self.criterion_ = loss.to(self.device_)
        return self

    def initialize_optimizer(self, triggered_directly=None):
        """Build the optimiser (see ``optimizer``); its settings are checked first.

        Parameters
        ----------
        triggered_directly : None
            Unused; skorch's signature.

        Returns
        -------
        self : NetClassifier
            The net, with ``optimizer_``.
        """
        settings = OptimizerSettings.from_params(self._param_values())
        self.optimizer_ = settings.build(self.get_all_learnable_params(), self.device_)
        return self

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
        files = {"module_": f_params, "optimizer_": f_optimizer, "criterion_": f_criterion}
        for key, file in kwargs.items():
            if not key.startswith("f_"):
                raise TypeError(f"load_params got an unexpected argument {key!r}.")
            files[key[2:] + "_"] = file
        states, history = saved_params(files, f_history)
        if history is not None:
            self.history_ = history
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
            The fitted net.
        """
        fresh = not (self.warm_start and self.__sklearn_is_fitted__())
        return self._fit(X, y, sample_weight, classes=None, epochs=None, fresh=fresh)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Train the fitted network for ``max_epochs`` more epochs (or fit it if unfitted).

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Inputs, as in :meth:`fit`.
        y : array-like of shape (n_samples,)
            Class labels, as in :meth:`fit`.
        classes : array-like of shape (n_classes,) or None, default=None
            All class labels, for the first call when ``y`` may lack some.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            As in :meth:`fit`.

        Returns
        -------
        self : NetClassifier
            The fitted net.
        """
        return self._fit(X, y, sample_weight, classes=classes, epochs=None, fresh=False)

    def fit_loop(self, X, y=None, epochs=None, sample_weight=None):
        """Train the fitted network for ``epochs`` more epochs: :meth:`partial_fit`'s run.

        skorch's training loop is this class's one training run (the recipe's schedule
        over these ``epochs``, the seeded generators, the non-finite guard, the
        callbacks). An unfitted net is fitted first.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Inputs, as in :meth:`fit`.
        y : array-like of shape (n_samples,)
            Class labels, as in :meth:`fit`.
        epochs : int or None, default=None
            None: ``max_epochs``.
        sample_weight : array-like of shape (n_samples,) or None, default=None
            As in :meth:`fit`.

        Returns
        -------
        self : NetClassifier
            The fitted net.
        """
        return self._fit(X, y, sample_weight, classes=None, epochs=epochs, fresh=False)

    def __sklearn_is_fitted__(self):
        return (
            bool(self.initialized_)
            and hasattr(self, "input_shape_")
            and super().__sklearn_is_fitted__()
        )

    def _fit(self, X, y, sample_weight, classes, epochs, fresh):
        """Validate the data, build or update the net's parts and make one training run."""
        self._check_params()
        if epochs is not None and not (isinstance(epochs, numbers.Integral) and epochs >= 1):
            raise ValueError(f"Expected `epochs` to be an integer >= 1 or None, got {epochs!r}.")
        fresh = fresh or not continuable(self)
        with transaction(self) as components:
            data = training_data(self, X, y, sample_weight, classes, reset=fresh)
            if fresh:
                self.device_ = resolve_device(self.device)
            checkpoint = None
            if fresh and epochs is None and self.checkpoint_dir is not None:
                checkpoint = FitCheckpoint.for_fit(self, data.X, data.y_index)
            self.checkpoint_path_ = checkpoint.path if checkpoint is not None else None
            epochs = epochs or self.max_epochs
            start, length = (0, epochs) if fresh else (len(self.history), epochs)
            with torch.random.fork_rng(devices=cuda_devices(self.device_), device_type="cuda"):
                if fresh:  # torch's global generator after the weights starts rng_state_
                    seeds = fit_seeds(self.random_state)
                    seed_torch(self.device_, seeds[0])
                    self.initialize()
                    self.rng_state_ = RunGenerators.from_seeds(self.device_, seeds).state(
                        self.device_
                    )
                    remaining = checkpoint.resume(self) if checkpoint is not None else None
                    epochs = epochs if remaining is None else remaining
                generators = RunGenerators.from_state(
                    self.rng_state_, self.device_, self.random_state
                )
                if not fresh:
                    components.take()  # the run changes the fitted parts in place
                    self.built_params_ = update_parts(self)
                if takes_token_ids(self.module):
                    check_token_ids(self.module_, data.X)
                if data.weight is not None:
                    check_weighted_criterion(self.criterion_)
                TrainingRun(self, data, generators, start, length, checkpoint).train(epochs)
        return self

    # ------------------------------------------------------------------ the run's hooks

    def notify(self, method_name, run=None, **cb_kwargs):
        """Call the net's own handler of a skorch notification, then the callbacks'.

        In a training run, the net's handler (``on_train_begin``, ``on_epoch_end``, ...)
        also receives the run as ``run``; the callbacks receive skorch's arguments only.

        Parameters
        ----------
        method_name : str
            ``"on_train_begin"``, ``"on_epoch_begin"``, ``"on_batch_end"``, ...
        run : TrainingRun or None, default=None
            The training run, handed to the net's own handler.
        **cb_kwargs
            The notification's arguments.
        """
        own = cb_kwargs if run is None else {**cb_kwargs, "run": run}
        getattr(self, method_name)(self, **own)
        for _, callback in self.callbacks_:
            getattr(callback, method_name)(self, **cb_kwargs)

    def get_split_datasets(self, X, y=None, split_seed=None, run=None, **fit_params):
        """Return the training and validation parts of the data (skorch's hook).

        Parameters
        ----------
        X : FitDataset or array-like of shape (n_samples, ...)
            A training run's data, or data validated as :meth:`partial_fit`'s (the net
            must be fitted).
        y : array-like of shape (n_samples,) or None, default=None
            The labels, for array-like ``X``.
        split_seed : int or None, default=None
            Seed of a fractional ``train_split``; None: a fresh fit's, from ``random_state``.
        run : TrainingRun or None, default=None
            The training run, to which a subclass hands what else it holds out
            (``run.held_out``; unused here).
        **fit_params
            Passed to a callable ``train_split``.

        Returns
        -------
        dataset_train, dataset_valid : FitDataset
            The two parts; ``dataset_valid`` is None without a split.
        """
        data = split_input(self, X, y)
        if self.train_split is None:
            return data, None
        split = self.train_split
        if isinstance(split, numbers.Real):
            seed = resolve_split_seed(self.random_state, split_seed)
            split = ValidSplit(float(split), stratified=True, random_state=seed)
        dataset_train, dataset_valid = split(data, data.y, **fit_params)
        if dataset_valid is not None:
            dataset_valid = as_fit_dataset(self, dataset_valid, data)
        return as_fit_dataset(self, dataset_train, data), dataset_valid

    def get_iterator(self, dataset, training=False, run=None):
        """Return the batches of ``dataset``, on the device for the net's own datasets.

        Training batches are cut from device tensors in a new random order each
        iteration (the run's seeded generator; outside a run, one seeded from torch's
        global generator) and augmented and mixed as the parameters say; validation
        batches follow the sample order. Other datasets use skorch's iterator for
        evaluation (prediction on a torch Dataset) and are validated as ``X`` for
        training.

        Parameters
        ----------
        dataset : torch Dataset
            The data.
        training : bool, default=False
            Whether the batches are for training.
        run : TrainingRun or None, default=None
            The training run, whose generators order the training batches.

        Returns
        -------
        iterator : iterable of batches ``(X, target)``
            The batches.
        """
        if not isinstance(dataset, FitDataset):
            if not training:
                return super().get_iterator(dataset, training=False)
            dataset = as_fit_dataset(self, dataset, None)
        source = dataset.batch_source(self.device_)
        channels_last = self.device_.type == "cuda" and source.X.ndim == 4
        if not training:
            return EvaluationBatches(source, self.inference_batch_size(), channels_last)
        generators = run.generators if run is not None else RunGenerators.from_global(self.device_)
        return TrainingBatches(
            source, self.batch_size, generators, self.augment, self.mixup_alpha, channels_last
        )

    def run_single_epoch(self, iterator, training, prefix, step_fn, run=None, **fit_params):
        """One pass of ``step_fn`` over the batches of ``iterator`` (skorch's hook).

        In a training run, the run's pass: on the device, with the batches' history
        entries (``{prefix}_loss``, ``{prefix}_batch_size``, ``valid_acc``) written at its
        end, unless the net or a callback does per-batch work. Then, and outside a run,
        skorch's per-batch protocol, with one host synchronisation per step.

        Parameters
        ----------
        iterator : iterable of batches or None
            None: nothing to do.
        training : bool
            Whether the pass trains.
        prefix : {"train", "valid"}
            Prefix of the history entries.
        step_fn : callable
            ``step_fn(batch, **fit_params) -> {"loss", "y_pred"}``: :meth:`train_step` or
            :meth:`validation_step`.
        run : TrainingRun or None, default=None
            The training run; None (outside a run) steps batch by batch.
        **fit_params
            Passed to ``step_fn``.
        """
        if iterator is None:
            return
        self._set_training(training)
        with torch.inference_mode(not training):
            if run is None:
                per_batch_pass(self, iterator, training, prefix, step_fn, **fit_params)
            else:
                run.run_pass(iterator, training, prefix, step_fn, **fit_params)

    # ------------------------------------------------------------------ the steps

    def train_step_is_capturable(self, run=None):
        """Whether :meth:`train_step` may be captured in a CUDA graph in ``run``.

        ``train_step_capturable`` decides; when it is None, only NetClassifier's own
        steps are capturable.

        Parameters
        ----------
        run : TrainingRun or None, default=None
            The training run (unused here; subclasses may need it).

        Returns
        -------
        capturable : bool
            Whether the step may be captured.
        """
        cls = type(self)
        if cls.train_step_capturable is None:
            return (
                cls.train_step is NetClassifier.train_step
                and cls.train_step_single is NetClassifier.train_step_single
            )
        return bool(cls.train_step_capturable)

    def train_step(self, batch, run=None, **fit_params):
        """Make one optimisation step on ``batch``: the update of skorch's ``train_step``.

        Zeroes the gradients, computes them with :meth:`train_step_single`, notifies
        ``on_grad_computed`` (in a run, only if the net or a callback works per batch),
        clips the gradient norm if asked and steps the optimiser. On CUDA it is captured
        in a CUDA graph and replayed, so it must not synchronise with the host.

        Parameters
        ----------
        batch : tuple of (torch.Tensor, target)
            Inputs and targets on ``device_`` (a class-index tensor, a
            :class:`WeightedTarget` or a :class:`MixedTarget`).
        run : TrainingRun or None, default=None
            The training run; None (outside a run) sets the network's training mode.
        **fit_params
            Passed to :meth:`train_step_single`.

        Returns
        -------
        step : dict
            ``"loss"``: the detached 0-dim per-sample (weighted) mean loss; ``"y_pred"``:
            the logits.
        """
        if run is None:
            self._set_training(True)
        self.optimizer_.zero_grad(set_to_none=True)
        step = self.train_step_single(batch, run=run, **fit_params)
        if run is None or run.live:
            notify_grad_computed(self, batch)
        if self.grad_clip is not None:
            parameters = [p for _, p in self.get_all_learnable_params()]
            clip_gradient_norm(parameters, self.grad_clip)
        self.optimizer_.step()
        return step

    def train_step_single(self, batch, run=None, **fit_params):
        """Compute the loss of ``batch`` and its gradients (forward under autocast, backward).

        Parameters
        ----------
        batch : tuple of (torch.Tensor, target)
            As in :meth:`train_step`.
        run : TrainingRun or None, default=None
            The training run (unused here; subclasses may need it).
        **fit_params
            Unused; skorch's signature.

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

    def validation_step(self, batch, run=None, **fit_params):
        """Return the loss and logits of a validation batch (evaluation mode, no gradient).

        Parameters
        ----------
        batch : tuple of (torch.Tensor, target)
            As in :meth:`train_step`.
        run : TrainingRun or None, default=None
            The training run; None (outside a run) sets the network's evaluation mode.
        **fit_params
            Unused; skorch's signature.

        Returns
        -------
        step : dict
            ``"loss"``: the per-sample (weighted) mean loss; ``"y_pred"``: the logits.
        """
        if run is None:
            self._set_training(False)
        X, target = batch
        with torch.no_grad():
            y_pred = self.forward_logits(X)
            return {"loss": self.get_loss(y_pred, target, X=X, training=False), "y_pred": y_pred}

    def get_loss(self, y_pred, y_true, X=None, training=False, **criterion_kwargs):
        """Return the criterion's loss of a batch, weighted and mixed as its target says.

        A :class:`WeightedTarget` passes its weights to the criterion as
        ``sample_weight``; a :class:`MixedTarget` gives ``lam * L(z, y_a) + (1 - lam) *
        L(z, y_b)``. With ``loss_reduction="sum"`` the training loss is multiplied by the
        batch size (the sum of the weights).

        Parameters
        ----------
        y_pred : torch.Tensor of shape (n_samples, n_classes)
            The logits.
        y_true : torch.Tensor, WeightedTarget or MixedTarget
            The targets.
        X : torch.Tensor, default=None
            The inputs (unused here; skorch's signature).
        training : bool, default=False
            Whether the loss is a training step's.
        **criterion_kwargs
            Passed to the criterion (a per-sample ``gamma``).

        Returns
        -------
        loss : torch.Tensor
            The 0-dim loss.
        """
        if not isinstance(y_true, (torch.Tensor, MixedTarget, WeightedTarget)):
            y_true = to_tensor(y_true, device=self.device_)
        loss = target_loss(self.criterion_, y_pred, y_true, **criterion_kwargs)
        if training and self.loss_reduction == "sum":
            loss = loss * total_weight(y_true)
        return loss

    # ------------------------------------------------------------------ inference

    def forward_logits(self, X):
        """Return the float32 logits of a batch on the device (autocast as in training).

        Parameters
        ----------
        X : torch.Tensor
            A batch of inputs on ``device_``.

        Returns
        -------
        logits : torch.Tensor of shape (n_samples, n_classes)
            The logits, float32.
        """
        with autocast(autocast_dtype(self.precision, self.device_), self.device_):
            out = self.module_(X)
        if isinstance(out, tuple):
            out = out[0]
        return out.float()

    def infer(self, x, run=None, **fit_params):
        """Run the network on a batch (skorch's hook behind ``forward``, on ``device_``).

        A float tensor or array is cast to the network's floating dtype (float32 unless
        its parameters are another); token ids are checked as in :meth:`predict`. The
        other ``fit_params`` go to the network; ``run`` (which a step written for skorch
        passes on with its own ``fit_params``) does not.

        Parameters
        ----------
        x : torch.Tensor, array-like or dict
            A batch of inputs.
        run : TrainingRun or None, default=None
            The training run (not passed to the network).
        **fit_params
            Passed to the network.

        Returns
        -------
        output : torch.Tensor
            The network's output.
        """
        x = to_tensor(x, device=self.device_)
        if isinstance(x, torch.Tensor):
            if takes_token_ids(self.module):
                x = model_input(self, x)
            elif x.is_floating_point():
                parameter = next(self.module_.parameters(), None)
                dtype = parameter.dtype if parameter is not None else torch.float32
                x = x.to(dtype if dtype.is_floating_point else torch.float32)
        return self.module_(x, **fit_params)

    def inference_batch_size(self):
        """Return the batch size of validation and prediction.

        Returns
        -------
        batch_size : int
            ``iterator_valid__batch_size`` if positive, else ``batch_size``.
        """
        size = self.get_params_for("iterator_valid").get("batch_size", self.batch_size)
        return size if size > 0 else self.batch_size

    def _logits(self, X):
        """Validate ``X`` and return its float32 logits on the device."""
        return evaluate(self, X, self.forward_logits)

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
            Inputs, as in :meth:`fit`.
            A torch Dataset (skorch's ``Dataset``, a ``Subset``) is batched by skorch's
            ``iterator_valid``; its targets are ignored.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), dtype float32
            Columns follow ``classes_``.
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
            Inputs, as in :meth:`fit`.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes) or (n_samples,), dtype float32
            The logits, or their difference for two classes.
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
            Inputs, as in :meth:`fit`.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        index = self._logits(X).argmax(1).cpu().numpy()
        return self.classes_[index]

    # ------------------------------------------------------------------ persistence

    def __getstate__(self):
        """Return the state with torch objects replaced by numpy arrays (see the Notes)."""
        components = {name: getattr(self, name) for name in component_names(self)}
        return net_state(self.__dict__, components)

    def __setstate__(self, state):
        """Rebuild the net from a state of :meth:`__getstate__` on an available device."""
        attributes, components = loaded_state(state, type(self), NetClassifier)
        self.__dict__.update(attributes)
        if not attributes.get("initialized_"):
            return
        fitted, requested = attributes.get("device_"), self.device
        self.device_ = loading_device(type(self).__name__, requested, fitted)
        moved = self.device_.type == "cpu" and torch.device(fitted or "cpu").type != "cpu"
        if moved and not (isinstance(requested, str) and requested == "auto"):
            self.device = "cpu"
        self.init_context_ = None
        left_out = [
            name
            for name in self.cuda_dependent_attributes_
            if name in attributes and attributes[name] is None
        ]
        with torch.random.fork_rng(devices=[]):  # initial weights, replaced just below
            self._build_fitted_parts()
        for name in left_out:
            setattr(self, name, None)
        restore_components(self, components)

    def _build_fitted_parts(self):
        """Build the parts of a net being loaded as they were fitted.

        The network, loss and optimiser (and any component a subclass builds in these
        hooks) come from :meth:`initialize_module`, :meth:`initialize_criterion` and
        :meth:`initialize_optimizer` under ``built_params_``, the callbacks from the
        current parameters.
        """
        self._initialize_callbacks()
        current = self._param_values()
        for name in current:
            del self.__dict__[name]
        self.__dict__.update(self.built_params_)
        try:
            for name in ("module", "criterion", "optimizer"):
                with self._current_init_context(name):
                    getattr(self, f"initialize_{name}")()
        finally:
            for name in self.built_params_:
                self.__dict__.pop(name, None)
            self.__dict__.update(current)
        callbacks = {k: v for k, v in current.items() if k.split("__")[0] == "callbacks"}
        self.built_params_ = {**self.built_params_, **callbacks}


declare_inherited_parameters(NetClassifier)

__all__ = ["NetClassifier"]
