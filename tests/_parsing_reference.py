"""Test-only helpers for the parsing tests: random trees."""


def random_tree(rng, words, labels, tags, max_children=4):
    """A random tree over ``words``: random splits, labels and tags, some unary nodes."""

    def build(lo, hi, depth):
        if hi - lo == 1 and (depth > 0 and rng.random() < 0.6):
            return (tags[rng.integers(len(tags))], words[lo])
        if hi - lo == 1:
            return (labels[rng.integers(len(labels))], build(lo, hi, depth + 1))
        n_children = int(rng.integers(2, min(max_children, hi - lo) + 1))
        cuts = sorted(rng.choice(range(lo + 1, hi), n_children - 1, replace=False).tolist())
        bounds = [lo, *cuts, hi]
        children = [build(a, b, depth + 1) for a, b in zip(bounds, bounds[1:])]
        node = (labels[rng.integers(len(labels))], *children)
        if rng.random() < 0.15:
            node = (labels[rng.integers(len(labels))], node)
        return node

    return build(0, len(words), 0)
