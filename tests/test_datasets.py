import gzip
import os

import numpy as np
import pytest

from sklstruct.datasets import (
    get_data_home,
    load_conll2000,
    load_conll2002,
    load_ocr_letters,
    load_ocr_sample,
)

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_HOME = os.path.join(PROJECT_ROOT, "..", "shared", "data")
SAMPLE_FILE = os.path.join(
    PROJECT_ROOT, "sklstruct", "datasets", "data", "ocr_sample.npz"
)

needs_data = pytest.mark.skipif(
    not os.path.isdir(DATA_HOME), reason=f"benchmark data not found at {DATA_HOME}"
)


@pytest.fixture(scope="module")
def ocr():
    if not os.path.isdir(DATA_HOME):
        pytest.skip(f"benchmark data not found at {DATA_HOME}")
    return load_ocr_letters(DATA_HOME, download_if_missing=False)


def _write_gz(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text)


def _check_ocr_bunch(bunch):
    n_words = len(bunch.data)
    assert len(bunch.target) == len(bunch.words) == bunch.folds.shape[0] == n_words
    assert bunch.folds.dtype == np.int64
    assert isinstance(bunch.DESCR, str) and bunch.DESCR
    for pixels, letters, word in zip(bunch.data, bunch.target, bunch.words):
        assert pixels.dtype == np.float64
        assert pixels.shape == (len(word), 128)
        assert letters.dtype == np.dtype("<U1")
        assert "".join(letters) == word
    pixels = np.concatenate(bunch.data)
    assert set(np.unique(pixels)) <= {0.0, 1.0}


# --------------------------------------------------------------------------
# OCR letters


@needs_data
def test_ocr_letters_counts(ocr):
    _check_ocr_bunch(ocr)
    assert len(ocr.data) == 6877
    assert sum(len(w) for w in ocr.words) == 52152
    assert ocr.words[0] == "ommanding"
    assert np.bincount(ocr.folds).tolist() == [
        626, 704, 684, 698, 693, 651, 739, 717, 690, 675
    ]
    letters = np.concatenate(ocr.target)
    assert np.sum(letters == "a") == 4034
    assert np.sum(letters == "z") == 1094
    assert np.mean(np.concatenate(ocr.data)) == pytest.approx(0.2197, abs=1e-4)


@needs_data
def test_ocr_letters_fold_selection(ocr):
    fold1 = load_ocr_letters(DATA_HOME, folds=1, download_if_missing=False)
    _check_ocr_bunch(fold1)
    assert len(fold1.data) == 704
    assert sum(len(x) for x in fold1.data) == 5375
    assert np.all(fold1.folds == 1)

    several = load_ocr_letters(DATA_HOME, folds=(2, 0), download_if_missing=False)
    expected = np.flatnonzero(np.isin(ocr.folds, [0, 2]))
    assert len(several.data) == expected.size == 626 + 684
    assert several.words == [ocr.words[i] for i in expected]
    for i, pixels in zip(expected[::97], several.data[::97]):
        np.testing.assert_array_equal(pixels, ocr.data[i])


@pytest.mark.parametrize("folds", [10, -1, [0, 10], range(5, 12)])
def test_ocr_letters_bad_fold_value(folds, tmp_path):
    with pytest.raises(ValueError, match="between 0 and 9"):
        load_ocr_letters(tmp_path, folds=folds)


@pytest.mark.parametrize("folds", ["1", 1.0, [0, 1.5], True, [None]])
def test_ocr_letters_bad_fold_type(folds, tmp_path):
    with pytest.raises(TypeError, match="folds"):
        load_ocr_letters(tmp_path, folds=folds)


def test_ocr_letters_empty_folds(tmp_path):
    with pytest.raises(ValueError, match="at least one fold"):
        load_ocr_letters(tmp_path, folds=[])


def _letter_line(letter_id, letter, next_id, word_id, position, fold, pixels):
    fields = [letter_id, letter, next_id, word_id, position, fold, *pixels]
    return "\t".join(str(f) for f in fields)


def _small_ocr_lines(rng):
    """Three words ('ab', 'cde', 'f') in folds 3, 5 and 3."""
    words = [("ab", 3), ("cde", 5), ("f", 3)]
    lines, pixels, letter_id = [], [], 1
    for word_id, (word, fold) in enumerate(words, start=1):
        for position, letter in enumerate(word, start=1):
            pix = rng.integers(0, 2, 128)
            next_id = letter_id + 1 if position < len(word) else -1
            lines.append(
                _letter_line(letter_id, letter, next_id, word_id, position, fold, pix)
            )
            pixels.append(pix)
            letter_id += 1
    return lines, np.array(pixels, dtype=np.float64)


def test_ocr_letters_parses_small_file_in_id_order(tmp_path):
    rng = np.random.default_rng(0)
    lines, pixels = _small_ocr_lines(rng)
    shuffled = [lines[i] for i in rng.permutation(len(lines))]
    _write_gz(tmp_path / "ocr_letters" / "letter.data.gz", "\n".join(shuffled) + "\n")

    bunch = load_ocr_letters(tmp_path)
    _check_ocr_bunch(bunch)
    assert bunch.words == ["ab", "cde", "f"]
    assert bunch.folds.tolist() == [3, 5, 3]
    np.testing.assert_array_equal(np.concatenate(bunch.data), pixels)

    fold3 = load_ocr_letters(str(tmp_path), folds=[3])
    assert fold3.words == ["ab", "f"]
    np.testing.assert_array_equal(fold3.data[1], pixels[5:6])


def test_ocr_letters_rejects_malformed_file(tmp_path):
    rng = np.random.default_rng(0)
    lines, _ = _small_ocr_lines(rng)
    path = tmp_path / "ocr_letters" / "letter.data.gz"

    _write_gz(path, "\n".join(lines[:2] + [lines[2].replace("\t0\t", "\tx\t", 1)]))
    with pytest.raises(ValueError, match="letter.data"):
        load_ocr_letters(tmp_path)

    _write_gz(path, "\n")
    with pytest.raises(ValueError, match="no letters"):
        load_ocr_letters(tmp_path)

    broken = lines[0].split("\t")
    broken[3] = "2"  # letter 1 in word 2, then letter 2 back in word 1
    _write_gz(path, "\n".join([("\t".join(broken))] + lines[1:]))
    with pytest.raises(ValueError, match="contiguous"):
        load_ocr_letters(tmp_path)


def test_ocr_letters_refuses_a_repeated_letter_line(tmp_path):
    rng = np.random.default_rng(0)
    lines, _ = _small_ocr_lines(rng)
    _write_gz(tmp_path / "ocr_letters" / "letter.data.gz", "\n".join(lines[:2] + lines[1:]))
    with pytest.raises(ValueError, match="letter ids must be unique"):
        load_ocr_letters(tmp_path)


def test_ocr_letters_refuses_bad_ids_and_folds(tmp_path):
    rng = np.random.default_rng(0)
    lines, _ = _small_ocr_lines(rng)
    path = tmp_path / "ocr_letters" / "letter.data.gz"
    for field, value, message in [(0, "x1", "non-numeric letter id"),
                                  (5, "10", "fold values must be between 0 and 9"),
                                  (5, "-1", "fold values must be between 0 and 9")]:
        broken = lines[0].split("\t")
        broken[field] = value
        _write_gz(path, "\n".join(["\t".join(broken)] + lines[1:]))
        with pytest.raises(ValueError, match=message):
            load_ocr_letters(tmp_path)


# --------------------------------------------------------------------------
# Embedded OCR sample (never skipped)


def test_ocr_sample():
    sample = load_ocr_sample()
    _check_ocr_bunch(sample)
    assert len(sample.data) == 300
    assert np.bincount(sample.folds).tolist() == [150, 150]
    assert len(set(np.concatenate(sample.target))) >= 20
    assert os.path.getsize(SAMPLE_FILE) < 100_000
    with np.load(SAMPLE_FILE, allow_pickle=False) as npz:
        assert npz["pixels"].dtype == np.uint8
        assert npz["letters"].dtype == np.uint8
        assert int(npz["lengths"].sum()) == sum(len(w) for w in sample.words)


@needs_data
def test_ocr_sample_matches_full_data(ocr):
    sample = load_ocr_sample()
    with np.load(SAMPLE_FILE, allow_pickle=False) as npz:
        index = npz["word_ids"].astype(np.intp) - 1
    assert np.all(np.diff(index) > 0)
    assert sample.words == [ocr.words[i] for i in index]
    np.testing.assert_array_equal(sample.folds, ocr.folds[index])
    for i, pixels in zip(index, sample.data):
        np.testing.assert_array_equal(pixels, ocr.data[i])


# --------------------------------------------------------------------------
# CoNLL-2000 and CoNLL-2002


def _check_conll_bunch(bunch):
    assert len(bunch.words) == len(bunch.pos) == len(bunch.target)
    for words, pos, tags in zip(bunch.words, bunch.pos, bunch.target):
        assert len(words) == len(pos) == tags.shape[0] > 0
        assert isinstance(words[0], str) and isinstance(pos[0], str)
        assert tags.dtype.kind == "U"
    assert isinstance(bunch.DESCR, str) and bunch.DESCR


@needs_data
@pytest.mark.parametrize(
    "subset, n_sentences, n_tokens, n_chunks",
    [("train", 8936, 211727, 106978), ("test", 2012, 47377, 23852)],
)
def test_conll2000_counts(subset, n_sentences, n_tokens, n_chunks):
    conll = load_conll2000(DATA_HOME, subset=subset, download_if_missing=False)
    _check_conll_bunch(conll)
    assert len(conll.words) == n_sentences
    assert sum(len(w) for w in conll.words) == n_tokens
    tags = np.concatenate(conll.target)
    assert np.char.startswith(tags, "B-").sum() == n_chunks
    if subset == "train":
        assert conll.words[0][:2] == ["Confidence", "in"]
        assert conll.pos[0][:2] == ["NN", "IN"]
        assert conll.target[0][:2].tolist() == ["B-NP", "B-PP"]
        assert len(np.unique(tags)) == 22
    else:
        assert "I-LST" in set(tags.tolist())


@needs_data
@pytest.mark.parametrize(
    "subset, n_sentences, n_tokens, n_entities, max_length",
    [
        ("train", 8323, 264715, 18797, 1238),
        ("testa", 1915, 52923, 4351, 141),
        ("testb", 1517, 51533, 3558, 202),
    ],
)
def test_conll2002_counts(subset, n_sentences, n_tokens, n_entities, max_length):
    ner = load_conll2002(DATA_HOME, subset=subset, language="esp",
                         download_if_missing=False)
    _check_conll_bunch(ner)
    assert len(ner.words) == n_sentences
    assert sum(len(w) for w in ner.words) == n_tokens
    assert max(len(w) for w in ner.words) == max_length
    tags = np.concatenate(ner.target)
    assert np.char.startswith(tags, "B-").sum() == n_entities
    assert len(np.unique(tags)) == 9


def test_conll2002_skips_docstart(tmp_path):
    text = (
        "-DOCSTART- -DOCSTART- O\n\n"
        "El DA O\nReal NC B-ORG\nMadrid NC I-ORG\n\n"
        "-DOCSTART- -DOCSTART- O\n"
        "Ganó VMI O\n"
        "\n\n"
    )
    _write_gz(tmp_path / "conll2002" / "esp.testa.gz", text)
    ner = load_conll2002(tmp_path, subset="testa")
    assert ner.words == [["El", "Real", "Madrid"], ["Ganó"]]
    assert ner.pos == [["DA", "NC", "NC"], ["VMI"]]
    assert [t.tolist() for t in ner.target] == [["O", "B-ORG", "I-ORG"], ["O"]]


def test_conll_file_without_trailing_blank_line(tmp_path):
    _write_gz(tmp_path / "conll2000" / "test.txt.gz", "He PRP B-NP\nran VBD B-VP")
    conll = load_conll2000(tmp_path, subset="test")
    assert conll.words == [["He", "ran"]]


def test_conll_files_as_other_tools_write_them(tmp_path):
    """A byte-order mark and CRLF endings read as the plain file; a file in another
    encoding, a truncated gzip file and an empty file are refused naming the file."""
    text = "He PRP B-NP\nran VBD B-VP\n\nShe PRP B-NP\n"
    path = tmp_path / "conll2000" / "test.txt.gz"
    _write_gz(path, text)
    plain = load_conll2000(tmp_path, subset="test")
    _write_gz(path, "\ufeff" + text.replace("\n", "\r\n"))
    marked = load_conll2000(tmp_path, subset="test")
    assert marked.words == plain.words == [["He", "ran"], ["She"]]
    assert marked.pos == plain.pos
    with gzip.open(path, "wb") as f:
        f.write("Curaçao NNP B-NP\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"test.txt.gz, line 1: not valid utf-8"):
        load_conll2000(tmp_path, subset="test")
    whole = gzip.compress(("He PRP B-NP\n" * 2000).encode())
    path.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ValueError, match="test.txt.gz is not a complete gzip file"):
        load_conll2000(tmp_path, subset="test")
    _write_gz(path, "\n\n")
    with pytest.raises(ValueError, match="holds no sentences"):
        load_conll2000(tmp_path, subset="test")


def test_data_home_may_be_bytes(tmp_path):
    _write_gz(tmp_path / "conll2000" / "test.txt.gz", "He PRP B-NP\n")
    assert get_data_home(os.fsencode(tmp_path)) == str(tmp_path)
    assert load_conll2000(os.fsencode(tmp_path), subset="test").words == [["He"]]


def test_conll_malformed_line(tmp_path):
    _write_gz(tmp_path / "conll2000" / "train.txt.gz", "He PRP B-NP\nran VBD\n\n")
    with pytest.raises(ValueError, match="line 2: expected 3 columns"):
        load_conll2000(tmp_path)


@pytest.mark.parametrize(
    "loader, kwargs",
    [
        (load_conll2000, {"subset": "dev"}),
        (load_conll2000, {"subset": "TRAIN"}),
        (load_conll2002, {"subset": "test"}),
        (load_conll2002, {"language": "eng"}),
        (load_conll2002, {"subset": None}),
    ],
)
def test_conll_bad_options(loader, kwargs, tmp_path):
    with pytest.raises(ValueError, match="must be one of"):
        loader(tmp_path, **kwargs)


# --------------------------------------------------------------------------
# data_home resolution and missing files


@pytest.mark.parametrize(
    "loader, kwargs, relative",
    [
        (load_ocr_letters, {}, ("ocr_letters", "letter.data.gz")),
        (load_conll2000, {"subset": "test"}, ("conll2000", "test.txt.gz")),
        (load_conll2002, {"subset": "testb"}, ("conll2002", "esp.testb.gz")),
    ],
)
def test_missing_file_message(loader, kwargs, relative, tmp_path):
    expected = os.path.join(str(tmp_path), *relative)
    with pytest.raises(FileNotFoundError) as excinfo:
        loader(tmp_path, download_if_missing=False, **kwargs)
    message = str(excinfo.value)
    assert expected in message
    assert "download_if_missing=False" in message
    assert f"python -m sklstruct.datasets.fetch {relative[0]}" in message
    assert "SKLSTRUCT_DATA" in message
    assert os.listdir(tmp_path) == []


def test_missing_horses_message(tmp_path):
    from sklstruct.datasets import load_weizmann_horses

    with pytest.raises(FileNotFoundError, match="no public source") as excinfo:
        load_weizmann_horses(tmp_path)
    assert os.path.join(str(tmp_path), "weizmann_horse", "horses_32x32.npz") in str(
        excinfo.value)


@pytest.mark.parametrize("value", [None, 0, 1, "yes"])
def test_download_if_missing_must_be_bool(value, tmp_path):
    with pytest.raises(TypeError, match="download_if_missing must be a bool"):
        load_conll2000(tmp_path, download_if_missing=value)


def test_data_home_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("SKLSTRUCT_DATA", str(tmp_path / "from_env"))
    assert get_data_home() == str(tmp_path / "from_env")
    assert get_data_home(tmp_path / "explicit") == str(tmp_path / "explicit")
    with pytest.raises(FileNotFoundError, match="from_env"):
        load_conll2000(download_if_missing=False)

    monkeypatch.delenv("SKLSTRUCT_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == os.path.join(str(tmp_path / "home"), "sklstruct_data")
    assert not os.path.exists(get_data_home())


def test_grid_pixel_features_shapes_and_validation():
    from sklstruct.datasets import grid_pixel_features

    gray = np.random.default_rng(0).integers(0, 256, size=(2, 4, 6)).astype(np.uint8)
    features = grid_pixel_features(gray, n_bins=3)
    assert len(features) == 2 and features[0].shape == (24, 4 + 3 * 3)
    np.testing.assert_allclose(features[0][:, 1], gray[0].ravel() / 255.0)
    for bins in (features[0][:, 4:7], features[0][:, 7:10], features[0][:, 10:13]):
        np.testing.assert_array_equal(bins.sum(axis=1), 1.0)  # one-hot bins
    with pytest.raises(ValueError, match="n_bins"):
        grid_pixel_features(gray, n_bins=0)
    with pytest.raises(ValueError, match=r"\[0, 255\]"):
        grid_pixel_features(gray.astype(float) * 2.0)
    with pytest.raises(ValueError, match="shape"):
        grid_pixel_features(gray[0])


def test_weizmann_horses_refuses_inconsistent_arrays(tmp_path):
    from sklstruct.datasets import load_weizmann_horses

    folder = tmp_path / "weizmann_horse"
    folder.mkdir()
    good = dict(gray=np.zeros((4, 8, 8), np.uint8), rgb=np.zeros((4, 8, 8, 3), np.uint8),
                mask=np.ones((4, 8, 8), np.uint8), names=np.array(["a", "b", "c", "d"]))
    np.savez(folder / "horses_32x32.npz", **good)
    assert load_weizmann_horses(tmp_path).masks.sum() == 256
    for change, match in [({"gray": good["gray"][:2]}, "disagree"),
                          ({"mask": good["mask"] * 255}, "0 \\(background\\) and 1"),
                          ({"names": None}, "lacks the arrays")]:
        arrays = {**good, **change}
        np.savez(folder / "horses_32x32.npz",
                 **{k: v for k, v in arrays.items() if v is not None})
        with pytest.raises(ValueError, match=match):
            load_weizmann_horses(tmp_path)


@needs_data
def test_weizmann_horses():
    from sklstruct.datasets import load_weizmann_horses

    horses = load_weizmann_horses(DATA_HOME)
    assert horses.gray.shape == (328, 32, 32) and horses.rgb.shape == (328, 32, 32, 3)
    assert horses.masks.shape == (328, 32, 32) and set(np.unique(horses.masks)) == {0, 1}
    assert 0.2 < horses.masks.mean() < 0.3  # foreground fraction 0.251 (data README)
    assert horses.names[0] == "horse001"


def test_generators_refuse_counts_that_are_not_ints():
    """make_dependency_treebank took 2.7 for 2 sentences and "3" for 3, and
    make_sparse_chain(n_samples=True) failed deep inside numpy."""
    from sklstruct.datasets import make_dependency_treebank, make_sparse_chain

    for bad in (2.7, "3", True, 0):
        with pytest.raises(ValueError, match="n_sentences"):
            make_dependency_treebank(bad)
    assert len(make_dependency_treebank(np.int64(3), random_state=0).sentences) == 3
    for name in ("n_samples", "length"):
        with pytest.raises(TypeError, match=name):
            make_sparse_chain(**{name: True})


def test_an_ocr_selection_without_words_is_empty_in_every_field():
    """A fold without words gave one empty word in data and target (np.split of nothing)
    beside no words and no folds."""
    from sklstruct.datasets._loaders import _ocr_bunch

    bunch = _ocr_bunch(np.array([], dtype="<U1"), np.array([], dtype=np.int64),
                       np.array([], dtype=np.int64), np.zeros((0, 128)), "")
    assert len(bunch.data) == len(bunch.target) == len(bunch.words) == len(bunch.folds) == 0
    two = _ocr_bunch(np.array(list("abc")), np.array([1, 2]), np.array([0, 1]),
                     np.zeros((3, 128)), "")
    assert bunch.keys() == two.keys() and two.words == ["a", "bc"]
    assert [len(x) for x in two.data] == [1, 2]
