"""The project's import graph has no circles: each was kept open only by an import hidden inside a
function (four of them, 17 modules in the largest, through the tool manifest). Read by grimp (the graph
import-linter checks), with imports made only for type checkers left out."""

from __future__ import annotations

import grimp

from benchmarks.import_layers import circles as _circles

PACKAGES = ("amid",)


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    assert len(graph.modules) > 200
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(module)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert _circles(graph) == [["a.x", "a.y"]]
