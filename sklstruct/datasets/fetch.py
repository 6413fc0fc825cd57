"""Download data sets into the data home from the command line.

Usage::

    python -m sklstruct.datasets.fetch NAME [NAME ...] [--data-home DIR]

NAME is ``conll2000``, ``conll2002`` (Spanish and Dutch) or ``ocr_letters``. The files go
where the loaders read them: ``--data-home``, else ``$SKLSTRUCT_DATA``, else
``~/sklstruct_data``; files already there are kept. The sources and checks are those of the
loaders' ``download_if_missing=True``. The exit status is 0 when every file is in place, and
1 after one message on standard error (the data set, the sources tried and what went wrong,
where to place the files by hand) when one could not be fetched. The 32 x 32 Weizmann horses
have no public source and are not fetched.
"""

import argparse
import logging
import sys

from ._fetch import DATASETS, fetch_files
from ._loaders import get_data_home

PROG = "python -m sklstruct.datasets.fetch"


def main(argv=None):
    """Fetch the data sets named in ``argv``; return the exit status (0 or 1).

    Parameters
    ----------
    argv : list of str, default=None
        The arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 when every file is in place, 1 when one could not be fetched.
    """
    parser = argparse.ArgumentParser(
        prog=PROG, description="Download data sets into the data home of sklstruct's loaders.")
    parser.add_argument("names", nargs="+", choices=sorted(DATASETS), metavar="NAME",
                        help=f"data set to fetch: {', '.join(sorted(DATASETS))}")
    parser.add_argument("--data-home", default=None,
                        help="folder of the data sets (default: $SKLSTRUCT_DATA, else "
                             "~/sklstruct_data)")
    args = parser.parse_args(argv)
    home = get_data_home(args.data_home)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("sklstruct.datasets._fetch")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        for name in dict.fromkeys(args.names):
            fetch_files(home, DATASETS[name])
            print(f"{name}: in {home}")
    except OSError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
