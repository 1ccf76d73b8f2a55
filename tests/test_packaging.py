"""The package's requirements: bounds the GPU machine meets, and the constraints CI tested."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
#: The extras `make test` and `make docs` install (the Makefile), whose versions are pinned.
INSTALLED_EXTRAS = ("test", "plot", "dask", "persist", "docs")


def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins():
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pinned = {}
    for line in lines:
        if line and not line.startswith("#"):
            name, version = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", line).groups()
            pinned[canonicalize_name(name)] = Version(version)
    return pinned


def test_torch_lower_bound_admits_the_gpu_machines_torch():
    (torch,) = [Requirement(r) for r in project()["dependencies"] if r.startswith("torch")]
    assert torch.specifier.contains("2.11.0")


def test_constraints_pin_every_installed_requirement_within_its_range():
    requirements = [Requirement(r) for r in project()["dependencies"]]
    for extra in INSTALLED_EXTRAS:
        requirements += [Requirement(r) for r in project()["optional-dependencies"][extra]]
    pinned = pins()
    assert "torch" not in pinned  # the Makefile's TORCH chooses the build
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if name == "torch":
            continue
        assert name in pinned, f"constraints.txt does not pin {requirement.name}"
        assert requirement.specifier.contains(pinned[name]), (requirement, pinned[name])
