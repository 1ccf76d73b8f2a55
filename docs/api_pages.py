"""Write the API reference's pages from the ``__all__`` of sklearn_calib's public modules.

A public module is one whose dotted path has no component starting with ``_``; it defines
``__all__`` (``tests/test_architecture.py`` checks it). Every name in an ``__all__`` gets
documented once, on the page of its *home*: the deepest public package (a package's
``__init__``) exporting it among the packages its ``__module__`` lives in, else the
deepest public module exporting it there (``expected_calibration_error`` lives in
``sklearn_calib.metrics._functions._binned``, so its home is ``sklearn_calib.metrics``;
:mod:`sklearn_calib.scoring` and the top-level package list it with a link there;
``TemperatureScaling`` lives in the public ``sklearn_calib.calibrators.temperature``, whose
page links to its home ``sklearn_calib.calibrators``; ``make_calibration_scorer``, defined
in the module ``sklearn_calib.scoring``, is at home there). Constants have no
``__module__``: their home is the first public module exporting them. A name added to an
``__all__`` thus appears in the reference without editing the documentation.
"""

import importlib
import inspect
import pkgutil
from pathlib import Path

PACKAGE = "sklearn_calib"


def _module_names():
    package = importlib.import_module(PACKAGE)
    names = [PACKAGE]
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{PACKAGE}."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


def public_modules():
    """Return the public modules, the top-level package first, then by dotted path.

    Returns
    -------
    modules : list of module
        The modules without a private component in their path.
    """
    modules = [importlib.import_module(name) for name in _module_names()]
    return sorted(modules, key=lambda module: (module.__name__ != PACKAGE, module.__name__))


def find_object(path):
    """Return whether ``path`` names an importable object (a module or an attribute).

    Parameters
    ----------
    path : str
        Dotted path, such as ``"sklearn_calib.metrics._core._binning.assign_bins"``.

    Returns
    -------
    found : bool
    """
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for attribute in parts[end:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def _owners(obj):
    """Dotted paths of the packages ``obj`` was defined in, deepest first."""
    module = getattr(obj, "__module__", None)
    if not (inspect.isclass(obj) or inspect.isroutine(obj)) or not isinstance(module, str):
        return []
    parts = module.split(".")
    return [".".join(parts[:end]) for end in range(len(parts), 0, -1)]


def home_modules(modules):
    """Map each ``(module name, name)`` of an ``__all__`` to the module documenting it.

    Parameters
    ----------
    modules : list of module
        The public modules, as :func:`public_modules` returns them.

    Returns
    -------
    homes : dict
        ``{(module name, name): home module name}``.
    """
    package_names = {module.__name__ for module in modules if hasattr(module, "__path__")}
    exporters = {}
    for module in modules:
        for name in module.__all__:
            exporters.setdefault((name, id(getattr(module, name))), []).append(module.__name__)
    homes = {}
    for module in modules:
        for name in module.__all__:
            candidates = exporters[(name, id(getattr(module, name)))]
            nested = [path for path in candidates if path != PACKAGE] or candidates
            owners = [path for path in _owners(getattr(module, name)) if path in nested]
            packages = [path for path in owners if path in package_names]
            homes[(module.__name__, name)] = next(iter(packages or owners), nested[0])
    return homes


def _relative(path, module):
    """``path`` relative to ``module`` when inside it (autosummary's rule), else as is."""
    return path.removeprefix(f"{module}.") if path.startswith(f"{module}.") else path


def _title(text, underline="="):
    return f"{text}\n{underline * len(text)}\n"


def summary(module):
    """Return the first paragraph of a module's docstring, on one line.

    A leading ``"<module name>: "`` is dropped (the package's docstring starts so).

    Parameters
    ----------
    module : module

    Returns
    -------
    text : str
    """
    paragraph = " ".join(inspect.getdoc(module).split("\n\n")[0].split())
    text = paragraph.removeprefix(f"{module.__name__}: ")
    return text[:1].upper() + text[1:]


def _submodules(module, modules):
    """The public modules directly inside a package other than the top level: their pages
    nest under the package's in the navigation."""
    if module.__name__ == PACKAGE:
        return []
    return [child for child in modules if child.__name__.rpartition(".")[0] == module.__name__]


def _top_modules(modules):
    """The public modules not nested under another module's page (see :func:`_submodules`)."""
    names = {module.__name__ for module in modules} - {PACKAGE}
    return [module for module in modules if module.__name__.rpartition(".")[0] not in names]


def _module_table(modules):
    """A two-column table of modules and their summaries."""
    lines = [".. list-table::\n   :widths: 35 65\n   :class: api-modules\n"]
    for module in modules:
        lines += [f"   * - :mod:`{module.__name__}`", f"     - {summary(module)}"]
    return "\n".join(lines) + "\n"


def _hidden_toctree(entries):
    """A toctree, not shown on the page, of ``(title, page)`` navigation entries."""
    lines = [".. toctree::\n   :hidden:\n"]
    lines += [f"   {title} <{page}>" for title, page in entries]
    return "\n".join(lines) + "\n"


def _short(name):
    """A module's path without the package's, for the navigation."""
    return name.removeprefix(f"{PACKAGE}.") if name != PACKAGE else name


def module_page(module, homes, modules):
    """Return the reStructuredText of one module's page.

    Parameters
    ----------
    module : module
        A public module.
    homes : dict
        As :func:`home_modules` returns it.
    modules : list of module
        Every public module, as :func:`public_modules` returns them.

    Returns
    -------
    text : str
    """
    own = [name for name in module.__all__ if homes[(module.__name__, name)] == module.__name__]
    elsewhere = [name for name in module.__all__ if name not in own]
    lines = [
        f".. _api-{module.__name__}:\n",
        _title(f":mod:`{module.__name__}`"),
        f".. automodule:: {module.__name__}\n   :no-members:\n",
        f".. currentmodule:: {module.__name__}\n",
    ]
    if own:
        lines += [
            _title("Defined here", "-"),
            ".. autosummary::\n   :toctree: generated/\n   :template: public\n",
            *(f"   {name}" for name in sorted(own, key=str.lower)),
            "",
        ]
    if elsewhere:
        lines += [
            _title("Also importable from here", "-"),
            "Documented at their home:\n",
            ".. autosummary::\n",
            *(
                f"   ~{_relative(homes[(module.__name__, name)], module.__name__)}.{name}"
                for name in sorted(elsewhere, key=str.lower)
            ),
            "",
        ]
    submodules = _submodules(module, modules)
    if submodules:
        lines += [
            _title("Modules", "-"),
            "The modules of the package; their names are documented above.\n",
            _module_table(submodules),
            _hidden_toctree((_short(child.__name__), child.__name__) for child in submodules),
        ]
    return "\n".join(lines)


def write_api_pages(folder):
    """Write ``index.rst`` and one page per public module into ``folder``.

    A page is rewritten only when its text changes, so that Sphinx does not rebuild the
    pages of an unchanged reference.

    Parameters
    ----------
    folder : path-like
        Output folder, created if needed.

    Returns
    -------
    homes : dict
        As :func:`home_modules` returns it.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    modules = public_modules()
    homes = home_modules(modules)
    pages = {module.__name__: module_page(module, homes, modules) for module in modules}
    pages["index"] = "\n".join(
        [
            ".. _api:\n",
            _title("API reference"),
            "Every public name of sklearn_calib, generated from the ``__all__`` of each public",
            "module and the numpydoc docstrings. The top-level package re-exports the names",
            "most scripts need; each name is documented in the module that defines it.\n",
            _module_table(modules),
            _hidden_toctree((module.__name__, module.__name__) for module in _top_modules(modules)),
        ]
    )
    for stem, text in pages.items():
        path = folder / f"{stem}.rst"
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    return homes
