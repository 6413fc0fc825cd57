"""Data generators shared by the test modules (fixtures stay in conftest.py)."""

import numpy as np
import scipy.sparse as sp


def make_chain_data(n_sequences=30, n_states=3, n_features=4, max_length=6, seed=0,
                    sparse=False):
    """Sequences from a noisy HMM-like generator (labels sticky, features class means)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=1.5, size=(n_states, n_features))
    X, y = [], []
    for _ in range(n_sequences):
        length = rng.integers(1, max_length + 1)
        labels = [rng.integers(n_states)]
        for _ in range(length - 1):
            labels.append(labels[-1] if rng.random() < 0.6 else rng.integers(n_states))
        labels = np.array(labels)
        feats = means[labels] + rng.normal(size=(length, n_features))
        X.append(sp.csr_matrix(feats) if sparse else feats)
        y.append(labels)
    return X, y
