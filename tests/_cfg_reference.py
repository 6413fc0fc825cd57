"""Test-only references for the CKY kernels: enumeration of every tree of a tiny grammar, and
a plain log-space inside-outside dynamic programme for grammars too large to enumerate."""

import itertools

import numpy as np
from scipy.special import logsumexp


def span_rows(n):
    """Row of every span [i, j) in the documented layout: spans by length, then start."""
    spans = sorted(((i, j) for i in range(n) for j in range(i + 1, n + 1)),
                   key=lambda span: (span[1] - span[0], span[0]))
    return {span: row for row, span in enumerate(spans)}


def enumerate_trees(n, top, bottom, lexical, phrasal, root, rules):
    """Every tree of the grammar over ``n`` words, whatever its score.

    Returns
    -------
    labels : ndarray of int64, shape (n_trees, n (n + 1) / 2)
        Label of every span, -1 off the tree.
    counts : ndarray of int64, shape (n_trees, n_rules)
        Number of nodes using each rule.
    keys : list of tuples
        Preorder serialisation of each tree: per node its label, then for an internal node
        its split point, left child symbol and rule index.
    """
    rows = span_rows(n)
    rule_of = {tuple(int(v) for v in rule): r for r, rule in enumerate(rules)}
    memo = {}

    def subtrees(i, j):
        # (label, nodes ((i, j, label), ...), rules used, key)
        if (i, j) in memo:
            return memo[i, j]
        found = []
        if j == i + 1:
            for a in range(len(top)):
                if lexical[a]:
                    found.append((a, ((i, j, a),), (), (a,)))
        else:
            for k in range(i + 1, j):
                for left, right in itertools.product(subtrees(i, k), subtrees(k, j)):
                    for a in range(len(top)):
                        if not phrasal[a]:
                            continue
                        r = rule_of.get((int(bottom[a]), int(top[left[0]]),
                                         int(top[right[0]])))
                        if r is None:
                            continue
                        found.append((a, ((i, j, a),) + left[1] + right[1],
                                      (r,) + left[2] + right[2],
                                      (a, k, int(top[left[0]]), r) + left[3] + right[3]))
        memo[i, j] = found
        return found

    trees = [tree for tree in subtrees(0, n) if root[top[tree[0]]]]
    labels = np.full((len(trees), n * (n + 1) // 2), -1, dtype=np.int64)
    counts = np.zeros((len(trees), len(rules)), dtype=np.int64)
    for t, (_, nodes, used, _) in enumerate(trees):
        for i, j, a in nodes:
            labels[t, rows[i, j]] = a
        for r in used:
            counts[t, r] += 1
    return labels, counts, [tree[3] for tree in trees]


def tree_scores(labels, counts, span_scores, rule_scores):
    """Score of every enumerated tree (-inf for a forbidden one)."""
    on_tree = labels >= 0
    picked = np.where(on_tree, span_scores[np.arange(labels.shape[1]), np.maximum(labels, 0)],
                      0.0)
    return picked.sum(axis=1) + counts @ rule_scores


def best_tree(scores, labels, keys):
    """The best tree under the documented tie rule (smallest serialisation), or None."""
    finite = np.flatnonzero(np.isfinite(scores))
    if not finite.size:
        return None, -np.inf
    best = scores[finite].max()
    winners = [t for t in finite if scores[t] == best]
    t = min(winners, key=lambda t: keys[t])
    return labels[t], best


def distribution(scores, labels, counts, n_labels):
    """log Z, span-label marginals (n_spans, K) and rule counts (R,) by enumeration."""
    finite = np.isfinite(scores)
    if not finite.any():
        return -np.inf, np.zeros((labels.shape[1], n_labels)), np.zeros(counts.shape[1])
    log_z = logsumexp(scores[finite])
    p = np.exp(np.where(finite, scores - log_z, -np.inf))
    marginals = np.zeros((labels.shape[1], n_labels))
    for row in range(labels.shape[1]):
        on = labels[:, row] >= 0
        np.add.at(marginals[row], labels[on, row], p[on])
    return log_z, marginals, p @ counts


def inside_outside_dp(n, top, bottom, lexical, phrasal, root, rules, span_scores,
                      rule_scores):
    """Plain log-space inside-outside (no rescaling): log Z, marginals, rule counts."""
    rows = span_rows(n)
    K = len(top)
    G = len(root)
    rules = np.asarray(rules).reshape(-1, 3)
    parent, left, right = rules.T if len(rules) else (np.zeros(0, int),) * 3
    top = np.asarray(top)
    bottom = np.asarray(bottom)

    def group(values, by):
        """log-sum-exp of ``values`` per symbol ``by``."""
        out = np.full(G, -np.inf)
        for x in range(G):
            if np.any(by == x):
                with np.errstate(divide="ignore"):
                    out[x] = logsumexp(values[by == x])
        return out

    top_in, bottom_in = {}, {}
    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            s = span_scores[rows[i, j]]
            if length == 1:
                top_in[i, j] = group(np.where(lexical, s, -np.inf), top)
                continue
            values = [rule_scores + top_in[i, k][left] + top_in[k, j][right]
                      for k in range(i + 1, j)]
            bottom_in[i, j] = group(np.concatenate(values), np.tile(parent, j - i - 1))
            top_in[i, j] = group(np.where(phrasal, s + bottom_in[i, j][bottom], -np.inf), top)
    allowed = lexical if n == 1 else phrasal
    s = span_scores[rows[0, n]]
    root_values = s + (0.0 if n == 1 else bottom_in[0, n][bottom])
    root_values = np.where(allowed & np.asarray(root)[top], root_values, -np.inf)
    log_z = logsumexp(root_values)
    marginals = np.zeros((n * (n + 1) // 2, K))
    counts = np.zeros(len(rules))
    if not np.isfinite(log_z):
        return log_z, marginals, counts
    bottom_out = {}
    for length in range(n, 0, -1):
        allowed = lexical if length == 1 else phrasal
        for i in range(n - length + 1):
            j = i + length
            s = span_scores[rows[i, j]]
            if length == n:
                label_out = np.where(allowed & np.asarray(root)[top], 0.0, -np.inf)
            else:
                values, children = [], []
                for e in range(j + 1, n + 1):   # parent [i, e), sibling [j, e)
                    values.append(bottom_out[i, e][parent] + rule_scores + top_in[j, e][right])
                    children.append(left)
                for h in range(i):              # parent [h, j), sibling [h, i)
                    values.append(bottom_out[h, j][parent] + rule_scores + top_in[h, i][left])
                    children.append(right)
                top_out = group(np.concatenate(values), np.concatenate(children))
                label_out = np.where(allowed, top_out[top], -np.inf)
            inside = s if length == 1 else s + bottom_in[i, j][bottom]
            with np.errstate(invalid="ignore"):
                value = label_out + inside - log_z
            marginals[rows[i, j]] = np.where(np.isfinite(value), np.exp(value), 0.0)
            if length > 1:
                values = label_out + s
                bottom_out[i, j] = bottom_out_ij = group(values, bottom)
                for k in range(i + 1, j):
                    value = (bottom_out_ij[parent] + rule_scores + top_in[i, k][left]
                             + top_in[k, j][right] - log_z)
                    counts += np.where(np.isfinite(value), np.exp(value), 0.0)
    return log_z, marginals, counts


def random_cfg_problem(seed, n_sentences=4, max_length=4, n_features=3, all_states=False):
    """A tiny grammar and sentences over span rows, each labelled by one of its trees.

    Returns ``(spec, X, Y, lengths, n_words)``: the grammar as a dict of arrays (for
    :func:`enumerate_trees` and ``Grammar(**spec)``), dense random row features ``X``, the
    span states ``Y`` (0 off the tree, label + 1 on it), the rows per sentence and the words
    per sentence. With ``all_states`` every label and state 0 occur in ``Y`` (as a learner's
    classes must).
    """
    rng = np.random.default_rng(seed)
    for _ in range(1000):
        n_symbols = int(rng.integers(1, 4))
        n_labels = int(rng.integers(2, 5))
        top = rng.integers(n_symbols, size=n_labels)
        bottom = np.where(rng.random(n_labels) < 0.6, top,
                          rng.integers(n_symbols, size=n_labels))
        lexical = rng.random(n_labels) < 0.5
        lexical[0] = True
        phrasal = ~lexical | (rng.random(n_labels) < 0.3)
        root = rng.random(n_symbols) < 0.6
        root[top[phrasal][0] if phrasal.any() else 0] = True
        every_rule = np.array(list(itertools.product(range(n_symbols), repeat=3)))
        n_rules = int(rng.integers(1, every_rule.shape[0] + 1))
        rules = every_rule[rng.choice(every_rule.shape[0], size=n_rules, replace=False)]
        spec = {"top": top, "bottom": bottom, "lexical": lexical, "phrasal": phrasal, "root": root,
                    "rules": rules}
        n_words, trees = [], []
        for _ in range(n_sentences):
            n = int(rng.integers(1, max_length + 1))
            labels, _, _ = enumerate_trees(n, **spec)
            if not labels.shape[0]:
                break
            n_words.append(n)
            trees.append(labels[rng.integers(labels.shape[0])])
        if len(trees) < n_sentences:
            continue
        Y = np.concatenate(trees) + 1
        if all_states and np.unique(Y).shape[0] != n_labels + 1:
            continue
        n_words = np.array(n_words)
        lengths = n_words * (n_words + 1) // 2
        X = rng.normal(size=(Y.shape[0], n_features))
        X[rng.random(X.shape) < 0.3] = 0.0
        return spec, X, Y, lengths, n_words
    raise RuntimeError("no tiny grammar found")


def tree_labelings(spec):
    """``labelings(i, length)`` for tests/_enumeration.py: every tree of an example of
    ``length`` span rows, as span states (0 off the tree)."""

    def labelings(i, length):
        n = round((np.sqrt(8 * length + 1) - 1) / 2)
        return enumerate_trees(n, **spec)[0] + 1

    return labelings
