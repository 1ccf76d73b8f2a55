"""The import rules of ARCHITECTURE.md, checked by parsing every import with ``ast``.

Every ``import`` and ``from ... import`` statement counts, also those inside functions: a
lazy import is still a dependency.
"""

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

from sklearn_calib import calibrators
from sklearn_calib.calibrators import CalibratedClassifier
from sklearn_calib.calibrators._base import BaseCalibrator

ROOT = Path(__file__).resolve().parents[1]

#: Which parts of sklearn_calib each part may import (ARCHITECTURE.md, "Import rules").
#: A part is a top-level module or sub-package; "main" is the main job (``__main__`` and
#: ``_experiment``). The package's ``__init__`` may import any part but the main job.
ALLOWED = {
    "_deprecation": set(),
    "_validation": set(),
    "_dask_chunks": {"_validation"},
    "_temperature": set(),
    "_rollback": set(),
    "metrics": {"_validation", "_dask_chunks", "_temperature"},
    "scoring": {"metrics", "_validation"},
    "datasets": {"_validation"},
    "plotting": {"metrics", "_validation"},
    "losses": {"metrics", "_validation"},
    "calibrators": {"metrics", "scoring", "_validation", "_dask_chunks", "_temperature"},
    "estimators": {"losses", "metrics", "_validation", "_rollback"},
    "evaluation": {"calibrators", "metrics", "_validation"},
    "label_shift": {"calibrators", "metrics", "_validation", "_dask_chunks", "_rollback"},
    "persistence": {"calibrators", "estimators", "label_shift", "losses", "metrics", "_validation"},
    "main": {
        "calibrators",
        "datasets",
        "estimators",
        "evaluation",
        "metrics",
        "plotting",
        "_validation",
    },
}
# The deprecation shims of renamed parameters, functions and attributes serve every part.
for _part in set(ALLOWED) - {"_deprecation", "_validation"}:
    ALLOWED[_part].add("_deprecation")
ALLOWED["__init__"] = set(ALLOWED) - {"main", "__init__"}

#: Outside packages a part may not import: skorch belongs to the estimators.
FORBIDDEN_EXTERNAL = {
    part: {"skorch"}
    for part in (
        "_deprecation",
        "_validation",
        "_dask_chunks",
        "_temperature",
        "_rollback",
        "metrics",
        "scoring",
    )
    + ("datasets", "plotting")
    + ("losses",)
    + ("calibrators", "evaluation", "label_shift")
}

#: Top-level names no library module may import.
NOT_FROM_LIBRARY = {"benchmarks", "tests"}


def module_name(path, root=ROOT):
    """Dotted module name of a source file (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path):
    return path.name == "__init__.py"


def imports(source, module, *, package=False):
    """Absolute names of what ``source`` imports, as ``(module, name or None)`` pairs.

    ``from m import a`` gives ``(m, "a")``; ``import m`` gives ``(m, None)``. Relative
    imports are resolved against ``module`` (a package when ``package`` is true).
    """
    base = module.split(".") if package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module
            found.extend((target, alias.name) for alias in node.names)
    return found


def part_of(module):
    """The part of sklearn_calib a module belongs to, None outside sklearn_calib."""
    names = module.split(".")
    if names[0] != "sklearn_calib":
        return None
    if len(names) == 1:
        return "__init__"
    if names[1] in ("__main__", "_experiment"):
        return "main"
    return names[1]


def library_violations(module, source, *, package=False):
    """Imports of library module ``module`` that break the rules, as messages."""
    part = part_of(module)
    messages = []
    for target, name in imports(source, module, package=package):
        top = target.split(".")[0]
        if top in NOT_FROM_LIBRARY or top in FORBIDDEN_EXTERNAL.get(part, ()):
            messages.append(f"{module} imports {target}")
            continue
        names = [target] if name is None else [target, f"{target}.{name}"]
        imported = {part_of(candidate) for candidate in names} - {None, "__init__"}
        if not imported and top == "sklearn_calib" and name is not None:
            # ``from sklearn_calib import x``: x is the part (a module or a public name)
            imported = {name if name in ALLOWED else "__init__"}
        for other in imported - {part}:
            if other not in ALLOWED[part]:
                messages.append(f"{module} ({part}) imports {target} ({other})")
    return messages


def is_private(dotted):
    """Whether a dotted name has a component that starts with an underscore."""
    return any(component.startswith("_") for component in dotted.split("."))


#: The folders of plain scripts in ``benchmarks/``, as module prefixes.
SCRIPT_PACKAGES = ("benchmarks.speed", "benchmarks.scripts")


def benchmark_violations(module, source, *, package=False, plain_script=False):
    """Imports of benchmark file ``module`` that break the rules, as messages.

    Benchmarks import only public sklearn_calib names; a plain script (``speed/``,
    ``scripts/``) imports nothing from ``benchmarks`` and leaves ``sys.path`` alone; the
    experiment framework imports no script.
    """
    messages = []
    for target, name in imports(source, module, package=package):
        top = target.split(".")[0]
        if top == "sklearn_calib":
            full = target if name is None else f"{target}.{name}"
            if is_private(full):
                messages.append(f"{module} imports the private {full}")
        elif top == "benchmarks" and (plain_script or target.startswith(SCRIPT_PACKAGES)):
            messages.append(f"{module} imports {target}")
    if plain_script:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr == "path":
                if isinstance(node.value, ast.Name) and node.value.id == "sys":
                    messages.append(f"{module} changes sys.path")
    return messages


def module_graph(root_package, root=ROOT):
    """Module name to the set of modules of the same tree it imports."""
    files = {module_name(path, root): path for path in (root / root_package).rglob("*.py")}
    graph = {}
    for module, path in files.items():
        edges = set()
        for target, name in imports(path.read_text(), module, package=is_package(path)):
            if name is not None and f"{target}.{name}" in files:
                edges.add(f"{target}.{name}")
            elif target in files:
                edges.add(target)
        graph[module] = edges - {module}
    return graph


def find_cycles(graph):
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def _sources(folder):
    return sorted((ROOT / folder).rglob("*.py"))


def test_every_part_of_the_library_is_in_the_rules():
    package = ROOT / "sklearn_calib"
    parts = {part_of(module_name(path)) for path in package.rglob("*.py")}
    assert parts == set(ALLOWED)


@pytest.mark.parametrize("path", _sources("sklearn_calib"), ids=lambda p: module_name(p))
def test_library_modules_import_only_what_their_part_may(path):
    module = module_name(path)
    assert library_violations(module, path.read_text(), package=is_package(path)) == []


@pytest.mark.parametrize("path", _sources("benchmarks"), ids=lambda p: module_name(p))
def test_benchmarks_import_only_public_library_names(path):
    module = module_name(path)
    plain_script = module_name(path).startswith(SCRIPT_PACKAGES)
    violations = benchmark_violations(
        module, path.read_text(), package=is_package(path), plain_script=plain_script
    )
    assert violations == []


@pytest.mark.parametrize("tree", ["sklearn_calib", "benchmarks"])
@pytest.mark.slow
def test_no_import_cycles(tree):
    assert find_cycles(module_graph(tree)) == []


def test_the_rules_have_no_cycle_between_parts():
    graph = {part: allowed - {part} for part, allowed in ALLOWED.items() if part != "__init__"}
    assert find_cycles(graph) == []


#: What each private sub-package of ``metrics/`` may import of ``metrics/`` (ARCHITECTURE.md):
#: a layer imports only the layers below it. The package's ``__init__`` and the metric
#: declarations (``_catalogue``) read them all.
METRICS_LAYERS = ("_core", "_fused", "_functions", "_statistics", "_streaming", "_dask")
METRICS_ALLOWED = {layer: set(METRICS_LAYERS[:i]) for i, layer in enumerate(METRICS_LAYERS)}
METRICS_ALLOWED["_catalogue"] = set(METRICS_LAYERS)
METRICS_ALLOWED["__init__"] = set(METRICS_LAYERS) | {"_catalogue"}
#: The most lines of a module of the metrics' sub-packages.
METRICS_MODULE_LINES = 700


def metrics_part_of(module):
    """The sub-package (or top module) of ``metrics/`` a module belongs to, else None."""
    names = module.split(".")
    if names[:2] != ["sklearn_calib", "metrics"]:
        return None
    return "__init__" if len(names) == 2 else names[2]


def metrics_violations(module, source, *, package=False):
    """Imports of ``metrics/`` module ``module`` that break the layers' rules, as messages."""
    part = metrics_part_of(module)
    messages = []
    for target, name in imports(source, module, package=package):
        names = [target] if name is None else [target, f"{target}.{name}"]
        imported = {metrics_part_of(candidate) for candidate in names} - {None, "__init__"}
        for other in imported - {part}:
            if other not in METRICS_ALLOWED[part]:
                messages.append(f"{module} ({part}) imports {target} ({other})")
    return messages


def test_every_module_of_the_metrics_is_in_the_layers_rules():
    parts = {metrics_part_of(module_name(path)) for path in _sources("sklearn_calib/metrics")}
    assert parts == set(METRICS_ALLOWED)


@pytest.mark.parametrize("path", _sources("sklearn_calib/metrics"), ids=lambda p: module_name(p))
def test_metrics_modules_import_only_the_layers_below_theirs(path):
    module = module_name(path)
    assert metrics_violations(module, path.read_text(), package=is_package(path)) == []
    if metrics_part_of(module) in METRICS_LAYERS:
        assert len(path.read_text().splitlines()) <= METRICS_MODULE_LINES


def test_the_metrics_layers_rules_flag_imports_from_above():
    above = "from .._statistics._bootstrap import calibration_error_ci"
    assert metrics_violations("sklearn_calib.metrics._functions._binned", above) != []
    scale_out = "from .._streaming._accumulator import CalibrationAccumulator"
    assert metrics_violations("sklearn_calib.metrics._statistics._x", scale_out) != []
    below = "from .._core._binning import assign_bins"
    assert metrics_violations("sklearn_calib.metrics._functions._binned", below) == []
    assert metrics_violations("sklearn_calib.metrics._core._x", "from .._fused import _bins") != []


#: The estimator classes of ``estimators/``; its other modules serve them.
ESTIMATOR_MODULES = {"sklearn_calib.estimators._net", "sklearn_calib.estimators._meta"}

#: skorch's notifications that run a training loop.
LOOP_EVENTS = {"on_train_begin", "on_epoch_begin", "on_epoch_end", "on_train_end"}


@pytest.mark.slow
def test_estimator_helpers_take_the_net_and_never_import_it():
    """The training run, input checks, persistence and the other helper modules of
    ``estimators/`` receive the net as an argument; only the estimators themselves and
    the package's public faces import the estimator modules."""
    graph = module_graph("sklearn_calib")
    importers = {
        module
        for module, edges in graph.items()
        if edges & ESTIMATOR_MODULES and module not in ESTIMATOR_MODULES
    }
    assert importers == {"sklearn_calib.estimators"}
    assert "sklearn_calib.estimators._net" in graph["sklearn_calib.estimators._meta"]


@pytest.mark.slow
def test_only_the_training_run_runs_the_epochs():
    """One owner of the training loop: skorch's loop notifications are sent by ``_run.py``."""
    senders = set()
    for path in _sources("sklearn_calib"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "notify"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in LOOP_EVENTS
            ):
                senders.add(module_name(path))
    assert senders == {"sklearn_calib.estimators._run"}


def test_the_rules_flag_forbidden_imports():
    bad = "from sklearn_calib.estimators import NetClassifier"
    assert library_violations("sklearn_calib.metrics._metrics", bad) != []
    relative = "from ..estimators._net import NetClassifier"
    assert library_violations("sklearn_calib.calibrators.temperature", relative) != []
    assert library_violations("sklearn_calib.metrics._x", "import skorch") != []
    assert library_violations("sklearn_calib.scoring", "from . import estimators") != []
    assert library_violations("sklearn_calib.losses._x", "from benchmarks import _data") != []
    assert library_violations("sklearn_calib.estimators._net", "from ..losses import x") == []
    for private in (
        "from sklearn_calib.calibrators._base import softmax",
        "import sklearn_calib._validation",
        "from sklearn_calib.calibrators._repeated_fits import distinct_warnings",
        "from sklearn_calib import _validation",
    ):
        assert benchmark_violations("benchmarks._x", private) != [], private
    public = "from sklearn_calib.calibrators import grid_ece"
    assert benchmark_violations("benchmarks._x", public) == []
    assert (
        benchmark_violations(
            "benchmarks.speed.bench_x", "from benchmarks import _data", plain_script=True
        )
        != []
    )
    assert (
        benchmark_violations(
            "benchmarks.speed.bench_x", "import sys\nsys.path.insert(0, '.')", plain_script=True
        )
        != []
    )
    for script in ("from .speed import bench_x", "from .scripts import sweep_x"):
        assert benchmark_violations("benchmarks._runner", script, package=False) != []
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_library_cites_papers_not_seed_numbers_or_the_spec():
    pattern = re.compile(r"\b[Ss]eeds? 00\d|\bSPEC\b")
    cited = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _sources("sklearn_calib")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert cited == []


def _library_modules():
    """Dotted names of every module of sklearn_calib but the main job's entry point."""
    names = [module_name(path) for path in _sources("sklearn_calib")]
    return sorted(name for name in names if not name.endswith("__main__"))


def test_public_modules_declare_all_and_private_ones_start_with_an_underscore():
    # The rule of DEVELOPERS.md: a module whose dotted path has no component starting with
    # "_" is public and declares __all__, every name of which it defines or imports.
    public = [name for name in _library_modules() if not is_private(name)]
    assert "sklearn_calib.calibrators.temperature" in public
    for name in public:
        module = importlib.import_module(name)
        assert hasattr(module, "__all__"), f"{name} is public but has no __all__"
        missing = [entry for entry in module.__all__ if not hasattr(module, entry)]
        assert missing == [], name


def _calibrator_classes():
    """Every calibrator class of sklearn_calib, found by walking the package: the
    subclasses of BaseCalibrator that declare their parameters (an ``__init__`` of their
    own, as scikit-learn estimators do; the shared bases have none), and
    CalibratedClassifier."""
    found = {}
    for name in _library_modules():
        for value in vars(importlib.import_module(name)).values():
            calibrator = isinstance(value, type) and (
                issubclass(value, BaseCalibrator) or value is CalibratedClassifier
            )
            if calibrator and "__init__" in vars(value) and not inspect.isabstract(value):
                found[value.__name__] = value
    return found


def test_every_calibrator_is_importable_from_the_top_level():
    classes = _calibrator_classes()
    assert {"CalibratorSelector", "StructuredMatrixScaling", "TemperatureScaling"} <= set(classes)
    for name, cls in classes.items():
        top = importlib.import_module("sklearn_calib")
        assert getattr(top, name, None) is cls, name
        assert name in top.__all__ and name in calibrators.__all__, name


def test_benchmarks_docs_and_tests_cite_papers_by_name():
    """Reports, code and docs name the papers ("Wang et al. (2021), Table 2"), never the
    seed numbers of their files."""
    pattern = re.compile(r"\b[Ss]eeds? 00\d")
    paths = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "DEVELOPERS.md"]
    for folder, suffixes in (
        ("benchmarks", (".py", ".md", ".sh")),
        ("docs", (".py", ".rst")),
        ("examples", (".py",)),
        ("tests", (".py",)),
    ):
        paths += [path for path in (ROOT / folder).rglob("*") if path.suffix in suffixes]
    cited = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in paths
        if "_build" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert cited == []
