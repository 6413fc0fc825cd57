"""Structures: joint feature maps, losses and inference oracles."""

from ._base import BaseStructure
from .chain import ChainStructure
from .grid import GridStructure
from .multiclass import MultiClass

__all__ = ["BaseStructure", "ChainStructure", "GridStructure", "MultiClass"]
