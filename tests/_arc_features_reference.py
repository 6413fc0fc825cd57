"""The arc-feature templates of ArcFeatures written out in plain Python, for testing."""

import hashlib

MASK = (1 << 64) - 1
MULTIPLIER = 0x9E3779B97F4A7C15


def mix(key, value):
    key = ((key ^ value) * MULTIPLIER) & MASK
    return key ^ (key >> 29)


def code(text):
    return int.from_bytes(hashlib.blake2b(str(text).encode("utf-8"), digest_size=8).digest(),
                          "little")


def chain(*values):
    key = values[0]
    for value in values[1:]:
        key = mix(key, value)
    return key


def distance_bin(distance):
    if distance <= 5:
        return distance - 1
    return 5 if distance <= 10 else 6


def arc_keys(sentence, h, m, word="form", tag="postag", extra=(), lowercase=True):
    """The set of feature hashes of the arc ``h -> m`` of a sentence of token dicts."""
    tokens = [{key: "<root>" for key in (word, tag, *extra)}] + list(sentence)

    def value(position, key):
        if position < 0:
            return code("<s>")
        if position >= len(tokens):
            return code("</s>")
        text = str(tokens[position][key])
        if key == word and lowercase and position > 0:
            text = text.lower()
        return code(text)

    hw, ht, mw, mt = value(h, word), value(h, tag), value(m, word), value(m, tag)
    hp, hf, mp, mf = value(h - 1, tag), value(h + 1, tag), value(m - 1, tag), value(m + 1, tag)
    joined = (1 if h > m else 0) * 7 + distance_bin(abs(h - m)) + 1
    templates = [
        (1, hw, ht), (2, hw), (3, ht), (4, mw, mt), (5, mw), (6, mt),
        (7, hw, ht, mw, mt), (8, ht, mw, mt), (9, hw, mw, mt), (10, hw, ht, mt),
        (11, hw, ht, mw), (12, hw, mw), (13, ht, mt),
        (14, ht, hf, mp, mt), (15, hp, ht, mp, mt), (16, ht, hf, mt, mf),
        (17, hp, ht, mt, mf),
    ]
    number = 18
    for key in extra:
        he, me = value(h, key), value(m, key)
        templates += [(number, he), (number + 1, me), (number + 2, he, me),
                      (number + 3, he, mt), (number + 4, ht, me)]
        number += 5
    between = {value(b, tag) for b in range(min(h, m) + 1, max(h, m))}
    templates += [(number, ht, bt, mt) for bt in between]
    keys = set()
    for parts in templates:
        key = chain(*parts)
        keys.add(key)
        keys.add(mix(key, joined))
    return keys
