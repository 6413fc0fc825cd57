"""The Weizmann horse figure/ground images at 32 x 32, and per-pixel features for grids."""

import numpy as np
from scipy.ndimage import uniform_filter
from sklearn.utils import Bunch

from ._loaders import _data_file

HORSES_DESCR = """\
Weizmann horse figure/ground segmentation (Borenstein and Ullman, ECCV 2002), 328 photographs
of horses with binary masks (1 = horse), resized to 32 x 32 (area average; masks thresholded
at 128). Research use only; the photographs belong to their owners.
"""


def load_weizmann_horses(data_home=None):
    """Load the 32 x 32 Weizmann horses (``weizmann_horse/horses_32x32.npz``).

    The file is read from ``data_home``; it is never downloaded. It is derived
    from the Weizmann horse database (Borenstein and Ullman; ``gray/``,
    ``rgb/`` and ``figure_ground/`` JPEGs of 328 horses), each image resized to
    32 x 32 by area averaging and each mask thresholded at 128, and no public
    copy of the derived file (nor a stable source of the database with a known
    checksum) exists to download it from. Research use only; the photographs
    belong to their owners.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The folder holding ``weizmann_horse/`` (default: ``$SKLSTRUCT_DATA`` or
        ``~/sklstruct_data``).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        gray : ndarray of shape (328, 32, 32), uint8
        rgb : ndarray of shape (328, 32, 32, 3), uint8 (image 317 is blank: use ``gray``)
        masks : ndarray of shape (328, 32, 32), uint8 in {0, 1}
        names : ndarray of str
        DESCR : str
    """
    path = _data_file(data_home, "weizmann_horse", "horses_32x32.npz")
    with np.load(path, allow_pickle=False) as stored:
        missing = sorted({"gray", "rgb", "mask", "names"} - set(stored.files))
        if missing:
            raise ValueError(f"{path} lacks the arrays {missing}.")
        data = Bunch(gray=stored["gray"], rgb=stored["rgb"], masks=stored["mask"],
                     names=stored["names"], DESCR=HORSES_DESCR)
    _check_horses(data, path)
    return data


def _check_horses(data, path):
    """Refuse a horses file whose arrays disagree with each other or with their kinds."""
    gray, rgb, masks = data.gray, data.rgb, data.masks
    if gray.ndim != 3 or gray.dtype != np.uint8:
        raise ValueError(f"{path}: gray must be uint8 images (n, height, width), got "
                         f"{gray.dtype} of shape {gray.shape}.")
    if rgb.shape != gray.shape + (3,) or masks.shape != gray.shape or \
            data.names.shape != gray.shape[:1]:
        raise ValueError(f"{path}: the arrays disagree: gray {gray.shape}, rgb {rgb.shape}, "
                         f"mask {masks.shape}, names {data.names.shape}.")
    if masks.size and (masks.dtype.kind not in "biu" or masks.max() > 1 or masks.min() < 0):
        raise ValueError(f"{path}: the masks must hold 0 (background) and 1 (horse).")


def grid_pixel_features(gray, n_bins=8):
    """Simple per-pixel features of grey images, one row per pixel in row-major order.

    Columns: a constant 1, the intensity, the local contrast ``|I - mean_3x3(I)|``, the
    local mean over 5 x 5, and one-hot bins of the intensity, of the row and of the column
    (``n_bins`` each). Intensities are scaled to [0, 1].

    Parameters
    ----------
    gray : array-like of shape (n_images, height, width)
    n_bins : int, default=8

    Returns
    -------
    features : list of ndarray of shape (height * width, 4 + 3 * n_bins)
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}.")
    gray = np.asarray(gray, dtype=np.float64)
    if gray.ndim != 3:
        raise ValueError(f"gray must have shape (n_images, height, width), got {gray.shape}.")
    if gray.size and (not np.all(np.isfinite(gray)) or gray.min() < 0 or gray.max() > 255):
        raise ValueError("gray must hold intensities in [0, 255].")
    images = gray / 255.0
    _, height, width = images.shape
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    position = np.hstack([np.eye(n_bins)[(rows * n_bins // height).ravel()],
                          np.eye(n_bins)[(cols * n_bins // width).ravel()]])
    out = []
    for image in images:
        contrast = np.abs(image - uniform_filter(image, size=3, mode="nearest"))
        local = uniform_filter(image, size=5, mode="nearest")
        level = np.minimum((image * n_bins).astype(int), n_bins - 1).ravel()
        out.append(np.column_stack([np.ones(height * width), image.ravel(), contrast.ravel(),
                                    local.ravel(), np.eye(n_bins)[level], position]))
    return out
