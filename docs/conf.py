"""Sphinx configuration of the sklearn_calib documentation (``make docs``)."""

import os
import re
import shutil
import sys
from pathlib import Path

from docutils import nodes

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS))

from api_pages import find_object, write_api_pages  # noqa: E402

import sklearn_calib  # noqa: E402

# The examples train small networks: one torch thread each unless the caller says otherwise.
os.environ.setdefault("OMP_NUM_THREADS", "1")

project = "sklearn_calib"
author = "sklearn_calib developers"
copyright = "sklearn_calib developers"
release = version = sklearn_calib.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

exclude_patterns = ["_build", "api_pages.py"]
templates_path = ["_templates"]
root_doc = "index"

# Broken references are errors (the build runs with -W): every ``:func:``, ``:class:``,
# See Also entry and so on must resolve, except to other projects' objects, for which the
# build has no inventories (it runs without network access).
nitpicky = True
nitpick_ignore_regex = [
    (
        "py:.*",
        r"(numpy|np|scipy|sklearn|skorch|torch|joblib|matplotlib|dask|distributed"
        r"|skops|pandas)(\..*)?",
    ),
]

# API reference: the pages come from the public modules' __all__ (api_pages.py).
HOMES = write_api_pages(DOCS / "api")
autosummary_generate = True
autodoc_default_options = {"member-order": "groupwise"}
autodoc_typehints = "none"
# Members without a docstring of their own stay out, rather than showing their base's.
autodoc_inherit_docstrings = False
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "doc_module": ("sklearn_calib",),
    "backreferences_dir": "api/backreferences",
    "reference_url": {"sklearn_calib": None},
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"sklearn_calib {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    # An example's page is one script: its code and output get the secondary sidebar's
    # width instead of an outline of its few sections.
    "secondary_sidebar_items": {
        "**": ["page-toc"],
        **{f"auto_examples/{script.stem}": [] for script in (ROOT / "examples").glob("plot_*.py")},
    },
}
# The outline of a class page names its methods without the class ("fit()").
toc_object_entries_show_parents = "hide"
html_show_sourcelink = False
# Layout fixes: a wider article column, wrapped code lines (docs/_static/custom.css).
html_static_path = ["_static"]
html_css_files = ["custom.css"]


def _candidates(node):
    """Full paths a Python reference may mean: as written, then in its class, its module
    and the module's packages (a submodule's docstring names its package's classes)."""
    target = node["reftarget"].lstrip("~.")
    module, cls = node.get("py:module"), node.get("py:class")
    paths = [target]
    if module:
        if cls:
            paths.append(f"{module}.{cls}.{target}")
        parts = module.split(".")
        paths += [".".join([*parts[:end], target]) for end in range(len(parts), 0, -1)]
    return paths


def resolve_public_paths(app, env, node, contnode):
    """Resolve the references the Python domain cannot, where they name real objects.

    A public name is documented once, at its home (``api_pages.py``); a reference through
    another public path (``sklearn_calib.HistogramBinning``,
    ``sklearn_calib.scoring.expected_calibration_error``) or relative to a submodule
    links there. A reference to an object that exists but is not documented (a private
    module such as ``sklearn_calib.metrics._core._binning``, an inherited method) is shown as
    text, unlinked. Anything else stays unresolved, and the build fails on it.
    """
    if node.get("refdomain") != "py":
        return None
    domain = env.get_domain("py")
    candidates = _candidates(node)
    for path in candidates:
        module, _, name = path.rpartition(".")
        home = HOMES.get((module, name))
        if home is not None:
            for reftype in (node["reftype"], "obj"):
                resolved = domain.resolve_xref(
                    env, node["refdoc"], app.builder, reftype, f"{home}.{name}", node, contnode
                )
                if resolved is not None:
                    return resolved
    if any(find_object(path) for path in candidates):
        return contnode
    return None


def skip_routing_setters(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_*_request`` methods.

    Their docstrings refer to scikit-learn's glossary and user guide, which this build
    cannot link to; scikit-learn documents metadata routing.
    """
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


#: The committed reports of ``benchmarks/``, copied into the site's ``reports/`` folder.
REPORTS = ROOT / "benchmarks" / "reports"


def reports_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``:reports:`PATH``` or ``:reports:`title <PATH>```: a link to the copy of the
    committed report ``benchmarks/reports/PATH`` in the site (an error if it is absent)."""
    match = re.fullmatch(r"(.*?)\s*<([^<>]+)>", text, re.DOTALL)
    title, path = (match.group(1), match.group(2)) if match else (text, text)
    if not (REPORTS / path).is_file():
        message = inliner.reporter.error(f"no report benchmarks/reports/{path}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    up = "../" * inliner.document.settings.env.docname.count("/")
    return [nodes.reference(rawtext, title, refuri=f"{up}reports/{path}")], []


def copy_reports(app, exception):
    """Copy the committed reports (Markdown, CSV and figures) into the built site."""
    if exception is None and app.builder.format == "html":
        shutil.copytree(REPORTS, Path(app.outdir) / "reports", dirs_exist_ok=True)


def setup(app):
    app.add_role("reports", reports_role)
    app.connect("build-finished", copy_reports)
    app.connect("missing-reference", resolve_public_paths)
    app.connect("autodoc-skip-member", skip_routing_setters)
