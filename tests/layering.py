"""Runs import-linter on the package as `import` finds it: `python -m tests.layering`.

setup.py's package_dir maps the top-level `pipeline/` and `models/` folders to
`beam_embed.pipeline` and `beam_embed.models`, and an install (wheel or editable) resolves those
names there. grimp, which builds import-linter's graph, walks only the folders of top-level
packages (and refuses a subpackage of a regular package as a root), so it would miss both.
This entry point lets it take every root package's folders from the import system, as `import`
itself does, then runs the `lint-imports` command unchanged; nothing is built, in the tree or
elsewhere. `.ci/layering` calls it.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import grimp.main
from grimp.adaptors.packagefinder import ImportLibPackageFinder


class InstalledPackageFinder(ImportLibPackageFinder):
    """A package's folders as the import system finds them, a mapped subpackage's included."""

    def determine_package_directories(self, package_name, file_system) -> set[str]:
        spec = importlib.util.find_spec(package_name)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"cannot find package {package_name!r}: run `make setup` (its "
                             "editable install maps beam_embed.pipeline and beam_embed.models)")
        return set(spec.submodule_search_locations)


def main() -> None:
    grimp.main.settings.PACKAGE_FINDER = InstalledPackageFinder()
    from importlinter.cli import lint_imports_command

    sys.argv[0] = "lint-imports"
    sys.path.insert(0, os.getcwd())
    lint_imports_command()


if __name__ == "__main__":
    main()
