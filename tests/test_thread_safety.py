"""A fitted model read by one thread while another refits it."""

import threading

import numpy as np

from sklstruct import ChainStructure, StructSVMCuttingPlane

from ._helpers import make_chain_data


class _RefitDuringDecoding(ChainStructure):
    """A chain whose decoding hands the estimator another fit in the middle of ``predict``,
    as a concurrent refit would: deterministic, where threads would race."""

    swap = None

    def decode(self, batch, unary, pairwise, n_jobs=None):
        labels = super().decode(batch, unary, pairwise, n_jobs)
        if self.swap is not None:
            model, other, self.swap = self.swap[0], self.swap[1], None
            model.__dict__ = other.__dict__  # what a completed refit does
        return labels


def test_predict_reads_one_fit_while_another_completes():
    X, y = make_chain_data(30, seed=0)
    letters = [np.array(list("abc"))[labels] for labels in y]
    model = StructSVMCuttingPlane(_RefitDuringDecoding()).fit(X, y)
    other = StructSVMCuttingPlane(C=0.1).fit(X, letters)
    expected = model.predict(X)
    model.structure_.swap = (model, other)
    labels = model.predict(X)
    # the labelling is the first fit's, named with the first fit's classes
    assert all(np.array_equal(a, b) for a, b in zip(labels, expected))
    assert model.classes_.tolist() == ["a", "b", "c"]  # the refit has landed


def test_concurrent_predict_and_refit_never_mix_models():
    from concurrent.futures import ThreadPoolExecutor

    X, y = make_chain_data(40, seed=1)
    letters = [np.array(list("xyz"))[labels] for labels in y]
    model = StructSVMCuttingPlane(C=0.1).fit(X, y)
    numbers = model.predict(X)
    named = StructSVMCuttingPlane(C=0.1).fit(X, letters).predict(X)

    def refit(_):
        for labels in (letters, y) * 5:
            StructSVMCuttingPlane.fit(model, X, labels)

    def predict(_):
        answers = [model.predict(X) for _ in range(40)]
        return all(all(np.array_equal(a, b) for a, b in zip(answer, numbers)) or
                   all(np.array_equal(a, b) for a, b in zip(answer, named))
                   for answer in answers)

    with ThreadPoolExecutor(2) as pool:
        refits = pool.submit(refit, None)
        assert pool.submit(predict, None).result()
        refits.result()


def test_concurrent_fits_leave_the_warnings_filters_alone():
    """The inner fits of L1M3N (the default radius's EM, the EM's M-steps) silenced their
    ConvergenceWarnings with warnings.catch_warnings, which saves and restores the
    process's filters: fits in two threads interleaved them and left an "ignore
    ConvergenceWarning" filter in place for good."""
    import warnings

    from sklstruct import L1M3N

    X, y = make_chain_data(n_sequences=12, seed=0)
    before = list(warnings.filters)

    def work():
        for _ in range(4):
            L1M3N(solver="subgradient", max_iter=5).fit(X, y)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warnings.filters == before
