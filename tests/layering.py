"""import-linter's contract types, checked on the package as an install lays it out.

setup.py's package_dir maps the top-level `pipeline/` and `models/` folders to
`beam_embed.pipeline` and `beam_embed.models`; an install (wheel or editable) resolves those names
there. grimp, which builds import-linter's graph, walks only the folders of top-level packages and
refuses a subpackage of a regular package as a root, so the graph `lint-imports` builds from
`root_packages` holds `beam_embed/` alone. The contract types below (named in .importlinter's
`contract_types`, which import-linter loads from the working directory) are the built-in
`layers`, `forbidden` and `acyclic_siblings`, checked on a graph that takes each root's and each
`mapped_packages` entry's folders from the import system, as `import` itself does. So plain
`lint-imports` from the repository root checks every module at its one path; nothing is built,
in the tree or elsewhere.
"""

from __future__ import annotations

import functools
import importlib.util

import grimp
import grimp.main
from grimp.adaptors.packagefinder import ImportLibPackageFinder
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract


class InstalledPackageFinder(ImportLibPackageFinder):
    """A package's folders as the import system finds them, a mapped subpackage's included."""

    def determine_package_directories(self, package_name, file_system) -> set[str]:
        spec = importlib.util.find_spec(package_name)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"cannot find package {package_name!r}: run `make setup` (its "
                             "editable install maps beam_embed.pipeline and beam_embed.models)")
        return set(spec.submodule_search_locations)


def _names(value) -> tuple[str, ...]:
    """An ini option's value (one name, or one per line) as names."""
    return tuple(value.split() if isinstance(value, str) else value or ())


@functools.cache
def installed_graph(roots: tuple[str, ...], exclude_type_checking: bool) -> grimp.ImportGraph:
    """The import graph of `roots`, each found where `import` finds it; built once per run."""
    settings = grimp.main.settings
    found_where_grimp_looks = settings.PACKAGE_FINDER
    settings.PACKAGE_FINDER = InstalledPackageFinder()
    try:
        return grimp.build_graph(*roots, cache_dir=None,
                                 exclude_type_checking_imports=exclude_type_checking)
    finally:
        settings.PACKAGE_FINDER = found_where_grimp_looks


class _OnInstalledGraph:
    """Checks the contract on installed_graph() instead of the graph of `root_packages` alone."""

    def check(self, graph, verbose):
        options = self.session_options
        roots = _names(options["root_packages"]) + _names(options.get("mapped_packages"))
        exclude = str(options.get("exclude_type_checking_imports", "")).lower() == "true"
        return super().check(installed_graph(roots, exclude), verbose)


class InstalledLayers(_OnInstalledGraph, LayersContract):
    """import-linter's `layers` contract on the installed package."""


class InstalledForbidden(_OnInstalledGraph, ForbiddenContract):
    """import-linter's `forbidden` contract on the installed package."""


class InstalledAcyclicSiblings(_OnInstalledGraph, AcyclicSiblingsContract):
    """import-linter's `acyclic_siblings` contract on the installed package."""
