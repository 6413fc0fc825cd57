"""Synthetic binary volumes: random ellipsoids and boxes seen through noisy voxel features."""

import numbers

import numpy as np
from sklearn.utils import check_random_state

from ..utils._sklearn_compat import Interval, StrOptions, validate_params


def _check_shape(shape):
    if isinstance(shape, (str, bytes)) or np.ndim(shape) != 1 or len(shape) != 3 or not all(
            isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 1
            for s in shape):
        raise ValueError(f"shape must be three positive integers (n_slices, n_rows, n_cols), "
                         f"got {shape!r}.")
    return tuple(int(s) for s in shape)


def _random_rotation(rng):
    """A uniformly random 3-D rotation matrix (QR of a Gaussian matrix, signs fixed)."""
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def _object_mask(coordinates, shape, kind, rng):
    """Voxels inside one random ellipsoid or box (centre in the middle 60% of every axis,
    semi-axes 15% to 35% of the axis, at least half a voxel)."""
    size = np.array(shape, dtype=np.float64)
    centre = rng.uniform(0.2, 0.8, size=3) * (size - 1)
    semi = np.maximum(rng.uniform(0.15, 0.35, size=3) * size, 0.5)
    offset = coordinates - centre.reshape(3, 1, 1, 1)
    if kind == "boxes":
        return np.all(np.abs(offset) <= semi.reshape(3, 1, 1, 1), axis=0)
    local = np.tensordot(_random_rotation(rng).T, offset, axes=1)
    return np.sum((local / semi.reshape(3, 1, 1, 1)) ** 2, axis=0) <= 1.0


@validate_params(
    {
        "n_volumes": [Interval(numbers.Integral, 1, None, closed="left")],
        "shape": ["array-like"],
        "n_objects": [Interval(numbers.Integral, 1, None, closed="left")],
        "kind": [StrOptions({"ellipsoids", "boxes", "mixed"})],
        "n_channels": [Interval(numbers.Integral, 1, None, closed="left")],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "constant_feature": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def make_noisy_volumes(n_volumes=10, *, shape=(16, 16, 16), n_objects=2, kind="mixed",
                       n_channels=2, noise=1.0, constant_feature=True, random_state=None):
    """Binary volumes of random 3-D shapes observed through noisy per-voxel features.

    Each volume of ``shape`` voxels holds the union of ``n_objects`` random shapes: ellipsoids
    (random semi-axes, uniformly random orientation), axis-aligned boxes, or either with
    probability 1/2 each (``kind="mixed"``). A shape's centre is uniform in the middle 60% of
    every axis and its semi-axes are uniform between 15% and 35% of the axis length. The
    label of a voxel is 1 inside a shape, 0 outside. Every voxel has ``n_channels`` features,
    each its label plus independent Gaussian noise of standard deviation ``noise`` (so a
    voxel alone is misread with probability about ``Phi(-sqrt(n_channels) / (2 noise))`` at
    the midpoint threshold), followed with ``constant_feature`` by a feature of value 1 (the
    grid structures have no intercept: its weights are the per-class biases). A model of
    neighbouring labels (:class:`~sklstruct.Grid3DStructure`) recovers the shapes far better
    than voxels classified one by one.

    Parameters
    ----------
    n_volumes : int, default=10
    shape : tuple of three int, default=(16, 16, 16)
        ``(n_slices, n_rows, n_cols)`` of every volume.
    n_objects : int, default=2
        Shapes per volume (they may overlap).
    kind : {"ellipsoids", "boxes", "mixed"}, default="mixed"
    n_channels : int, default=2
        Noisy observations of the label per voxel.
    noise : float, default=1.0
        Standard deviation of the Gaussian noise of every channel.
    constant_feature : bool, default=True
        Append a feature of value 1.
    random_state : int, RandomState instance or None, default=None

    Returns
    -------
    X : list of ndarray of shape (n_slices, n_rows, n_cols, n_channels + constant_feature)
    y : list of ndarray of int64 of shape (n_slices, n_rows, n_cols), values in {0, 1}

    Examples
    --------
    >>> from sklstruct.datasets import make_noisy_volumes
    >>> X, y = make_noisy_volumes(3, shape=(8, 10, 12), random_state=0)
    >>> len(X), X[0].shape, y[0].shape
    (3, (8, 10, 12, 3), (8, 10, 12))
    """
    shape = _check_shape(shape)
    rng = check_random_state(random_state)
    coordinates = np.indices(shape, dtype=np.float64)
    X, y = [], []
    for _ in range(n_volumes):
        mask = np.zeros(shape, dtype=bool)
        for _ in range(n_objects):
            which = kind if kind != "mixed" else ("ellipsoids", "boxes")[rng.randint(2)]
            mask |= _object_mask(coordinates, shape, which, rng)
        labels = mask.astype(np.int64)
        features = labels[..., None] + noise * rng.standard_normal(shape + (n_channels,))
        if constant_feature:
            features = np.concatenate([features, np.ones(shape + (1,))], axis=3)
        X.append(features)
        y.append(labels)
    return X, y
