"""The files a reader copies: formatted as CleanRL's (ruff at 127 columns), in two parts (the algorithm up to the end of
`main`, then the appendix of infrastructure), one text for every definition they share, each variant file its core file
plus marked hunks, cores free of scale code, and each file's lengths as the size table says them."""

import ast
import difflib
import io
import re
import tokenize

import pytest
from helpers.cut import strip
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
        changed={"Args", "check_args", "main", "Run"},  # Run: a lost runner ends the loop
        own={"check_runners", "EnvRunner", "Runners"},
    ),
    "ppo_atari_multigpu_torchcompile": dict(
        core="ppo_atari_torchcompile",
        marker="DDP:",
        changed={"Args", "check_args", "main", "make_ppo", "Run"},  # make_ppo: the all_reduce; Run: world_size
        own={"QuietRun"},
    ),
}
CORES = [p for p in STEMS if p not in VARIANTS]
ATARI = [s for s in STEMS if s.startswith("ppo_atari")]  # envpool's envs; the others are gymnasium's
GYM = [s for s in STEMS if s not in ATARI]
FAST_PPO_DQN = ["dqn_torchcompile", *[s for s in STEMS if s.startswith("ppo_") and s.endswith("torchcompile")]]
# Definitions that several files share and that must be one text in every file that has them: (name, files), files
# None for every file that defines the name. The pairs' own classes and functions differ by the speed tricks.
EVERY_FILE = ["check_run_flags", "start_run", "check", "Run", "RESUMABLE", "CHECKPOINT_VERSION", "NUMPY", "ask_to_stop"]
EVERY_FILE += ["so_far", "states", "load_states", "checkpoint_due", "save_checkpoint", "save", "random_streams"]
EVERY_FILE += ["set_random_streams", "load_checkpoint", "resume"]
APPENDIX = [*EVERY_FILE, "silence_v4_notices", "bf16_matmuls"]
SNAPSHOT = ["envs_ignore_signals", "Snapshot", "layer_state", "set_layer_state", "env_state", "set_env_state"]
MUJOCO = [s for s in STEMS if s.startswith(("sac", "td3", "ppo_continuous"))]  # their default tasks are MuJoCo's
PPO_CONTINUOUS = [s for s in STEMS if s.startswith("ppo_continuous")]
ONE_TEXT = [(name, STEMS) for name in ["__main__", *EVERY_FILE]]  # the shared appendix, in all twelve
ONE_TEXT += [(name, None) for name in ["silence_v4_notices", "bf16_matmuls"]]
ONE_TEXT += [(name, GYM) for name in SNAPSHOT]  # a gymnasium env's state, for checkpoints
ONE_TEXT += [("env_physics", MUJOCO)]
ONE_TEXT += [("env_state", ATARI), ("set_env_state", ATARI)]  # envpool's, which cannot be saved
# evaluate: one text for the envs played alike
ONE_TEXT += [("evaluate", [s for s in GYM if s not in PPO_CONTINUOUS]), ("evaluate", ATARI), ("evaluate", PPO_CONTINUOUS)]
# A shared definition's branch that only some files need is their marked hunk of the one text (the first file's, which
# has none): MuJoCo's physics in an env's snapshot, NEXT_STEP's pending resets (PPO's gymnasium envs), and the two
# variants' ideas.
HUNK_MARKERS = {stem: () for stem in STEMS}
HUNK_MARKERS.update({stem: ("MuJoCo:",) for stem in MUJOCO})
HUNK_MARKERS.update({stem: ("MuJoCo:", "NEXT_STEP:") for stem in PPO_CONTINUOUS})
HUNK_MARKERS["ppo_continuous_action_ray_torchcompile"] += ("Runners:",)
HUNK_MARKERS["ppo_atari_multigpu_torchcompile"] = ("DDP:",)
ONE_TEXT += [(name, None) for name in ["GRAPH_MODES", "compiled", "adam_settings", "explained_variance", "layer_init"]]
ONE_TEXT += [("EpisodeTracker", ATARI)]  # part 1's: CleanRL's full-game scores
ONE_TEXT += [("check_fast_flags", FAST_PPO_DQN)]


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
        elif isinstance(node, ast.AugAssign):  # (a list continued: RESUMABLE += [...])
            name = ast.unparse(node.target)
            found[name] += "".join(lines[node.lineno - 1 : node.end_lineno])
            continue
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            name = "__main__"
        else:
            continue  # imports: a variant may add its own
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        found[name] = "".join(lines[first - 1 : node.end_lineno])
    return found


DEFS = {p.stem: definitions(p) for p in FILES}


def drift(name, files, defs):
    """Where a shared definition's copies differ but by the hunks their markers allow (HUNK_MARKERS): one line naming the
    file and the definition, with the diff. The first file's copy is the one text, and carries no hunk."""
    files = files or [stem for stem in STEMS if name in defs[stem]]
    assert len(files) >= 2, (name, files)
    reference = files[0]
    every = {marker for markers in HUNK_MARKERS.values() for marker in markers}
    hunked = [line for line in defs[reference][name].splitlines() if any(marker in line for marker in every)]
    assert not hunked, f"{reference}.py: {name}, the one text, has a marked hunk: {hunked[0]}"
    for stem in files[1:]:
        if name not in defs[stem]:
            return f"{stem}.py has no {name}"
        if defs[stem][name] == defs[reference][name]:
            continue
        if HUNK_MARKERS[stem] and not unmarked_hunks(defs[reference][name], defs[stem][name], HUNK_MARKERS[stem]):
            continue
        diff = "".join(difflib.unified_diff(defs[reference][name].splitlines(True), defs[stem][name].splitlines(True)))
        return f"{stem}.py: {name} differs from {reference}.py's:\n{diff}"
    return None


@pytest.mark.parametrize("name,files", ONE_TEXT, ids=[f"{n}-{len(f) if f else 'all'}" for n, f in ONE_TEXT])
def test_a_shared_definition_is_one_text_in_every_file(name, files):
    problem = drift(name, files, DEFS)
    assert problem is None, problem


@pytest.mark.parametrize(
    "stem,name,files",
    [
        ("sac_continuous_action", "save_checkpoint", STEMS),
        ("td3_continuous_action_torchcompile", "env_state", GYM),
        ("sac_continuous_action", "Snapshot", GYM),  # a file with MuJoCo: hunks, given an unmarked one
    ],
)
def test_the_drift_check_names_the_file_and_the_definition_it_breaks(stem, name, files):
    """One copy of a shared appendix definition edited alone (a baseline's save_checkpoint, a fast file's env_state):
    the check fails, naming that file and that definition."""
    defs = {s: dict(d) for s, d in DEFS.items()}
    defs[stem][name] = defs[stem][name].replace("\n", "\n    pass\n", 1)
    problem = drift(name, files, defs)
    assert problem is not None and problem.startswith(f"{stem}.py: {name} differs from "), problem


def test_a_hunk_needs_a_marker_its_file_may_carry():
    """A MuJoCo: hunk is the MuJoCo files' alone: in DQN's Snapshot the check fails; in SAC's it passes."""
    defs = {s: dict(d) for s, d in DEFS.items()}
    hunk = "        return dict(layers=layers)\n"
    assert hunk in defs["dqn_torchcompile"]["Snapshot"]
    marked = "        physics = None  # MuJoCo: none here\n" + hunk
    defs["dqn_torchcompile"]["Snapshot"] = defs["dqn_torchcompile"]["Snapshot"].replace(hunk, marked)
    assert drift("Snapshot", GYM, defs).startswith("dqn_torchcompile.py: Snapshot differs from ")
    assert drift("Snapshot", GYM, DEFS) is None and "# MuJoCo:" in DEFS["sac_continuous_action"]["Snapshot"]


def unmarked_hunks(core_text, variant_text, markers):
    """The hunks of the variant's text against the core's that carry no marker (one, or any of a tuple): each added or
    changed run of lines must hold a marker in one of its lines; a removal must have it on a line beside the place it
    was."""
    core, variant = core_text.splitlines(), variant_text.splitlines()
    markers = (markers,) if isinstance(markers, str) else markers
    bad = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, core, variant, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        near = variant[j1:j2] if j2 > j1 else variant[max(j1 - 1, 0) : j1 + 1]
        if not any(marker in line for line in near for marker in markers):
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


def parts(path):
    """The file's part 1 (from the top to the end of `main`) and its appendix (from the next line to the end)."""
    source = path.read_text()
    main = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "main")
    lines = source.splitlines()
    return lines[: main.end_lineno], lines[main.end_lineno :]


# what only the appendix holds: the infrastructure a reader of the algorithm need not read
INFRASTRUCTURE = {"check_args", "check_fast_flags", "check_runners", "evaluate", "start_run", "Run"}
INFRASTRUCTURE |= {"check", "QuietRun", "env_physics", *APPENDIX, *SNAPSHOT}


@pytest.mark.parametrize("path", FILES, ids=STEMS)
def test_the_algorithm_comes_first_and_the_appendix_after_main(path):
    part1, appendix = parts(path)
    body = ast.parse(path.read_text()).body
    first = [n.name for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))][0]
    assert first == "Args", first  # the flags, then the algorithm
    opening = next(line for line in appendix if line.strip())
    assert opening.startswith("# Appendix") and "same text" in opening + appendix[appendix.index(opening) + 1], opening
    names = definitions(path)
    after = {name for name in names if names[name] in "\n".join(appendix) + "\n"}
    assert set(names) & INFRASTRUCTURE <= after, sorted(set(names) & INFRASTRUCTURE - after)  # all in the appendix
    assert not after - INFRASTRUCTURE - {"__main__"}, sorted(after - INFRASTRUCTURE)  # and nothing else
    assert isinstance(body[-1], ast.If) and "__main__" in ast.unparse(body[-1].test)  # the guard is the last statement


@pytest.mark.parametrize("path", FILES, ids=STEMS)
def test_main_reads_like_leanrl_s(path):
    """Each piece of infrastructure in main is one call into the appendix: no try/except, no signal handling, no
    checkpoint internals in main (its loop goes on in plain sight, as in CleanRL)."""
    source = path.read_text()
    main = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "main")
    for node in ast.walk(main):
        assert not isinstance(node, ast.Try), f"{path.name}:{node.lineno}: a try in main"
    text = ast.unparse(main)
    hidden = ["signal.signal", "set_env_state(", "env_state(envs)", "envs.close()"]
    if path.stem not in VARIANTS:  # (a variant's idea may spell out what its core calls in one line)
        hidden += ["save_checkpoint(", "checkpoint_due(", "resume(args)", "Run(", "load_states("]
    assert not [h for h in hidden if h in text], [h for h in hidden if h in text]


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


@pytest.mark.parametrize("path", FILES, ids=STEMS)
def test_the_appendix_is_plain(path):
    """No walrus, no tuple assignment of more than three names, no conditional expression inside another, no
    __import__: the appendix is read by everyone who looks for how the run is run, and must read at a glance."""
    tree = ast.parse("\n".join(parts(path)[1]))
    for node in ast.walk(tree):
        assert not isinstance(node, ast.NamedExpr), ast.unparse(node)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple):  # (a call's results may be unpacked)
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
    """{file: (lines, part 1's lines, the stripped file's lines or None, CleanRL's counterpart's lines or None, LeanRL's
    or None)} from the size table in doc/sizes.md: the rows between its `<!-- sizes -->` and `<!-- /sizes -->` markers,
    `| `scripts/x.py` | 712 | 380 | 320 | 353 (...) | 403 (...) |`."""
    text = (ROOT / "doc" / "sizes.md").read_text()
    block = text.split("<!-- sizes -->", 1)[1].split("<!-- /sizes -->", 1)[0]
    rows = {}
    for line in block.splitlines():
        match = re.match(r"\|\s*`scripts/(\w+)\.py`\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|([^|]*)\|([^|]*)\|([^|]*)\|", line)
        if match:
            counts = [re.search(r"\d+", cell) for cell in match.groups()[3:]]
            rows[match[1]] = (int(match[2]), int(match[3]), *[int(c[0]) if c else None for c in counts])
    return rows


def test_the_size_table_is_true():
    rows = size_table()
    assert set(rows) == set(STEMS), set(rows) ^ set(STEMS)
    for stem, (lines, part1, stripped, *_) in rows.items():
        path = SCRIPTS / f"{stem}.py"
        assert lines == len(path.read_text().splitlines()), f"doc/sizes.md: {stem}.py has {lines} lines?"
        assert part1 == len(parts(path)[0]), f"doc/sizes.md: {stem}.py's part 1 has {part1} lines?"
        expected = len(strip(path.read_text()).splitlines()) if stem in CORES else None
        assert stripped == expected, f"doc/sizes.md: {stem}.py's stripped file has {stripped} lines?"
