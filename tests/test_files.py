"""The files a reader copies: the plumbing below main() is one text in every script and at most 90 lines, check_args
included, and every file stays within its cap (issue 20): CleanRL's length + 90 for a baseline, 1.3 x CleanRL's + 90
for a fast variant."""

import ast

import pytest
from conftest import SCRIPTS

FILES = sorted(SCRIPTS.glob("*.py"))
CLEANRL_LINES = {
    "sac_continuous_action": 324,
    "td3_continuous_action": 317,
    "ppo_continuous_action": 353,
    "ppo_atari": 344,
    "dqn": 248,
}


def top_level(path):
    """{name: source} of the file's top-level functions and classes, and their order."""
    source = path.read_text()
    nodes = [n for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return {n.name: ast.get_source_segment(source, n) for n in nodes}, [n.name for n in nodes]


def plumbing(path):
    """The file's lines from its `# Plumbing` line to the end."""
    lines = path.read_text().splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("# Plumbing")) :]


def test_the_plumbing_is_one_text_in_every_file():
    assert len(FILES) == 10
    reference = plumbing(FILES[0])
    shared = reference[
        next(i for i, line in enumerate(reference) if line.startswith("class RunLog:")) - 2 :
    ]  # and the blank lines
    for path in FILES[1:]:
        lines = plumbing(path)
        assert lines[0] == reference[0], path.name  # the same header line
        assert lines[-len(shared) :] == shared, f"{path.name}: the plumbing after check_args differs from {FILES[0].name}'s"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_algorithm_comes_first_and_the_plumbing_is_short(path):
    _, order = top_level(path)
    assert order[0] == "Args" and order[-2:] == ["check_args", "RunLog"], order
    assert len(plumbing(path)) <= 90, len(plumbing(path))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_file_is_within_its_cap(path):
    base = path.stem.removesuffix("_torchcompile")
    cap = CLEANRL_LINES[base] + 90 if path.stem == base else round(1.3 * CLEANRL_LINES[base]) + 90
    assert len(path.read_text().splitlines()) <= cap
