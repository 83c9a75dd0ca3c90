"""posviz.pipeline, the one step registry: no step is named anywhere else (that each result
records its step and makes itself again: test_params.py)."""

from __future__ import annotations

import ast

from posviz import pipeline
from tests import ROOT


def test_no_step_name_is_typed_as_a_string_outside_the_registry():
    # A step is named once, by its core function: elsewhere it is pipeline.<step> (or the
    # function's __name__), never "<step>" as a key of STEPS or an export's "analysis".
    typed = []
    for path in [*(ROOT / "posviz").rglob("*.py"), *(ROOT / "pages").glob("*.py")]:
        if path.name == "pipeline.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            named = None
            if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("STEPS"):
                named = node.slice
            elif isinstance(node, ast.Dict):
                named = next(
                    (v for k, v in zip(node.keys, node.values, strict=True)
                     if isinstance(k, ast.Constant) and k.value == "analysis"),
                    None,
                )  # fmt: skip
            elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]).endswith(
                "['analysis']"
            ):
                named = node.value
            if isinstance(named, ast.Constant) and named.value in pipeline.STEPS:
                typed.append(f"{path.relative_to(ROOT)}:{node.lineno}: {named.value}")
    assert typed == []
