"""Build ``sklstruct/datasets/data/ocr_sample.npz`` from the full OCR data set.

The sample holds 150 words of fold 0 and 150 words of fold 1 of the OCR
handwritten letters data set, chosen with ``numpy.random.default_rng(0)`` and
kept in their original order. Arrays stored (all numeric, so the file loads
with ``allow_pickle=False``):

- ``pixels``: uint8 (n_letters, 16), the 128 binary pixels of each letter
  packed with ``numpy.packbits(..., axis=1)``;
- ``letters``: uint8 (n_letters,), letter codes (0 = 'a', ..., 25 = 'z');
- ``lengths``: uint8 (n_words,), number of letters of each word;
- ``folds``: uint8 (n_words,), fold of each word;
- ``word_ids``: int32 (n_words,), 1-based ``word_id`` of each word in
  ``letter.data``.

Usage::

    python benchmarks/make_ocr_sample.py [--data-home ../shared/data]
"""

import argparse
import os

import numpy as np

from sklstruct.datasets import load_ocr_letters

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "sklstruct", "datasets", "data", "ocr_sample.npz")
WORDS_PER_FOLD = {0: 150, 1: 150}
SEED = 0


def build_sample(data_home):
    """Return the arrays of the sample, as stored in the npz file."""
    ocr = load_ocr_letters(data_home)
    rng = np.random.default_rng(SEED)
    chosen = np.sort(
        np.concatenate(
            [
                rng.choice(np.flatnonzero(ocr.folds == fold), size, replace=False)
                for fold, size in WORDS_PER_FOLD.items()
            ]
        )
    )
    pixels = np.concatenate([ocr.data[i] for i in chosen]).astype(np.uint8)
    letters = np.concatenate([ocr.target[i] for i in chosen])
    return {
        "pixels": np.packbits(pixels, axis=1),
        "letters": (letters.astype("S1").view(np.uint8) - ord("a")).astype(np.uint8),
        "lengths": np.array([len(ocr.words[i]) for i in chosen], dtype=np.uint8),
        "folds": ocr.folds[chosen].astype(np.uint8),
        "word_ids": (chosen + 1).astype(np.int32),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-home",
        default=os.path.join(ROOT, "..", "shared", "data"),
        help="directory holding ocr_letters/letter.data.gz",
    )
    parser.add_argument("--output", default=OUTPUT, help="npz file to write")
    args = parser.parse_args()
    arrays = build_sample(args.data_home)
    np.savez_compressed(args.output, **arrays)
    print(
        f"wrote {args.output}: {arrays['lengths'].size} words, "
        f"{arrays['letters'].size} letters, {os.path.getsize(args.output)} bytes"
    )


if __name__ == "__main__":
    main()
