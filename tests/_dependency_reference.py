"""Exhaustive enumeration of dependency trees, for testing the compiled kernels.

A sentence of ``n`` tokens has ``(n + 1) ** n`` head vectors (``heads[m - 1]`` in ``0..n``);
for ``n <= 6`` they are all generated and filtered into trees (no self-loop, every token
reaches the root 0), projective trees (no two arcs cross, the root at position 0) and
single-root trees. Scores are ``(n + 1) x (n + 1)`` matrices ``scores[h, m]``.
"""

import functools
import itertools

import numpy as np


def _reaches_root(heads):
    """Rows of ``heads`` (one head vector per row) in which every token reaches 0."""
    n_rows, n = heads.shape
    parent = np.concatenate([np.zeros((n_rows, 1), dtype=np.int64), heads], axis=1)
    ancestor = parent.copy()
    for _ in range(n):
        ancestor = np.take_along_axis(parent, ancestor, axis=1)
    return np.all(ancestor == 0, axis=1)


def _projective(heads):
    """Rows of ``heads`` whose arcs (root arcs included) do not cross."""
    n = heads.shape[1]
    modifiers = np.arange(1, n + 1)
    low = np.minimum(heads, modifiers)
    high = np.maximum(heads, modifiers)
    ok = np.ones(heads.shape[0], dtype=bool)
    for i in range(n):
        for j in range(n):
            crossing = (low[:, i] < low[:, j]) & (low[:, j] < high[:, i]) & (
                high[:, i] < high[:, j])
            ok &= ~crossing
    return ok


@functools.lru_cache(maxsize=None)
def all_trees(n, projective=False, single_root=False):
    """Every tree of ``n`` tokens as an (n_trees, n) int64 array of heads (read-only)."""
    heads = np.array(list(itertools.product(range(n + 1), repeat=n)), dtype=np.int64)
    heads = heads.reshape(-1, n)
    heads = heads[np.all(heads != np.arange(1, n + 1), axis=1)]
    heads = heads[_reaches_root(heads)]
    if single_root:
        heads = heads[np.sum(heads == 0, axis=1) == 1]
    if projective:
        heads = heads[_projective(heads)]
    heads.setflags(write=False)
    return heads


def tree_scores(scores, heads):
    """Score of each row of ``heads`` under the ``(n + 1) x (n + 1)`` matrix ``scores``."""
    n = heads.shape[-1]
    return scores[heads, np.arange(1, n + 1)].sum(axis=-1)


def is_tree(heads, projective=False, single_root=False):
    """Whether one head vector is a tree of the requested kind."""
    heads = np.asarray(heads, dtype=np.int64).reshape(1, -1)
    n = heads.shape[1]
    if np.any(heads < 0) or np.any(heads > n) or np.any(heads == np.arange(1, n + 1)):
        return False
    ok = _reaches_root(heads)[0]
    if single_root:
        ok &= np.sum(heads == 0) == 1
    if projective:
        ok &= _projective(heads)[0]
    return bool(ok)


def brute_force_max(scores, projective=False, single_root=False):
    """Best score and the set of best head vectors (as tuples)."""
    n = scores.shape[0] - 1
    trees = all_trees(n, projective, single_root)
    values = tree_scores(scores, trees)
    best = values.max()
    return best, {tuple(row) for row in trees[values == best]}


def brute_force_loss_augmented(scores, gold, cost, projective=False, single_root=False):
    """Best ``score(tree) + cost * hamming(gold, tree)`` over the trees."""
    n = scores.shape[0] - 1
    trees = all_trees(n, projective, single_root)
    values = tree_scores(scores, trees) + cost * np.sum(trees != gold, axis=1)
    return values.max()


def brute_force_marginals(scores, projective=False, single_root=False):
    """Log-partition and exact arc marginals ``mu[h, m]`` over the trees."""
    n = scores.shape[0] - 1
    trees = all_trees(n, projective, single_root)
    values = tree_scores(scores, trees)
    marginals = np.zeros_like(scores, dtype=np.float64)
    peak = values.max()
    if peak == -np.inf:
        return -np.inf, marginals
    weights = np.exp(values - peak)
    total = weights.sum()
    probabilities = weights / total
    for m in range(1, n + 1):
        np.add.at(marginals[:, m], trees[:, m - 1], probabilities)
    return peak + np.log(total), marginals


def chu_liu_edmonds_score(scores, single_root=False):
    """Best tree score by the textbook recursive Chu-Liu-Edmonds algorithm, O(n^3) per level.

    With ``single_root`` every root child ``r`` is tried in turn (the other root arcs
    forbidden), which is exact and O(n) times slower.
    """
    n = scores.shape[0] - 1
    if single_root:
        best = -np.inf
        for r in range(1, n + 1):
            restricted = scores.copy()
            restricted[0, 1:] = -np.inf
            restricted[0, r] = scores[0, r]
            best = max(best, chu_liu_edmonds_score(restricted))
        return best
    weights = {(h, m): scores[h, m] for h in range(n + 1) for m in range(1, n + 1) if h != m}
    heads = _edmonds(weights, list(range(n + 1)))
    if heads is None:
        return -np.inf
    return sum(scores[heads[m], m] for m in range(1, n + 1))


def _edmonds(weights, nodes):
    """Heads (dict) of the maximum arborescence rooted at 0 of ``weights`` {(h, m): w}."""
    best = {}
    for (h, m), w in weights.items():
        if w > -np.inf and (m not in best or w > weights[(best[m], m)]):
            best[m] = h
    if any(m not in best for m in nodes if m != 0):
        return None
    cycle = _find_cycle(best, nodes)
    if cycle is None:
        return best
    cycle_set = set(cycle)
    new = max(nodes) + 1
    contracted = {}
    origin = {}
    for (h, m), w in weights.items():
        if w == -np.inf or (h in cycle_set and m in cycle_set):
            continue
        if m in cycle_set:
            key, value = (h, new), w - weights[(best[m], m)]
        elif h in cycle_set:
            key, value = (new, m), w
        else:
            key, value = (h, m), w
        if key not in contracted or value > contracted[key]:
            contracted[key] = value
            origin[key] = (h, m)
    sub = _edmonds(contracted, [v for v in nodes if v not in cycle_set] + [new])
    if sub is None:
        return None
    heads = {}
    for m, h in sub.items():
        orig_h, orig_m = origin[(h, m)]
        heads[orig_m] = orig_h
    for m in cycle:
        if m not in heads:
            heads[m] = best[m]
    return heads


def _find_cycle(best, nodes):
    for start in nodes:
        seen = []
        v = start
        while v in best and v not in seen:
            seen.append(v)
            v = best[v]
        if v in seen:
            return seen[seen.index(v):]
    return None
