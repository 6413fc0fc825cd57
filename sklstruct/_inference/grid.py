"""Validated entry point to the binary grid min-cut kernel.

A batch of images is given as stacked per-pixel state scores ``unary`` of shape
(n_pixels, 2) and ``offsets`` of shape (n_images + 1,); each image is stored row by row with
``width`` pixels per row (one width, or one per image). The score of a labelling ``ybar``
of one image is

    sum_t unary[t, ybar_t] - sum_t right_cost[t] [ybar_t != ybar_{t+1}]
                           - sum_t down_cost[t] [ybar_t != ybar_{t+width}]

(the neighbour terms exist within the image only). With non-negative costs the maximising
labelling is a minimum cut, computed exactly by :func:`sklstruct._inference._mincut.grid_mincut`.
"""

import numpy as np

from . import _mincut
from ._validation import as_float_array, as_int_array

__all__ = ["grid_map"]


def _check_offsets(offsets, n_pixels):
    offsets = as_int_array(offsets, "offsets").astype(np.int64)
    if offsets.shape[0] < 1 or offsets[0] != 0 or offsets[-1] != n_pixels:
        raise ValueError(f"offsets must start at 0 and end at the number of pixels {n_pixels}.")
    if np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing.")
    return np.ascontiguousarray(offsets)


def check_widths(width, lengths):
    """Per-image widths (int64) from one width or one per image; each divides its length."""
    if np.ndim(width) == 0:
        if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
            raise ValueError(f"width must be a positive integer, got {width!r}.")
        widths = np.full(lengths.shape[0], int(width), dtype=np.int64)
    else:
        widths = as_int_array(width, "width").astype(np.int64)
        if widths.shape != lengths.shape or np.any(widths < 1):
            raise ValueError("width must hold one positive width per image.")
    bad = np.flatnonzero(lengths % widths)
    if bad.size:
        raise ValueError(f"image {bad[0]} has {lengths[bad[0]]} pixels, not a multiple of the "
                         f"grid width {widths[bad[0]]}.")
    return np.ascontiguousarray(widths)


def grid_map(unary, offsets, width, right_cost, down_cost):
    """Maximising binary labelling of every image and the summed minimum-cut values.

    Parameters
    ----------
    unary : array-like of shape (n_pixels, 2)
    offsets : array-like of int, shape (n_images + 1,)
    width : int or array-like of int, shape (n_images,)
        Pixels per grid row (one for all images, or one per image); every image has a whole
        number of rows.
    right_cost, down_cost : array-like of shape (n_pixels,)
        Non-negative disagreement costs with the right and lower neighbour.

    Returns
    -------
    labels : ndarray of int64, shape (n_pixels,)
    cut_value : float
    """
    unary = as_float_array(unary, "unary", 2)
    if unary.shape[1] != 2:
        raise ValueError(f"grid labellings are binary: unary must have 2 columns, got "
                         f"{unary.shape[1]}.")
    offsets = _check_offsets(offsets, unary.shape[0])
    widths = check_widths(width, np.diff(offsets))
    costs = []
    for name, cost in (("right_cost", right_cost), ("down_cost", down_cost)):
        cost = as_float_array(cost, name, 1)
        if cost.shape[0] != unary.shape[0]:
            raise ValueError(f"{name} must have one entry per pixel ({unary.shape[0]}), got "
                             f"{cost.shape[0]}.")
        if np.any(cost < 0):
            raise ValueError(f"{name} must be non-negative (a minimum cut needs submodular "
                             "pairwise terms).")
        costs.append(cost)
    labels = np.zeros(unary.shape[0], dtype=np.int64)
    value = _mincut.grid_mincut(unary, offsets, widths, costs[0], costs[1], labels)
    return labels, float(value)
