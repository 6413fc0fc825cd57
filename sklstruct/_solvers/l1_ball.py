"""Euclidean projection onto the l1 ball (Duchi, Shalev-Shwartz, Singer and Chandra, 2008)."""

import numpy as np


def project_l1_ball(v, radius):
    """Euclidean projection of ``v`` onto ``{w : ||w||_1 <= radius}``.

    Sorting costs O(d log d). Coordinates whose magnitude is below the soft threshold become
    exact zeros.

    Parameters
    ----------
    v : array-like of shape (d,)
    radius : float

    Returns
    -------
    w : ndarray of shape (d,)
    """
    v = np.asarray(v, dtype=np.float64)
    magnitude = np.abs(v)
    if magnitude.sum() <= radius:
        return v.copy()
    if radius <= 0:
        return np.zeros_like(v)
    ordered = np.sort(magnitude)[::-1]
    cumulative = np.cumsum(ordered) - radius
    index = np.arange(1, ordered.shape[0] + 1)
    rho = np.flatnonzero(ordered - cumulative / index > 0)[-1]
    threshold = cumulative[rho] / (rho + 1.0)
    return np.sign(v) * np.maximum(magnitude - threshold, 0.0)
