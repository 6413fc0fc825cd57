"""Sphinx configuration of the sklstruct documentation.

Build with ``make doc`` (with the example gallery) or ``make doc-nogallery`` (the gallery pages
are generated from the scripts without running them).
"""

import importlib
import inspect
import os
import pkgutil
import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent
ROOT = DOC.parent
sys.path.insert(0, str(DOC / "_ext"))

import sklstruct  # noqa: E402

project = "sklstruct"
author = "the sklstruct developers"
copyright = "the sklstruct developers"
version = release = sklstruct.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "benchmark_tables",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip"]
templates_path = ["_templates"]
root_doc = "index"
default_role = "literal"
pygments_style = "sphinx"
suppress_warnings = []

# Every cross-reference to the project's public API must resolve (the build runs with -W).
# References to other packages stay unlinked (no intersphinx: the build needs no network),
# and so do those to private objects, which the developer pages and the structure API
# name for their readers without documenting them.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(sklearn|nltk|pandas|numpy|scipy|dask|io)(\..*)?"),
    (r"py:.*", r"(.*\.)?_[A-Za-z].*"),  # a private module, class or method
    (r"py:.*", r"sklstruct\.base\..*|BaseStructuredClassifier.*|PairwiseGraphBase|hinge_terms"
               r"|check_sparse_arrays"),
]

# ------------------------------------------------------------------ autodoc / numpydoc
autosummary_ignore_module_all = False
autodoc_default_options = {"members": True, "inherited-members": True}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# A fitted attribute's name in a type (``w : ndarray of shape (size_joint_feature_,)``) would
# be read as an rst reference; such names are set as literals before numpydoc reads the
# docstring.
_TYPE_LINE = re.compile(r"^(\s*[\w, *]+ : )(.*)$")
_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w])([A-Za-z]\w*_)(?=[^\w`]|$)")


def _literal_attribute_names(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        match = _TYPE_LINE.match(line)
        if match:
            lines[i] = match.group(1) + _TRAILING_UNDERSCORE.sub(r"``\1``", match.group(2))


def _skip_member(app, what, name, obj, skip, options):
    """Leave out what scikit-learn's base classes add (parameters, metadata routing) and the
    mixin methods of ``collections.abc`` (``PackedSequences``' ``count`` and ``index``)."""
    module = getattr(obj, "__module__", None) or ""
    if module.startswith(("sklearn", "collections.abc")) or (
            name.startswith("set_") and name.endswith("_request")):
        return True
    return skip


# A page added to doc/user_guide/ and not yet listed in its index is appended to the index's
# toctree (in name order), so that it is built and reachable.
_USER_GUIDE_INDEX = "user_guide/index"


def _append_unlisted_pages(app, docname, source):
    if docname != _USER_GUIDE_INDEX:
        return
    listed = set(re.findall(r"^   ([\w/.-]+)\s*$", source[0], re.M))
    extra = sorted(path.stem for path in (DOC / "user_guide").glob("*.rst")
                   if path.stem not in listed and path.stem != "index")
    if extra:
        source[0] = source[0].rstrip("\n") + "\n" + "".join(f"   {name}\n" for name in extra)


def _reread_user_guide_index(app, env, added, changed, removed):
    return [_USER_GUIDE_INDEX] if added or removed else []


def setup(app):
    app.connect("source-read", _append_unlisted_pages)
    app.connect("env-get-outdated", _reread_user_guide_index)
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-docstring", _literal_attribute_names, priority=400)

# ------------------------------------------------------------------ the API reference
# Generated from the ``__all__`` of each public module, so that a name added to ``__all__``
# appears without editing this folder. Public modules are the package itself and every
# subpackage or module, at any depth, whose path has no leading underscore, except those
# whose public names are all re-exported by the package (``learners``) and the estimator
# base (``base``).
API_MODULES_FIRST = ["sklstruct", "sklstruct.structures", "sklstruct.datasets",
                     "sklstruct.metrics", "sklstruct.preprocessing"]
API_SKIP = {"sklstruct.learners", "sklstruct.base"}
API_TITLES = {
    "sklstruct": "Estimators and structures",
    "sklstruct.structures": "Writing structures",
    "sklstruct.datasets": "Data sets",
    "sklstruct.metrics": "Metrics and scorers",
    "sklstruct.preprocessing": "Feature extraction",
    "sklstruct.parsing": "Parsing: treebanks, trees, parsers and parser metrics",
    "sklstruct.utils": "Utilities",
}


def _public_modules():
    """The package, its public modules and subpackages, and theirs (a public submodule such
    as ``sklstruct.utils.estimator_checks`` is imported by its full name, not re-exported)."""
    found = []
    for info in pkgutil.walk_packages(sklstruct.__path__, "sklstruct."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts) or \
                any(info.name == skip or info.name.startswith(skip + ".") for skip in API_SKIP):
            continue
        found.append(info.name)
    rest = sorted(set(found) - set(API_MODULES_FIRST))
    return API_MODULES_FIRST + rest


def _write_api_listing(path):
    """Write the autosummary tables of every public module (included by ``api.rst``)."""
    seen = set()
    lines = []
    for name in _public_modules():
        module = importlib.import_module(name)
        names = [n for n in getattr(module, "__all__", []) if not n.startswith("__")]
        groups = {"Classes": [], "Functions": [], "Other objects": []}
        for member in names:
            obj = getattr(module, member)
            if id(obj) in seen:
                continue  # documented under the package that exports it first
            seen.add(id(obj))
            kind = ("Classes" if inspect.isclass(obj) else
                    "Functions" if inspect.isfunction(obj) else "Other objects")
            groups[kind].append(member)
        if not any(groups.values()):
            continue
        title = f":mod:`{name}`"
        if name in API_TITLES:
            title = f"{API_TITLES[name]}: {title}"
        lines += [title, "-" * len(title), "", f".. automodule:: {name}",
                  "   :no-members:", "   :no-inherited-members:", ""]
        for kind, members in groups.items():
            if not members:
                continue
            lines += [f".. rubric:: {kind}", "", f".. currentmodule:: {name}", "",
                      ".. autosummary::", "   :toctree: generated/",
                      "   :template: " + ("class.rst" if kind == "Classes" else "base.rst"),
                      "   :nosignatures:", ""]
            lines += [f"   {member}" for member in sorted(members, key=str.lower)] + [""]
    text = "\n".join(lines)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


# (written before autosummary reads it, beside api.rst so that the stub paths agree; it is a
# document only through api.rst's include)
_write_api_listing(DOC / "_api_listing.rst")
autosummary_generate = ["_api_listing.rst"]
exclude_patterns.append("_api_listing.rst")

# ------------------------------------------------------------------ the example gallery
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    # every examples/plot_*.py is a gallery example; the other scripts there (the demo of
    # ``make demo``, scripts imported by the tests) are not. EXAMPLES_PATTERN (a regular
    # expression on the path) runs only some of them; the others get pages without output.
    "filename_pattern": os.environ.get("EXAMPLES_PATTERN", r"plot_"),
    "ignore_pattern": r"(^|[/\\])(?!plot_)[^/\\]+\.py$",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "min_reported_time": 0,
    "abort_on_example_error": True,
    "matplotlib_animations": False,
    "reset_modules": ("matplotlib",),
    "capture_repr": ("_repr_html_",),
    "image_srcset": [],
    # "Examples using ..." on the API pages
    "doc_module": ("sklstruct",),
    "backreferences_dir": "generated/backreferences",
    "inspect_global_variables": False,
}

# ------------------------------------------------------------------ HTML output
html_theme = "pydata_sphinx_theme"
html_title = f"sklstruct {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_center": [],
    "footer_end": ["sphinx-version"],
}
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
