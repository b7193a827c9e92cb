"""The files a reader copies: formatted as CleanRL's (ruff at 127 columns), each within its cap, with the plumbing
below main() one text in every script, short and plain, and check_args right below Args."""

import ast

import pytest
from helpers.scripts import SCRIPTS

FILES = sorted(SCRIPTS.glob("*.py"))
# Each file's formatted length when the caps were set, plus 10 %: room to grow a little, none to pack. The fast PPO
# files' caps were re-based when they gained Ray env runners (issue 31: about 190 lines each, a feature of their own),
# the fast SAC and TD3 files' when they gained --precision bf16 and their CPU fallback (issue 30: ~25 lines each).
CAPS = {
    "dqn": 440,
    "dqn_torchcompile": 564,
    "ppo_atari": 579,
    "ppo_atari_torchcompile": 980,
    "ppo_continuous_action": 594,
    "ppo_continuous_action_torchcompile": 1040,
    "sac_continuous_action": 526,
    "sac_continuous_action_torchcompile": 680,
    "td3_continuous_action": 485,
    "td3_continuous_action_torchcompile": 622,
}


def plumbing(path):
    """The file's lines from its `# Plumbing` line to the end."""
    lines = path.read_text().splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("# Plumbing")) :]


def test_the_plumbing_is_one_text_in_every_file():
    assert len(FILES) == 10
    reference = plumbing(FILES[0])
    for path in FILES[1:]:
        assert plumbing(path) == reference, f"{path.name}: the plumbing differs from {FILES[0].name}'s"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_file_reads_top_to_bottom_and_is_within_its_cap(path):
    source = path.read_text()
    order = [n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert order[:2] == ["Args", "check_args"], order  # the flags, then what each may be
    assert order[-3:] == ["main", "check", "RunLog"], order  # the algorithm, then the plumbing
    assert len(plumbing(path)) <= 110, len(plumbing(path))
    assert len(source.splitlines()) <= CAPS[path.stem], (len(source.splitlines()), CAPS[path.stem])


def test_the_plumbing_is_plain():
    """No walrus, no tuple assignment of more than three names, no conditional expression inside another, no
    __import__: the plumbing is read once by everyone, and must read at a glance."""
    tree = ast.parse("\n".join(plumbing(FILES[0])))
    for node in ast.walk(tree):
        assert not isinstance(node, ast.NamedExpr), ast.unparse(node)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                assert not (isinstance(target, ast.Tuple) and len(target.elts) > 3), ast.unparse(node)
        if isinstance(node, ast.IfExp):
            inner = [n for n in ast.walk(node) if isinstance(n, ast.IfExp) and n is not node]
            assert not inner, ast.unparse(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "__import__", ast.unparse(node)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_no_walrus_and_no_named_lambda_anywhere(path):
    for node in ast.walk(ast.parse(path.read_text())):
        assert not isinstance(node, ast.NamedExpr), f"{path.name}:{node.lineno}: {ast.unparse(node)}"
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            raise AssertionError(f"{path.name}:{node.lineno}: a lambda assigned to a name: {ast.unparse(node)}")
