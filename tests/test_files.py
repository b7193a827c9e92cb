"""The files a reader copies: the plumbing below main() is one text in every script, so that whoever learned it once
can skip it everywhere (issue 12)."""
import ast

import pytest

from conftest import SCRIPTS

FILES = sorted(SCRIPTS.glob("*.py"))
SHARED = ["fail", "check", "load_model", "RunLog"]  # check_args and evaluate differ by algorithm and environment


def top_level(path):
    """{name: source} of the file's top-level functions and classes, and their order."""
    source = path.read_text()
    nodes = [n for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return {n.name: ast.get_source_segment(source, n) for n in nodes}, [n.name for n in nodes]


def test_the_plumbing_is_one_text_in_every_file():
    assert len(FILES) == 10
    reference, _ = top_level(FILES[0])
    for path in FILES[1:]:
        found, _ = top_level(path)
        for name in SHARED:
            assert found[name] == reference[name], f"{path.name}: {name} differs from {FILES[0].name}'s"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_algorithm_comes_first(path):
    _, order = top_level(path)
    assert order[0] == "Args" and order[-len(SHARED) - 2:] == ["check_args", "evaluate", *SHARED], order
