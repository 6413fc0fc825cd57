import os

import pytest

DATA_HOME = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")


@pytest.fixture
def data_home():
    if not os.path.isdir(DATA_HOME):
        pytest.skip("../shared/data is not available")
    return DATA_HOME


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
