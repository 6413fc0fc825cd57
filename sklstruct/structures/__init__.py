"""Structures: joint feature maps, losses and inference oracles."""

from ._base import BaseStructure
from .chain import ChainStructure
from .multiclass import MultiClass

__all__ = ["BaseStructure", "ChainStructure", "MultiClass"]
