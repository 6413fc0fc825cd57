"""Utilities shared by sklstruct's estimators."""

from ._sequences import lengths_to_groups

__all__ = ["lengths_to_groups"]
