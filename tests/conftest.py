import os

import numpy as np
import pytest

DATA_HOME = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


@pytest.fixture
def data_home():
    if not os.path.isdir(DATA_HOME):
        pytest.skip("../shared/data is not available")
    return DATA_HOME


def make_chain_data(n_sequences=30, n_states=3, n_features=4, max_length=6, seed=0,
                    sparse=False):
    """Sequences from a noisy HMM-like generator (labels sticky, features class means)."""
    import scipy.sparse as sp

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


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """The tests never download: the data fetcher opens only file:// URLs and 127.0.0.1."""
    from urllib.parse import urlsplit

    from sklstruct.datasets import _fetch

    urlopen = _fetch._urlopen

    def local_only(url):
        parts = urlsplit(url)
        if parts.scheme != "file" and parts.hostname not in ("127.0.0.1", "localhost"):
            raise AssertionError(f"a test tried to download {url}")
        return urlopen(url)

    monkeypatch.setattr(_fetch, "_urlopen", local_only)
