"""EG-QP: exponentiated gradient for QPs over a product of simplices (Bartlett et al. 2004,
Figure 3)."""

import numpy as np
from scipy.special import logsumexp


def eg_qp(A, b, groups, alpha0=None, eta=1.0, n_iter=100):
    """Minimise ``Q(a) = b . a + 1/2 a^T A a`` with every group of ``a`` on a simplex.

    Each step multiplies ``a`` by ``exp(-eta * grad Q(a))`` and renormalises every group
    (the updates are carried in log space, so entries never underflow to zero).

    Parameters
    ----------
    A : ndarray of shape (m, m)
        Symmetric positive semi-definite matrix.
    b : ndarray of shape (m,)
    groups : ndarray of shape (m,)
        Group (simplex) index of every variable, ``0 .. n_groups - 1``.
    alpha0 : ndarray of shape (m,), default=None
        Starting point in the interior of the product of simplices (default: uniform).
    eta : float, default=1.0
        Learning rate.
    n_iter : int, default=100

    Returns
    -------
    alpha : ndarray of shape (m,)
    values : ndarray of shape (n_iter + 1,)
        ``Q`` at every iterate, the start included.
    """
    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    groups = np.asarray(groups, dtype=np.intp)
    n_groups = int(groups.max()) + 1
    counts = np.bincount(groups, minlength=n_groups)
    if np.any(counts == 0):
        raise ValueError("Every group index from 0 to max(groups) must be used.")
    if alpha0 is None:
        log_alpha = -np.log(counts[groups].astype(np.float64))
    else:
        alpha0 = np.asarray(alpha0, dtype=np.float64)
        if np.any(alpha0 <= 0):
            raise ValueError("alpha0 must lie in the interior of the simplices (all > 0).")
        log_alpha = np.log(alpha0)
    order = np.argsort(groups, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(counts)])

    def normalise(log_a):
        sorted_log = log_a[order]
        norms = np.array([logsumexp(sorted_log[lo:hi]) for lo, hi in zip(bounds[:-1],
                                                                          bounds[1:])])
        return log_a - norms[groups]

    log_alpha = normalise(log_alpha)
    alpha = np.exp(log_alpha)
    values = [b @ alpha + 0.5 * alpha @ A @ alpha]
    for _ in range(n_iter):
        gradient = b + A @ alpha
        log_alpha = normalise(log_alpha - eta * gradient)
        alpha = np.exp(log_alpha)
        values.append(b @ alpha + 0.5 * alpha @ A @ alpha)
    return alpha, np.array(values)
