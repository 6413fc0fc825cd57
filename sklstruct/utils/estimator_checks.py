"""What scikit-learn's estimator checks cannot expect of an estimator solved to a tolerance."""

from sklearn.utils.validation import has_fit_parameter

from ..base import BaseStructuredClassifier

__all__ = ["expected_failed_checks"]

# at this tol and below, two fits of equivalent data agree to the checks' 1e-7
_EXACT_TOL = 1e-8


def expected_failed_checks(estimator):
    """The checks of :func:`sklearn.utils.estimator_checks.check_estimator` that
    ``estimator`` is expected to fail, with the reason of each.

    Pass the result as ``expected_failed_checks`` to ``check_estimator`` or
    ``parametrize_with_checks``. A fit stops at a certified relative duality gap of ``tol``:
    fits of equivalent data (samples given a weight of 2 or repeated) reach the same
    objective within ``tol`` by different paths, so their predictions agree to about
    ``sqrt(tol)``, not to the ``1e-7`` of ``check_sample_weight_equivalence_*``. With
    ``tol <= 1e-8`` none is listed: those checks then pass when the fits certify that
    ``tol`` within ``max_iter`` (the cutting plane and ``M3NSimplicialDecomposition``'s
    default ``max_points`` do on the checks' data; one-point Frank-Wolfe, ``max_points=1``,
    or ``blocks="single"`` need a larger ``max_iter``, and ``M3NExcessiveGap`` about
    ``max_iter=100000`` with its adaptive smoothing). Every other check is expected to
    pass.

    Parameters
    ----------
    estimator : BaseStructuredClassifier
        An unfitted sklstruct estimator.

    Returns
    -------
    expected : dict of str to str
        Check name -> reason.

    Examples
    --------
    >>> from sklstruct import MultiClass, StructSVMCuttingPlane
    >>> from sklstruct.utils.estimator_checks import expected_failed_checks
    >>> for name in sorted(expected_failed_checks(StructSVMCuttingPlane(MultiClass()))):
    ...     print(name)
    check_sample_weight_equivalence_on_dense_data
    check_sample_weight_equivalence_on_sparse_data
    >>> expected_failed_checks(StructSVMCuttingPlane(MultiClass(), tol=1e-9))
    {}
    """
    if not isinstance(estimator, BaseStructuredClassifier):
        raise TypeError(f"expected a sklstruct estimator, got {type(estimator).__name__}.")
    if not has_fit_parameter(estimator, "sample_weight") or estimator.tol <= _EXACT_TOL:
        return {}
    reason = (f"fits stop at a certified relative duality gap of tol={estimator.tol}: "
              "weighted and repeated samples give the same objective within tol, not "
              "predictions equal to 1e-7 (the check passes with tol <= 1e-8)")
    return {f"check_sample_weight_equivalence_on_{kind}_data": reason
            for kind in ("dense", "sparse")}
