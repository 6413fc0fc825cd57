"""The outer loops of exponentiated gradient (Bartlett et al. 2004): online and batch updates of
the dual represented as Gibbs distributions over parts, certified by the duality gap.

Both functions take the bound structure, the data and explicit settings, record their checks
on a :class:`~sklstruct._progress.Certificate` (whose ``tol``, ``max_iter`` and ``max_time``
stop them) and return ``(w, eta, state)``: the weights, the final step size(s) and the dual
state a warm start continues from.
"""

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.extmath import row_norms

from ..._progress import CheckSchedule
from ...structures._base import checked_token_loss, primal_objective
from ._online import ONLINE_MAX_CHANGE, OnlineEGState


def sequence_scales(batch):
    """Squared feature norm plus length of every sequence (the scale of its step)."""
    return np.bincount(batch.sequence_index, weights=row_norms(batch.X, squared=True),
                       minlength=batch.n_sequences) + batch.lengths


def _check(certificate, structure, batch, Y, C, w, dual, passes, calls, eta, n_jobs,
           primal=None):
    """Record the certificate at ``w`` (``primal``: its objective, when known); return
    whether the fit stops."""
    if primal is None:  # (the batch updates: without sample weights)
        primal, _ = primal_objective(structure, batch, Y, w, C, n_jobs=n_jobs)
    return certificate.check(passes, primal, dual, calls, w=w, passes=passes, eta=eta)


def solve_online(structure, batch, Y, *, C, eta, init_bias, adaptive, state, check_every,
                 random_state, n_jobs, certificate, sample_weight=None):
    """Online exponentiated gradient (the paper's section 5): one example's parts updated at
    a time by the compiled pass, in a fresh random order every pass.

    Parameters
    ----------
    structure : bound structure with compiled per-example marginals
    batch : SequenceBatch
    Y : ndarray of int of shape (n_tokens,)
    C : float
    eta : float or None
        The initial step of every example; ``None``: ``1 / ((C s_i)^2 scale_i)``.
    init_bias : float
        Initial node potentials on the true states.
    adaptive : bool
        Per-example adaptive steps (else the fixed ``eta``).
    state : dict or None
        A previous fit's dual state (warm start).
    check_every : int or None
        Passes between certificates (``None``: :class:`~sklstruct._progress.CheckSchedule`'s
        predicted schedule).
    random_state : int, RandomState instance or None
    n_jobs : int or None
    certificate : Certificate
    sample_weight : ndarray of shape (n_sequences,) or None
        The examples' weights ``s_i`` in ``1/2 ||w||^2 + C sum_i s_i H_i(w)``: example
        ``i``'s dual variables sum to ``C s_i`` (any potentials stay feasible).

    Returns
    -------
    w : ndarray
    eta : ndarray of shape (n_sequences,)
    state : dict
    """
    if state is not None and state["pair_pot"].ndim == 2:
        online = OnlineEGState(structure, batch, Y, C, **state, sample_weight=sample_weight)
        if not adaptive and eta is not None:
            online.eta[:] = eta
    else:
        if state is not None:
            node_pot, table = state["node_pot"], state["pair_pot"]
        else:
            node_pot = float(init_bias) * structure.onehot(Y)
            table = np.zeros(structure.n_pairwise_)
        if eta is not None:
            rates = np.full(batch.n_sequences, eta)
        else:
            rates = _default_rates(C if sample_weight is None else C * sample_weight,
                                   sequence_scales(batch))
        online = OnlineEGState.from_shared_potentials(structure, batch, Y, C, node_pot, table,
                                                      rates, n_jobs=n_jobs,
                                                      sample_weight=sample_weight)
    w, dual = online.certificate()
    calls, passes = batch.n_sequences, 0
    converged = _check(certificate, structure, batch, Y, C, w, dual, 0, calls,
                       float(np.median(online.eta)), n_jobs, primal=online.primal())
    schedule = CheckSchedule(certificate, check_every, growth=1.25, predict=True)
    rng = check_random_state(random_state)
    while not converged and passes < certificate.max_iter:
        calls += online.run_pass(adaptive, rng.permutation(batch.n_sequences),
                                 max_change=ONLINE_MAX_CHANGE)
        passes += 1
        if schedule.due(passes):
            w, dual = online.certificate()
            converged = _check(certificate, structure, batch, Y, C, w, dual, passes, calls,
                               float(np.median(online.eta)), n_jobs, primal=online.primal())
            schedule.checked(passes)
    certificate.finish(passes)
    # the state's own arrays (nothing else keeps the state): copies would double its memory
    state = {name: getattr(online, name) for name in
             ("node_pot", "node_marg", "pair_pot", "pair_marg", "eta", "probing")}
    return w, online.eta.copy(), state


# The largest default step size: below C of about 1e-150, 1 / (C^2 scale) overflows (C * C
# underflows), and a step of this size already moves the potentials by C * MAX_RATE times
# the gradient's order (1e150 at C = 1e-150), past what the adaptive steps keep.
MAX_RATE = 1e300


def _default_rates(C, scales):
    """The default step sizes ``1 / (C^2 scale)`` of examples of the given scales, at most
    ``MAX_RATE``."""
    with np.errstate(over="ignore", divide="ignore"):
        return np.minimum(1.0 / (C * C * np.asarray(scales, dtype=np.float64)), MAX_RATE)


def _dual_at(structure, batch, Y, C, token_loss, node_potentials, pairwise_potentials, n_jobs):
    """Marginals of the current Gibbs distributions, ``w(a)`` and the dual value."""
    node, pairwise, _ = structure.summed_marginals(batch, node_potentials,
                                                   pairwise_potentials, n_jobs=n_jobs)
    w = C * (structure.joint_feature(batch, Y)
             - structure.expected_joint_feature(batch, node, pairwise[None, :]))
    expected_loss = float((token_loss * node).sum())
    return w, C * expected_loss - 0.5 * float(w @ w)


def solve_batch(structure, batch, Y, *, C, eta, init_bias, adaptive, state, check_every,
                random_state, n_jobs, certificate):
    """Batch exponentiated gradient (the paper's Figure 2): every part updated at once from
    the same weights, so that all examples share one pairwise table.

    Parameters are those of :func:`solve_online` (``random_state`` unused, no
    ``sample_weight``: one pairwise table cannot hold examples of different ``C s_i``);
    ``eta`` ``None`` is ``1 / (C^2 max_i scale_i)``. Returns ``(w, eta, state)`` with one step size.
    """
    if state is not None:
        node_pot, pair_pot = state["node_pot"].copy(), state["pair_pot"].copy()
        if eta is None:
            eta = float(state["eta"])
    else:
        node_pot = float(init_bias) * structure.onehot(Y)
        pair_pot = np.zeros(structure.n_pairwise_)
    probing = state is None or bool(state.get("probing", True))
    if eta is None:
        eta = float(_default_rates(C, sequence_scales(batch).max()))
    # loss of every token and state: the part losses l_{i,r}
    token_loss = checked_token_loss(structure, Y)
    w, dual = _dual_at(structure, batch, Y, C, token_loss, node_pot, pair_pot, n_jobs)
    calls, passes = batch.n_sequences, 0
    converged = _check(certificate, structure, batch, Y, C, w, dual, 0, calls, eta, n_jobs)
    schedule = CheckSchedule(certificate, check_every, growth=1.25, predict=True)
    while not converged and passes < certificate.max_iter:
        # EG step on every part: theta_r += eta * C * (l_r + w . phi_r)
        unary, pairwise = structure.potentials(batch, w)
        node_grad = C * (token_loss + unary)
        pair_grad = C * pairwise
        while True:
            new_node = node_pot + eta * node_grad
            new_node -= new_node.max(axis=1, keepdims=True)  # shift: same distribution
            new_pair = pair_pot + eta * pair_grad
            new_w, new_dual = _dual_at(structure, batch, Y, C, token_loss, new_node, new_pair,
                                       n_jobs)
            calls += batch.n_sequences
            if not adaptive or new_dual >= dual or eta < 1e-300:
                break
            eta *= 0.5
            probing = False
        node_pot, pair_pot, w, dual = new_node, new_pair, new_w, new_dual
        if adaptive:  # double until the first rejection, then grow slowly
            eta *= 2.0 if probing else 1.05
        passes += 1
        if schedule.due(passes):
            converged = _check(certificate, structure, batch, Y, C, w, dual, passes, calls, eta,
                               n_jobs)
            schedule.checked(passes)
    certificate.finish(passes)
    return w, eta, {"node_pot": node_pot, "pair_pot": pair_pot, "eta": eta,
                    "probing": probing}
