"""Utilities shared by sklstruct's estimators: the batch layout of sequence data and the
helpers that convert lengths and sequence identifiers."""

from ._sequences import (
    ExampleArrays,
    PackedSequences,
    SequenceBatch,
    lengths_from_sequence_ids,
    lengths_to_groups,
)

__all__ = ["ExampleArrays", "PackedSequences", "SequenceBatch", "lengths_from_sequence_ids",
           "lengths_to_groups"]
