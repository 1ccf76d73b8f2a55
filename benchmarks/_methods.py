"""The training methods of the experiments: a loss (or a meta-learned regulariser) and family.

A :class:`Method` names what distinguishes one trained model from another within a
family; experiments that list the same method share its trained runs (the store key is
the same). The catalogue below follows the seeds' tables and SPEC §2:

- seed 001's grids: label smoothing epsilon in {0.01, 0.03, 0.05, 0.07, 0.09}, L1 logit norm
  alpha in {0.001, 0.005, 0.01, 0.05, 0.1}, focal gamma in {1, 3, 5, 7, 9}; seed 001's focal
  loss is ``focal_gra`` (weight detached, mean reduction). Seed 000's entropy
  regularisation has no grid in the paper; it gets the alpha grid of seed 001.
- seeds 002-004 differentiate the focal weight (``focal``, ``flsd53``, ``dual_focal``,
  ``bsce``); their "-GRA" variants detach it.
"""

from dataclasses import dataclass, field

#: The coefficient grids of seed 001 (SPEC §5), by loss name: (parameter, values, symbol).
SEED001_GRIDS = {
    "label_smoothing": ("epsilon", (0.01, 0.03, 0.05, 0.07, 0.09), "ε"),
    "lp_norm": ("alpha", (0.001, 0.005, 0.01, 0.05, 0.1), "α"),
    "entropy_reg": ("alpha", (0.001, 0.005, 0.01, 0.05, 0.1), "α"),
    "focal_gra": ("gamma", (1, 3, 5, 7, 9), "γ"),
}

#: Short names of the regularised losses in seed 001's tables.
GROUP_NAMES = {
    "ce": "CE",
    "label_smoothing": "LS",
    "lp_norm": "L1",
    "entropy_reg": "ER",
    "focal_gra": "Focal",
    "inverse_focal": "InvFocal",
}


@dataclass(frozen=True)
class Method:
    """One way of training a model.

    Parameters
    ----------
    label : str
        Name in tables and figures ("LS ε=0.05").
    family : str
        "seed001" or "seed002" (see :mod:`benchmarks._presets`).
    loss : str
        Loss name of :data:`sklearn_calib.losses.LOSSES`.
    params : tuple of (str, value)
        Loss hyperparameters.
    group : str
        Methods of one coefficient sweep share a group ("LS").
    coefficient : float or None
        Value of the swept coefficient.
    reduction : str or None
        Overrides the family's loss reduction (Brier keeps the mean).
    mixup_alpha : float
    estimator : {"net", "meta"}
        ``NetClassifier`` or ``MetaNetClassifier``.
    estimator_params : tuple of (str, value)
        Extra estimator parameters (``regularizer``, ``meta_loss``).
    """

    label: str
    family: str
    loss: str
    params: tuple = ()
    group: str = ""
    coefficient: float | None = None
    reduction: str | None = None
    mixup_alpha: float = 0.0
    estimator: str = "net"
    estimator_params: tuple = field(default=())

    @property
    def loss_params(self):
        return dict(self.params)


def ce(family):
    """Cross-entropy."""
    return Method("CE", family, "ce", group="CE")


def seed001_grid(loss):
    """The methods of one coefficient sweep of seed 001 (family seed001)."""
    name, values, symbol = SEED001_GRIDS[loss]
    group = GROUP_NAMES[loss]
    return [
        Method(f"{group} {symbol}={v:g}", "seed001", loss, ((name, v),), group, v) for v in values
    ]


def regularizer_methods():
    """CE and the four regularised losses over seed 001's grids (seeds 000/001 Table 1)."""
    methods = [ce("seed001")]
    for loss in SEED001_GRIDS:
        methods += seed001_grid(loss)
    return methods


def focal_gra(gamma):
    """Seed 001's focal loss (weight detached, family seed001)."""
    return Method(f"Focal γ={gamma:g}", "seed001", "focal_gra", (("gamma", gamma),), "Focal", gamma)


def inverse_focal(gamma):
    """Seed 001's inverse focal loss, weight detached as in its focal loss."""
    return Method(
        f"InvFocal γ={gamma:g}",
        "seed001",
        "inverse_focal",
        (("gamma", gamma), ("detach_weight", True)),
        "InvFocal",
        gamma,
    )


# Seeds 002-004 (family seed002).
CE_B = ce("seed002")
BRIER = Method("Brier", "seed002", "brier", group="Brier", reduction="mean")
MMCE = Method("MMCE", "seed002", "mmce", (("lam", 2.0),), "MMCE")
LS_005 = Method("LS-0.05", "seed002", "label_smoothing", (("epsilon", 0.05),), "LS", 0.05)
LS_01 = Method("LS-0.1", "seed002", "label_smoothing", (("epsilon", 0.1),), "LS", 0.1)
FOCAL_3 = Method("Focal γ=3", "seed002", "focal", (("gamma", 3.0),), "Focal", 3.0)
FOCAL_1 = Method("Focal γ=1", "seed002", "focal", (("gamma", 1.0),), "Focal", 1.0)
FLSD53 = Method("FLSD-53", "seed002", "flsd53", group="FLSD-53")
FLSD53_GRA = Method("FLSD-53-GRA", "seed002", "flsd53_gra", group="FLSD-53")
DUAL_FOCAL = Method("DFL", "seed002", "dual_focal", (("gamma", 5.0),), "DFL")
DUAL_FOCAL_GRA = Method("DFL-GRA", "seed002", "dual_focal_gra", (("gamma", 5.0),), "DFL")
BSCE = Method("BSCE", "seed002", "bsce", group="BSCE")
BSCE_GRA = Method("BSCE-GRA", "seed002", "bsce_gra", group="BSCE")
MIXUP = Method("Mixup α=1", "seed002", "ce", group="Mixup", mixup_alpha=1.0)


def meta(label, regularizer, meta_loss):
    """A meta-learned method of seed 003 (``MetaNetClassifier``, issue 6).

    The estimator picks its own loss (focal loss with a per-sample gamma for "gamma_net",
    cross-entropy for "l2") and holds out 10 % of the training data as its
    meta-validation part; ``train_split=None`` leaves it no second (history-only)
    validation part, since the experiments do no model selection.
    """
    loss = "focal" if regularizer == "gamma_net" else "ce"
    return Method(
        label,
        "seed002",
        loss,
        group="meta",
        estimator="meta",
        estimator_params=(
            ("meta_loss", meta_loss),
            ("regularizer", regularizer),
            ("train_split", None),
        ),
    )


CE_DECE = meta("CE-DECE", "l2", "dece")
CE_SECE = meta("CE-SECE", "l2", "sece")
FLG_DECE = meta("FLγ-DECE", "gamma_net", "dece")
FLG_SECE = meta("FLγ-SECE", "gamma_net", "sece")
