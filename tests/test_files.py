"""The files a reader copies: formatted as CleanRL's (ruff at 127 columns), read top to bottom, one text for every
definition they share, each variant file its core file plus marked hunks, cores free of scale code, and each file's
length as the README's table says it."""

import ast
import difflib
import io
import re
import tokenize

import pytest
from helpers.scripts import ROOT, SCRIPTS

FILES = sorted(SCRIPTS.glob("*.py"))
STEMS = [p.stem for p in FILES]
PAIRS = ["ppo_atari", "ppo_continuous_action", "sac_continuous_action", "td3_continuous_action", "dqn"]
# Variant files, one idea each: the core file they are made from, the marker on every line of the idea, the top-level
# definitions whose text the idea changes (every changed hunk carries the marker), and the variant's own definitions.
VARIANTS = {
    "ppo_continuous_action_ray_torchcompile": dict(
        core="ppo_continuous_action_torchcompile",
        marker="Runners:",
        changed={"Args", "check_args", "main"},
        own={"check_runners", "EnvRunner", "Runners"},
    ),
    "ppo_atari_multigpu_torchcompile": dict(
        core="ppo_atari_torchcompile",
        marker="DDP:",
        changed={"Args", "check_args", "main", "make_ppo"},  # make_ppo: the update holds the all_reduce
        own=set(),
    ),
}
CORES = [p for p in STEMS if p not in VARIANTS]
# Definitions that several files share and that must be one text in every file that has them (None: every file that
# defines the name; else the files listed). The pairs' own classes and functions differ by the speed tricks.
ONE_TEXT = {
    "check": None,  # the plumbing
    "RunLog": None,
    "__main__": None,
    "load_model": None,
    "silence_v4_notices": None,
    "GRAPH_MODES": None,
    "compiled": None,
    "adam_settings": None,
    "explained_variance": None,
    "layer_init": None,
    "EpisodeTracker": None,
    "bf16_matmuls": None,
    "check_fast_flags": ["dqn_torchcompile", *[s for s in STEMS if s.startswith("ppo_") and s.endswith("torchcompile")]],
}


def definitions(path):
    """{name: source text} of a file's top-level classes, functions, assignments and `if __name__` block."""
    source = path.read_text()
    lines = source.splitlines(keepends=True)
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.Assign):
            name = ast.unparse(node.targets[0])
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            name = "__main__"
        else:
            continue  # imports: a variant may add its own
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        found[name] = "".join(lines[first - 1 : node.end_lineno])
    return found


DEFS = {p.stem: definitions(p) for p in FILES}


@pytest.mark.parametrize("name", list(ONE_TEXT))
def test_a_shared_definition_is_one_text_in_every_file(name):
    files = ONE_TEXT[name] or [stem for stem in STEMS if name in DEFS[stem]]
    assert len(files) >= 2, files
    reference = files[0]
    for stem in files[1:]:
        assert name in DEFS[stem], f"{stem}.py has no {name}"
        diff = "".join(difflib.unified_diff(DEFS[reference][name].splitlines(True), DEFS[stem][name].splitlines(True)))
        assert DEFS[stem][name] == DEFS[reference][name], f"{stem}.py: {name} differs from {reference}.py's:\n{diff}"


def unmarked_hunks(core_text, variant_text, marker):
    """The hunks of the variant's text against the core's that carry no marker: each added or changed run of lines
    must hold the marker in one of its lines; a removal must have it on a line beside the place it was."""
    core, variant = core_text.splitlines(), variant_text.splitlines()
    bad = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, core, variant, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        near = variant[j1:j2] if j2 > j1 else variant[max(j1 - 1, 0) : j1 + 1]
        if not any(marker in line for line in near):
            bad.append("\n".join(["- " + line for line in core[i1:i2]] + ["+ " + line for line in variant[j1:j2]]))
    return bad


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_variant_is_its_core_plus_marked_hunks(variant):
    spec, defs = VARIANTS[variant], DEFS[variant]
    core = DEFS[spec["core"]]
    assert set(defs) - set(core) == spec["own"], f"{variant}.py's own definitions: {sorted(set(defs) - set(core))}"
    assert set(core) - set(defs) == set(), f"{variant}.py lacks {sorted(set(core) - set(defs))} of {spec['core']}.py"
    for name in core:
        if name in spec["changed"]:
            assert defs[name] != core[name], f"{variant}.py: {name} is listed as changed but is the core's text"
            bad = unmarked_hunks(core[name], defs[name], spec["marker"])
            assert not bad, f"{variant}.py: {name} differs from {spec['core']}.py's without {spec['marker']}:\n" + (
                "\n...\n".join(bad)
            )
        else:
            diff = "".join(difflib.unified_diff(core[name].splitlines(True), defs[name].splitlines(True)))
            assert defs[name] == core[name], f"{variant}.py: {name} differs from {spec['core']}.py's:\n{diff}"
    for name in spec["own"]:
        assert spec["marker"] in defs[name], f"{variant}.py: {name} does not say it is the idea ({spec['marker']})"


def test_the_drift_check_names_the_file_and_the_definition():
    """A variant's copy of compute_gae edited alone: the check above must fail and say where."""
    spec = VARIANTS["ppo_continuous_action_ray_torchcompile"]
    edited = DEFS["ppo_continuous_action_ray_torchcompile"]["compute_gae"].replace("shift *= 2", "shift *= 3")
    assert edited != DEFS[spec["core"]]["compute_gae"]
    assert unmarked_hunks(DEFS[spec["core"]]["compute_gae"], edited, spec["marker"])  # as if listed as changed
    marked = edited.replace("shift *= 3", "shift *= 3  # Runners: a change of the idea")
    assert not unmarked_hunks(DEFS[spec["core"]]["compute_gae"], marked, spec["marker"])


@pytest.mark.parametrize("core", CORES)
def test_cores_hold_no_scale_code(core):
    source = (SCRIPTS / f"{core}.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        assert not [n for n in names if n == "ray" or n.startswith(("ray.", "torch.distributed"))], ast.unparse(node)
    assert "Runners:" not in source and "DDP:" not in source


def plumbing(path):
    """The file's lines from its `# Plumbing` line to the end."""
    lines = path.read_text().splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("# Plumbing")) :]


def test_the_plumbing_is_one_text_in_every_file():
    assert len(FILES) == 12 and set(PAIRS) | {f"{p}_torchcompile" for p in PAIRS} | set(VARIANTS) == set(STEMS)
    reference = plumbing(FILES[0])
    for path in FILES[1:]:
        assert plumbing(path) == reference, f"{path.name}: the plumbing differs from {FILES[0].name}'s"


@pytest.mark.parametrize("path", FILES, ids=STEMS)
def test_the_file_reads_top_to_bottom(path):
    order = [n.name for n in ast.parse(path.read_text()).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert order[:2] == ["Args", "check_args"], order  # the flags, then what each may be
    assert order[-3:] == ["main", "check", "RunLog"], order  # the algorithm, then the plumbing
    assert len(plumbing(path)) <= 110, len(plumbing(path))


@pytest.mark.parametrize("path", FILES, ids=STEMS)
def test_no_trailing_comment_pushes_a_line_past_100_columns(path):
    """A comment that makes its line long goes on its own line above (LeanRL's files have about one such line)."""
    source = path.read_text()
    lines = source.splitlines()
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    code = {row for t in tokens if t.type not in skip for row in range(t.start[0], t.end[0] + 1)}
    trailing = [t.start[0] for t in tokens if t.type == tokenize.COMMENT and t.start[0] in code]
    long = [f"{path.name}:{row}: {lines[row - 1]}" for row in trailing if len(lines[row - 1]) > 100]
    assert not long, "\n".join(long)


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


@pytest.mark.parametrize("path", FILES, ids=STEMS)
def test_no_walrus_and_no_named_lambda_anywhere(path):
    for node in ast.walk(ast.parse(path.read_text())):
        assert not isinstance(node, ast.NamedExpr), f"{path.name}:{node.lineno}: {ast.unparse(node)}"
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            raise AssertionError(f"{path.name}:{node.lineno}: a lambda assigned to a name: {ast.unparse(node)}")


def size_table():
    """{file: (lines, CleanRL's counterpart's lines or None, LeanRL's or None)} from the README's size table: the rows
    between its `<!-- sizes -->` and `<!-- /sizes -->` markers, `| `scripts/x.py` | 712 | 353 | 403 |`."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- sizes -->", 1)[1].split("<!-- /sizes -->", 1)[0]
    rows = {}
    for line in block.splitlines():
        match = re.match(r"\|\s*`scripts/(\w+)\.py`\s*\|\s*(\d+)\s*\|([^|]*)\|([^|]*)\|", line)
        if match:
            counts = [re.search(r"\d+", cell) for cell in match.groups()[2:]]
            rows[match[1]] = (int(match[2]), *[int(c[0]) if c else None for c in counts])
    return rows


def test_the_readme_size_table_is_true():
    rows = size_table()
    assert set(rows) == set(STEMS), set(rows) ^ set(STEMS)
    for stem, (lines, *_) in rows.items():
        assert lines == len((SCRIPTS / f"{stem}.py").read_text().splitlines()), f"README: {stem}.py has {lines} lines?"
