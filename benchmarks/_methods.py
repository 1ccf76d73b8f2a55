"""The training methods of the experiments: a loss (or a meta-learned regulariser) and family.

A :class:`Method` names what distinguishes one trained model from another within a
family; experiments that list the same method share its trained runs (the store key is
the same). The catalogue below follows the papers' tables:

- Wang et al. (2021)'s grids: label smoothing epsilon in {0.01, 0.03, 0.05, 0.07, 0.09}, L1
  logit norm alpha in {0.001, 0.005, 0.01, 0.05, 0.1}, focal gamma in {1, 3, 5, 7, 9}; their
  focal loss is ``focal_gra`` (weight detached, mean reduction). The entropy
  regularisation of the CIFAR-10 loss study has no grid there; it gets Wang et al.'s alpha
  grid.
- Mukhoti et al. (2020), the Meta-Regularization submission and Lin et al. (2025)
  differentiate the focal weight (``focal``, ``flsd53``, ``dual_focal``, ``bsce``); the
  "-GRA" variants of Lin et al. detach it. BSCE-GRA comes over a grid of (beta, gamma),
  chosen on validation as Lin et al. tune it.
"""

from dataclasses import dataclass, field

#: The coefficient grids of Wang et al. (2021), by loss name: (parameter, values, symbol).
WANG2021_GRIDS = {
    "label_smoothing": ("epsilon", (0.01, 0.03, 0.05, 0.07, 0.09), "ε"),
    "lp_norm": ("alpha", (0.001, 0.005, 0.01, 0.05, 0.1), "α"),
    "entropy_reg": ("alpha", (0.001, 0.005, 0.01, 0.05, 0.1), "α"),
    "focal_gra": ("gamma", (1, 3, 5, 7, 9), "γ"),
}

#: Short names of the regularised losses in Wang et al. (2021)'s tables.
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
        "wang2021" or "mukhoti2020" (see :mod:`benchmarks._presets`).
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


def wang2021_grid(loss):
    """The methods of one coefficient sweep of Wang et al. (2021) (family ``wang2021``)."""
    name, values, symbol = WANG2021_GRIDS[loss]
    group = GROUP_NAMES[loss]
    return [
        Method(f"{group} {symbol}={v:g}", "wang2021", loss, ((name, v),), group, v) for v in values
    ]


def regularizer_methods():
    """CE and the four regularised losses over Wang et al. (2021)'s grids (their Table 1)."""
    methods = [ce("wang2021")]
    for loss in WANG2021_GRIDS:
        methods += wang2021_grid(loss)
    return methods


def focal_gra(gamma):
    """Wang et al. (2021)'s focal loss (weight detached, family ``wang2021``)."""
    label = f"Focal γ={gamma:g}"
    return Method(label, "wang2021", "focal_gra", (("gamma", gamma),), "Focal", gamma)


def inverse_focal(gamma):
    """Wang et al. (2021)'s inverse focal loss, weight detached as in their focal loss."""
    return Method(
        f"InvFocal γ={gamma:g}",
        "wang2021",
        "inverse_focal",
        (("gamma", gamma), ("detach_weight", True)),
        "InvFocal",
        gamma,
    )


# Mukhoti et al. (2020), the Meta-Regularization submission, Lin et al. (2025): family mukhoti2020.
CE_B = ce("mukhoti2020")
BRIER = Method("Brier", "mukhoti2020", "brier", group="Brier", reduction="mean")
MMCE = Method("MMCE", "mukhoti2020", "mmce", (("lam", 2.0),), "MMCE")
LS_005 = Method("LS-0.05", "mukhoti2020", "label_smoothing", (("epsilon", 0.05),), "LS", 0.05)
LS_01 = Method("LS-0.1", "mukhoti2020", "label_smoothing", (("epsilon", 0.1),), "LS", 0.1)
FOCAL_3 = Method("Focal γ=3", "mukhoti2020", "focal", (("gamma", 3.0),), "Focal", 3.0)
FOCAL_1 = Method("Focal γ=1", "mukhoti2020", "focal", (("gamma", 1.0),), "Focal", 1.0)
FLSD53 = Method("FLSD-53", "mukhoti2020", "flsd53", group="FLSD-53")
FLSD53_GRA = Method("FLSD-53-GRA", "mukhoti2020", "flsd53_gra", group="FLSD-53")
DUAL_FOCAL = Method("DFL", "mukhoti2020", "dual_focal", (("gamma", 5.0),), "DFL")
DUAL_FOCAL_GRA = Method("DFL-GRA", "mukhoti2020", "dual_focal_gra", (("gamma", 5.0),), "DFL")
BSCE = Method("BSCE", "mukhoti2020", "bsce", group="BSCE")
#: The (beta, gamma) grid of BSCE-GRA, covering Lin et al. (2025)'s Figure 6 (norm orders
#: 1-3, exponents 1-4; their Table 6 finds exponent 4 best of 3-8 on CIFAR-100).
BSCE_GRA_BETAS = (1.0, 2.0, 3.0)
BSCE_GRA_GAMMAS = (1.0, 2.0, 3.0, 4.0)


def bsce_gra(beta, gamma):
    """BSCE-GRA with norm order ``beta`` and exponent ``gamma`` (family mukhoti2020).

    Values at the loss's defaults (1) are left out of its parameters, so that the grid's
    (1, 1) is the run of the loss with its defaults, :data:`BSCE_GRA`.
    """
    params = tuple((name, v) for name, v in (("beta", beta), ("gamma", gamma)) if v != 1.0)
    return Method(
        f"BSCE-GRA β={beta:g}, γ={gamma:g}", "mukhoti2020", "bsce_gra", params, "BSCE-GRA"
    )


BSCE_GRA = bsce_gra(1.0, 1.0)
BSCE_GRA_GRID = [bsce_gra(b, g) for b in BSCE_GRA_BETAS for g in BSCE_GRA_GAMMAS]
MIXUP = Method("Mixup α=1", "mukhoti2020", "ce", group="Mixup", mixup_alpha=1.0)


def meta(label, regularizer, meta_loss, lookahead="bohdal2021"):
    """A meta-learned method of the Meta-Regularization submission (``MetaNetClassifier``).

    The estimator picks its own loss (focal loss with a per-sample gamma for "gamma_net",
    cross-entropy for "l2") and holds out 10 % of the training data as its
    meta-validation part; ``train_split=None`` leaves it no second (history-only)
    validation part, since the experiments do no model selection. The lookahead is
    named in the specification even at its default, so that runs of a former default
    lookahead (whose specifications did not name it) are never reused for it.
    """
    loss = "focal" if regularizer == "gamma_net" else "ce"
    return Method(
        label,
        "mukhoti2020",
        loss,
        group="meta",
        estimator="meta",
        estimator_params=(
            ("lookahead", lookahead),
            ("meta_loss", meta_loss),
            ("regularizer", regularizer),
            ("train_split", None),
        ),
    )


CE_DECE = meta("CE-DECE", "l2", "dece")
CE_SECE = meta("CE-SECE", "l2", "sece")
FLG_DECE = meta("FLγ-DECE", "gamma_net", "dece")
FLG_SECE = meta("FLγ-SECE", "gamma_net", "sece")
#: FLγ-SECE with the whole-network lookahead tuned on a positive control (an extra row of
#: ``meta``, not one of the paper's methods).
FLG_SECE_TUNED = meta("FLγ-SECE (network_tuned)", "gamma_net", "sece", "network_tuned")
