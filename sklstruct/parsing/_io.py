"""Opening a path (gzip by suffix) or using a caller's open text file."""

import contextlib
import gzip
import os
import zlib


@contextlib.contextmanager
def open_text(source, encoding, mode="r"):
    """Yield a text file for ``source``: a path, or an open text file.

    A path ending in ``.gz``, or (to read) a regular file that starts with
    gzip's magic bytes, is opened through gzip (a pipe is not peeked at: that
    would consume it). A path is opened with ``encoding`` and closed on exit;
    an open file is used as given (its own encoding applies) and left open.
    """
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fsdecode(source)
        if path.endswith(".gz") or mode == "r" and os.path.isfile(path) \
                and _starts_like_gzip(path):
            handle = gzip.open(path, mode + "t", encoding=encoding)
        else:
            handle = open(path, mode, encoding=encoding)
        with handle:
            yield handle
        return
    needed = "read" if mode == "r" else "write"
    if not hasattr(source, needed):
        raise TypeError(
            f"Expected a path or an open text file; got {type(source).__name__}."
        )
    yield source


def _starts_like_gzip(path):
    """Whether the file ``path`` starts with gzip's magic bytes."""
    with open(path, "rb") as raw:
        return raw.read(2) == b"\x1f\x8b"


def _undecodable_line(exc, lines_read):
    """The number of the line that holds the byte a text decoder failed on, or None.

    The decoder fails on a whole chunk of the file, which starts within the line after the
    ``lines_read`` lines already returned; each line ending of the chunk before the byte
    (``\\n``, ``\\r\\n`` or a lone ``\\r``, as universal newlines read them) ends one
    more, for encodings that write them as those bytes."""
    try:
        ascii_newline = "\n".encode(exc.encoding) == b"\n"
    except LookupError:
        return None
    if not ascii_newline or not isinstance(exc.object, (bytes, bytearray)):
        return None
    before = exc.object[:exc.start]
    return lines_read + 1 + before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n")


def numbered_lines(handle):
    """Yield ``(line_number, line)`` with the line ending (and a first line's byte-order
    mark) removed, numbers from 1; a file that does not decode, or a gzip file that is
    truncated or corrupt, is a ``ValueError`` naming the line."""
    lines = iter(handle)
    number = 0
    while True:
        try:
            line = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            where = _undecodable_line(exc, number)
            raise ValueError(
                (f"line {where} is not valid {exc.encoding}" if where else
                 f"the text from line {number + 1} on is not valid {exc.encoding}")
                + f" ({exc.reason}); pass the file's encoding, e.g. encoding='latin-1'.") \
                from exc
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ValueError(f"the gzip file is not complete or not valid from line "
                             f"{number + 1} on ({exc}).") from exc
        number += 1
        if not isinstance(line, str):
            raise TypeError("The file is open in binary mode; open it in text mode.")
        line = line.rstrip("\r\n")
        # (a byte-order mark, as Windows tools write, is not part of the first line's text)
        yield number, line.removeprefix("\ufeff") if number == 1 else line
