"""Structures: joint feature maps, losses and inference oracles."""

from ._base import BaseStructure
from .chain import ChainStructure
from .grid import GridStructure
from .grid3d import Grid3DStructure
from .multiclass import MultiClass

__all__ = ["BaseStructure", "ChainStructure", "Grid3DStructure", "GridStructure", "MultiClass",
           "structure_for_form"]


def structure_for_form(form):
    """The structure ``structure="auto"`` takes for an input form: a grid for images, a 3-D
    grid for volumes, the multiclass structure for a plain 2-D ``X`` without lengths, a chain
    for sequences.

    Parameters
    ----------
    form : {"list", "flat", "multiclass", "images", "volumes"}

    Returns
    -------
    structure : BaseStructure
        A new, unbound instance.
    """
    if form == "images":
        return GridStructure()
    if form == "volumes":
        return Grid3DStructure()
    return MultiClass() if form == "multiclass" else ChainStructure()
