from __future__ import annotations

from assay.core.anchors import parse_anchor, unresolved_anchors

FILES = {"src/slug.py": "def slugify(text):\n    return text\n"}


def test_forms_parse() -> None:
    assert parse_anchor("src/slug.py").path == "src/slug.py"
    assert parse_anchor("src/slug.py::slugify").symbol == "slugify"
    assert parse_anchor("src/slug.py:2").line == 2


def test_resolving_anchors_pass() -> None:
    anchors = ["src/slug.py", "src/slug.py::slugify", "src/slug.py:2"]
    assert unresolved_anchors(anchors, FILES.get) == []


def test_each_failure_names_its_reason() -> None:
    problems = unresolved_anchors(
        ["src/gone.py", "src/slug.py::unslugify", "src/slug.py:40", "src/slug.py::slug"],
        FILES.get,
    )
    assert problems == [
        "src/gone.py (no such file)",
        "src/slug.py::unslugify (symbol not found in src/slug.py)",
        "src/slug.py:40 (the file has 2 lines)",
        "src/slug.py::slug (symbol not found in src/slug.py)",
    ]
