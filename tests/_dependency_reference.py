"""Exhaustive enumeration of dependency trees, for testing the compiled kernels.

A sentence of ``n`` tokens has ``(n + 1) ** n`` head vectors (``heads[m - 1]`` in ``0..n``);
for ``n <= 6`` they are all generated and filtered into trees (no self-loop, every token
reaches the root 0), projective trees (no two arcs cross, the root at position 0) and
single-root trees. Scores are ``(n + 1) x (n + 1)`` matrices ``scores[h, m]``.
"""

import decimal
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


# ---------------------------------------------------------------------------------------------
# High-precision references for long sentences (all trees)


def _decimal_context(digits):
    """A decimal context of ``digits`` digits whose exponents never overflow here."""
    return decimal.Context(prec=digits, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _decimal_weights(scores, log_scale=None):
    """``exp(scores)`` as decimals (0 for -inf and the diagonal), the root row multiplied by
    ``exp(log_scale)`` when given."""
    n = scores.shape[0] - 1
    weights = np.full((n + 1, n + 1), decimal.Decimal(0), dtype=object)
    for h in range(n + 1):
        for m in range(1, n + 1):
            if h != m and scores[h, m] > -np.inf:
                exponent = decimal.Decimal(float(scores[h, m]))
                if h == 0 and log_scale is not None:
                    exponent += log_scale
                weights[h, m] = exponent.exp()
    return weights


def laplacian_reference(scores, single_root=False, digits=300):
    """Log-partition and arc marginals of all trees from Koo et al.'s matrices.

    The Laplacian (for single-root trees the matrix of Koo, Globerson, Carreras and Collins
    whose first row holds the root weights, sec. 3.3) is inverted by Gauss-Jordan
    elimination with partial pivoting in ``digits``-digit decimal arithmetic; ``Z`` is its
    determinant and ``mu(h, m) = w(h, m) (L^-1[m, m] - L^-1[m, h])`` (Koo et al.'s variants
    for the root and for single root). The elimination cancels about as many digits as the
    scores spread over, so ``digits`` must exceed that spread over ``ln 10`` comfortably.
    """
    n = scores.shape[0] - 1
    with decimal.localcontext(_decimal_context(digits)):
        zero, one = decimal.Decimal(0), decimal.Decimal(1)
        w = _decimal_weights(scores)
        lap = [[zero] * n for _ in range(n)]
        for m in range(1, n + 1):
            total = sum(w[1:, m], zero)
            for h in range(1, n + 1):
                if h != m and (not single_root or h > 1):
                    lap[h - 1][m - 1] = -w[h, m]
            if single_root:
                if m > 1:
                    lap[m - 1][m - 1] = total
                lap[0][m - 1] = w[0, m]
            else:
                lap[m - 1][m - 1] = total + w[0, m]
        rows = [lap[i] + [one if i == j else zero for j in range(n)] for i in range(n)]
        det = one
        for k in range(n):
            pivot_row = max(range(k, n), key=lambda i: abs(rows[i][k]))
            if rows[pivot_row][k] == 0:
                return -np.inf, np.zeros(scores.shape)
            if pivot_row != k:
                rows[k], rows[pivot_row] = rows[pivot_row], rows[k]
                det = -det
            pivot = rows[k][k]
            det *= pivot
            rows[k] = [value / pivot for value in rows[k]]
            for i in range(n):
                factor = rows[i][k]
                if i != k and factor != 0:
                    rows[i] = [a - factor * b if b else a for a, b in zip(rows[i], rows[k])]
        if det <= 0:
            return -np.inf, np.zeros(scores.shape)
        inverse = [row[n:] for row in rows]
        marginals = np.zeros(scores.shape)
        for m in range(1, n + 1):
            for h in range(n + 1):
                if w[h, m] == 0:
                    continue
                if h == 0:
                    diff = inverse[m - 1][0 if single_root else m - 1]
                elif single_root:
                    diff = ((inverse[m - 1][m - 1] if m > 1 else zero)
                            - (inverse[m - 1][h - 1] if h > 1 else zero))
                else:
                    diff = inverse[m - 1][m - 1] - inverse[m - 1][h - 1]
                marginals[h, m] = float(w[h, m] * diff)
        return float(det.ln()), marginals


def elimination_reference(scores, single_root=False, tokens=None, digits=40):
    """Log-partition and the marginals of the arcs into ``tokens`` (default: all) of all trees.

    Subtraction-free elimination in ``digits``-digit decimal arithmetic, written for clarity
    rather than speed. ``Z = det L`` is the product of the pivots of the Gaussian
    elimination of the token Laplacian in the form of Grassmann, Taksar and Heyman (1985):
    eliminating token ``k`` adds ``w(r, k) w(k, j) / d_k`` to every arc ``r -> j`` between
    the nodes left (``r`` may be the root), ``d_k`` being the sum of the weights entering
    ``k`` from them. Nothing cancels, so every quantity has a relative error of a few
    ``n^2 10^-digits``; decimals do not overflow at any score scale.

    The marginals of the arcs into ``m`` come from an elimination with ``m`` last: its
    final pivot, ``Z`` over the other pivots, is linear in the weights entering ``m``, with
    coefficients ``c_h`` found backwards through the pivot columns (again without
    subtraction), and ``mu(h, m) = w(h, m) c_h / sum_h' w(h', m) c_h'``.

    Single-root trees: the root weights are multiplied by ``t = exp(-T)``, ``T`` large
    enough that ``Z(t) / t = Z_1 + t Z_2 + ...`` equals ``Z_1`` to 40 digits: ``Z_k`` is at
    most ``(n + 1)^n exp(n s_max)`` and ``Z_1``, if positive, at least ``exp(n s_min)``
    (``s`` over the finite scores). ``Z_1`` must be positive.
    """
    n = scores.shape[0] - 1
    finite = scores[np.isfinite(scores)]
    with decimal.localcontext(_decimal_context(digits)):
        zero = decimal.Decimal(0)
        log_scale = None
        if single_root:
            log_scale = -decimal.Decimal(
                float(n * (finite.max() - finite.min()) + n * np.log(n + 1) + 100.0))
        weights = _decimal_weights(scores, log_scale)
        log_z = None
        marginals = np.zeros(scores.shape)
        for m in range(1, n + 1) if tokens is None else tokens:
            order = [k for k in range(1, n + 1) if k != m] + [m]
            a = weights.copy()
            shares = []
            log_det = zero
            for position, k in enumerate(order):
                rows = [0] + order[position + 1:]
                pivot = sum((a[r, k] for r in rows), zero)
                if pivot == 0:
                    raise ValueError("the sentence has no tree")
                log_det += pivot.ln()
                share = {r: a[r, k] / pivot for r in rows}
                shares.append(share)
                for j in order[position + 1:]:
                    if a[k, j] != 0:
                        for r in rows:
                            if r != j:
                                a[r, j] += share[r] * a[k, j]
            if log_scale is not None:
                log_det -= log_scale
            log_z = log_det if log_z is None else log_z
            coefficient = {0: decimal.Decimal(1)}
            for position in range(n - 2, -1, -1):
                coefficient[order[position]] = sum(
                    (value * coefficient[r] for r, value in shares[position].items() if r != m),
                    zero)
            total = sum((weights[h, m] * value for h, value in coefficient.items()), zero)
            for h, value in coefficient.items():
                marginals[h, m] = float(weights[h, m] * value / total)
    if single_root and float(log_z) < n * float(finite.min()) - 1.0:
        raise ValueError("the sentence has no single-root tree")
    return float(log_z), marginals
