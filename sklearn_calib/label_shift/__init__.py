"""Label-shift adaptation: calibrated probabilities for new class priors, without labels.

When the class balance of the data changes between where a classifier was calibrated (the
source) and where it is used (the target), but each class looks the same, the target's
probabilities are the source's re-weighted by ``q_y / pi_y``: the ratio of target to
source priors. :class:`LabelShiftAdapter` fits a calibrator on labelled source scores,
estimates the target priors from unlabelled target scores (EM, BBSE or RLLS; with
bootstrap intervals and a test of "no shift") and re-weights the calibrated
probabilities; :class:`LabelShiftClassifier` does the same around a classifier, on
features.

EM maximises the target likelihood ``mean_i log sum_k p_k(x_i) q_k / pi_k`` over the
priors ``q`` (Saerens et al. 2002), with Newton steps on the likelihood's curvature and
SQUAREM steps (Varadhan and Roland 2008) where a Newton step would lower it. The
likelihood is concave, and its gradient ``g`` gives the bound ``max_k g_k - 1`` on how far
the current value lies below the maximum (``sum_k q_k g_k = 1``): EM stops when this bound
is at most ``tol`` nats per row. Each step is one pass over the target rows (each row
read once with numba, the ``fast`` extra; else two products of the probabilities with a
vector, block by block; the Dask E-step is a map-reduce over row chunks). More than
65,536 rows start from the optimum of an evenly spaced subsample of 16,384; more than
16,384 take Newton steps with the correlations of 16,384 rows drawn with probabilities
proportional to their share of the curvature (length-squared sampling, in the first pass;
the correlations computed again only when the priors have moved) and the curvature's diagonal
from all rows, no step dividing a prior by more than 10: a few passes over all rows. Dask
target scores start from the subsample's optimum too and continue with SQUAREM.
"""

from ._adapter import LabelShiftAdapter
from ._classifier import LabelShiftClassifier
from ._uncertainty import LabelShiftTestResult

__all__ = ["LabelShiftAdapter", "LabelShiftClassifier", "LabelShiftTestResult"]
