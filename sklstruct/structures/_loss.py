"""The losses of the structures: the weighted Hamming loss, written once.

``Delta(y, ybar) = sum_t c[y_t] [ybar_t != y_t]`` with per-class weights ``c`` (the
structures' ``loss_weights_``). The structures' default ``token_loss`` is its per-token
matrix, the chain oracles take it or build it from the weights, and the compiled passes,
which compute it from the labels and the weights for speed, take their largest total from
:func:`hamming_max_loss`.
"""

import numpy as np


def hamming_token_loss(y, loss_weights, n_states):
    """Per-token loss matrix of the weighted Hamming loss: ``c[y_t] [s != y_t]``.

    Parameters
    ----------
    y : ndarray of int of shape (n_tokens,)
    loss_weights : ndarray of shape (n_states,)
        Cost of mislabeling a token, indexed by its true state.
    n_states : int

    Returns
    -------
    token_loss : ndarray of shape (n_tokens, n_states)
    """
    token_loss = np.repeat(np.asarray(loss_weights, dtype=np.float64)[y][:, None], n_states,
                           axis=1)
    token_loss[np.arange(y.shape[0]), y] = 0.0
    return token_loss


def hamming_max_loss(y, loss_weights, n_states, per_token=False):
    """``sum_t max_s c[y_t] [s != y_t]``: the largest total loss of the labellings of the
    tokens ``y`` (0 with a single state); with ``per_token`` the terms, one per token."""
    if per_token:
        terms = np.asarray(loss_weights, dtype=np.float64)[y]
        return terms if n_states >= 2 else np.zeros_like(terms)
    if n_states < 2:
        return 0.0
    return float(np.asarray(loss_weights, dtype=np.float64)[y].sum())
