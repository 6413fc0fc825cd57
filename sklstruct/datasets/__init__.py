"""Data sets: local loaders, an embedded sample and synthetic generators."""

from ._loaders import (
    get_data_home,
    load_conll2000,
    load_conll2002,
    load_ocr_letters,
    load_ocr_sample,
)
from ._horses import grid_pixel_features, load_weizmann_horses
from ._synthetic import make_sparse_chain
from ._treebank import make_dependency_treebank
from ._trees import make_tree_data
from ._volumes import make_noisy_volumes

__all__ = [
    "get_data_home",
    "grid_pixel_features",
    "load_conll2000",
    "load_conll2002",
    "load_ocr_letters",
    "load_ocr_sample",
    "load_weizmann_horses",
    "make_dependency_treebank",
    "make_noisy_volumes",
    "make_sparse_chain",
    "make_tree_data",
]
