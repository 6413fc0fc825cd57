"""Structures: joint feature maps, losses and inference oracles."""

from .._inference.cfg import Grammar
from ._base import BaseStructure
from .cfg import ConstituencyTree
from .chain import ChainStructure
from .grid import GridStructure
from .multiclass import MultiClass

__all__ = ["BaseStructure", "ChainStructure", "ConstituencyTree", "Grammar", "GridStructure",
           "MultiClass", "structure_for_form"]


def structure_for_form(form):
    """The structure ``structure="auto"`` takes for an input form: a grid for images, the
    multiclass structure for a plain 2-D ``X`` without lengths, a chain for sequences.

    Parameters
    ----------
    form : {"list", "flat", "multiclass", "images"}

    Returns
    -------
    structure : BaseStructure
        A new, unbound instance.
    """
    if form == "images":
        return GridStructure()
    return MultiClass() if form == "multiclass" else ChainStructure()
