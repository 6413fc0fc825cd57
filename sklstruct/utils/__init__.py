"""Utilities shared by sklstruct's estimators."""

from ._sequences import lengths_from_sequence_ids, lengths_to_groups

__all__ = ["lengths_from_sequence_ids", "lengths_to_groups"]
