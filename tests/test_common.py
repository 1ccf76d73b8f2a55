"""scikit-learn's estimator checks over the public estimators of sklearn_calib."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_calib.estimators import NetClassifier

# --------------------------------------------------------------------- NetClassifier


def _tiny_net():
    """A NetClassifier small and fast enough for the checks on 2 CPU cores."""
    return NetClassifier(
        module__hidden_units=(16,),
        lr=0.05,
        max_epochs=30,
        batch_size=32,
        random_state=0,
    )


def _net_expected_failures(estimator):
    return {
        "check_no_attributes_set_in_init": (
            "skorch's NeuralNet.__init__ sets history_, initialized_ and virtual_params_."
        ),
    }


@parametrize_with_checks([_tiny_net()], expected_failed_checks=_net_expected_failures)
def test_net_classifier_estimator_checks(estimator, check):
    check(estimator)
