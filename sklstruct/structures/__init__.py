"""Structures: joint feature maps, losses and inference oracles."""

from .._inference.cfg import Grammar
from ._base import BaseStructure
from ._parts import PartsStructure
from .cfg import ConstituencyTree
from .chain import ChainStructure
from .dependency import DependencyTree
from .graph import GraphStructure, TreeStructure
from .grid import GridStructure
from .grid3d import Grid3DStructure
from .multiclass import MultiClass
from .multilabel import MultiLabelStructure, chow_liu_tree, hierarchy_loss_weights

__all__ = ["BaseStructure", "ChainStructure", "ConstituencyTree", "DependencyTree", "Grammar",
           "GraphStructure", "Grid3DStructure", "GridStructure", "MultiClass",
           "MultiLabelStructure", "PartsStructure", "TreeStructure", "chow_liu_tree",
           "hierarchy_loss_weights", "structure_for_form"]


def structure_for_form(form):
    """The structure ``structure="auto"`` takes for an input form: a grid for images, a 3-D
    grid for volumes, the multiclass structure for a plain 2-D ``X`` without lengths, a chain
    for sequences, a graph structure for graphs and a Chow-Liu tree over the labels for
    multi-label input.

    Parameters
    ----------
    form : {"list", "flat", "multiclass", "images", "volumes", "graphs", "multilabel"}

    Returns
    -------
    structure : BaseStructure
        A new, unbound instance.
    """
    makers = {"list": ChainStructure, "flat": ChainStructure, "multiclass": MultiClass,
              "images": GridStructure, "volumes": Grid3DStructure, "graphs": GraphStructure,
              "multilabel": MultiLabelStructure}
    if not isinstance(form, str) or form not in makers:
        raise ValueError(f"form must be one of {sorted(makers)}; got {form!r}.")
    return makers[form]()
