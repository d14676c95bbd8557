"""benchmarks/import_layers.py on this checkout: what docs/LAYERS.md reports as "after"."""

from __future__ import annotations

from benchmarks import import_layers


def test_this_checkout_has_no_circle_no_upward_import_and_no_unplaced_module() -> None:
    result = import_layers.measure(import_layers.ROOT)
    assert result["modules"] > 200 and result["circles"] == [] and result["upward_imports"] == 0
    assert result["unplaced_modules"] == []
    assert result["between_layers"]["programs -> run state"] > 0
    diagram = import_layers.mermaid(result)
    assert diagram.count('["') == len(import_layers.LAYER_NAMES) and "-.->" not in diagram
    doc = import_layers.layers_doc(result, result)
    assert doc.count("```mermaid") == 2 and "| imports up the layers | 0 | 0 |" in doc
