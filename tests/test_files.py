"""The files a reader copies: formatted as CleanRL's (ruff at 127 columns), in two parts (the algorithm up to the end of
`main`, then the appendix of infrastructure), one text for every definition they share, each variant file its core file
plus marked hunks, cores free of scale code, and each file's lengths as the size table says them."""

import ast
import difflib
import io
import re
import shutil
import tokenize

import pytest
from helpers.cut import cut
from helpers.scripts import ROOT, SCRIPTS, load_tool
from helpers.shared import shared

FILES = sorted(SCRIPTS.glob("*.py"))
STEMS = [p.stem for p in FILES]
PAIRS = ["ppo_atari", "ppo_continuous_action", "sac_continuous_action", "td3_continuous_action", "dqn"]
# Variant files, one idea each: the core file they are made from, the marker on every line of the idea, the top-level
# definitions whose text the idea changes (every changed hunk carries the marker), and the variant's own definitions.
VARIANTS = {
    "ppo_continuous_action_ray_torchcompile": dict(
        core="ppo_continuous_action_torchcompile",
        marker="Runners:",
        # Run: a lost runner ends the loop; RESUMABLE: where the runners run may change
        changed={"Args", "check_args", "main", "Run", "RESUMABLE"},
        own={"check_runners", "EnvRunner", "Runners"},
    ),
    "ppo_atari_multigpu_torchcompile": dict(
        core="ppo_atari_torchcompile",
        marker="DDP:",
        # make_ppo: the all_reduce; Run: world_size, the ranks' agreed stop; load_checkpoint: as many ranks
        changed={"Args", "check_args", "main", "make_ppo", "Run", "load_checkpoint"},
        own={"QuietRun"},
    ),
}
CORES = [p for p in STEMS if p not in VARIANTS]
ATARI = [s for s in STEMS if s.startswith("ppo_atari")]  # envpool's envs; the others are gymnasium's
GYM = [s for s in STEMS if s not in ATARI]
# The definitions the scripts share are written into them from one text (tools/shared.py, its SHARED and
# HUNK_MARKERS); the infrastructure the appendix holds
EVERY_FILE, SNAPSHOT, HUNK_MARKERS = shared.EVERY_FILE, shared.SNAPSHOT, shared.HUNK_MARKERS
APPENDIX = [*EVERY_FILE, "silence_v4_notices"]


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


drift, unmarked_hunks = shared.drift, shared.unmarked_hunks
GROUPS = shared.groups(DEFS)
TEXTS = shared.read_text()


@pytest.mark.parametrize("name,files", GROUPS, ids=[f"{n}-{f[0]}" for n, f in GROUPS])
def test_a_shared_definition_is_one_text_in_every_file(name, files):
    """Each copy is tools/shared_text.py's text but for its file's marked hunks, the first file's exactly."""
    assert (name, files[0]) in TEXTS, f"shared_text.py has no {name}: {files[0]}"
    assert DEFS[files[0]][name] == TEXTS[name, files[0]], f"{files[0]}.py: {name} is not shared_text.py's"
    problem = drift(name, files, DEFS, TEXTS[name, files[0]])
    assert problem is None, problem


def test_the_shared_text_holds_the_shared_definitions_alone():
    assert shared.check() == []
    assert set(TEXTS) == {(name, files[0]) for name, files in GROUPS}, set(TEXTS) ^ {(n, f[0]) for n, f in GROUPS}


@pytest.mark.parametrize(
    "stem,name,files",
    [
        ("sac_continuous_action", "resume", STEMS),
        ("td3_continuous_action_torchcompile", "env_state", GYM),
        ("sac_continuous_action", "Snapshot", GYM),  # a file with MuJoCo: hunks, given an unmarked one
    ],
)
def test_the_drift_check_names_the_file_and_the_definition_it_breaks(stem, name, files):
    """One copy of a shared appendix definition edited alone (a baseline's resume, a fast file's env_state):
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
    lines, end = source.splitlines(), main.end_lineno
    while lines[end].startswith("    #"):  # main's last comment lines (its `# Cut:`) are main's
        end += 1
    return lines[:end], lines[end:]


# what only the appendix holds: the infrastructure a reader of the algorithm need not read
INFRASTRUCTURE = {"check_args", "check_runners", "evaluate", "start_run", "Run"}
INFRASTRUCTURE |= {"check", "QuietRun", "env_physics", "explained_variance", "obs_statistics", *APPENDIX, *SNAPSHOT}


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
    """{file: (lines, part 1's lines, the stripped file's lines or None, CleanRL's counterpart's lines whole, less its
    logging (None, None where it has none), LeanRL's likewise)} from the size table in doc/sizes.md: the rows between
    its markers, `| `scripts/x.py` | 712 | 380 | 320 | 353 / 302 (...) | 325 / 275 (...) |`."""
    text = (ROOT / "doc" / "sizes.md").read_text()
    block = text.split("<!-- sizes -->", 1)[1].split("<!-- /sizes -->", 1)[0]
    rows = {}
    for line in block.splitlines():
        match = re.match(r"\|\s*`scripts/(\w+)\.py`\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|([^|]*)\|([^|]*)\|([^|]*)\|", line)
        if match:
            stripped = re.search(r"\d+", match[4])
            anchors = [re.match(r"\s*(\d+) / (\d+)", cell) for cell in (match[5], match[6])]
            pairs = [(int(a[1]), int(a[2])) if a else (None, None) for a in anchors]
            rows[match[1]] = (int(match[2]), int(match[3]), int(stripped[0]) if stripped else None, *pairs[0], *pairs[1])
    return rows


def stripped_ratios(rows):
    """The stripped files' line ranges and their ratios to their anchors, whole and less their logging: the baselines'
    to CleanRL's files, the fast files' to LeanRL's, as the pages state them."""
    baselines = [r for stem, r in rows.items() if r[2] and not stem.endswith("_torchcompile")]
    fast = [r for stem, r in rows.items() if r[2] and stem.endswith("_torchcompile")]
    said = {}
    for name, group, whole, less in (("baselines", baselines, 3, 4), ("fast", fast, 5, 6)):
        sizes = [r[2] for r in group]
        ratios_whole, ratios_less = [r[2] / r[whole] for r in group], [r[2] / r[less] for r in group]
        said[name] = (min(sizes), max(sizes), *[f"{f(x):.2f}" for x in (ratios_whole, ratios_less) for f in (min, max)])
    return said


def test_the_size_table_is_true():
    rows = size_table()
    assert set(rows) == set(STEMS), set(rows) ^ set(STEMS)
    for stem, (lines, part1, stripped, *_) in rows.items():
        path = SCRIPTS / f"{stem}.py"
        assert lines == len(path.read_text().splitlines()), f"doc/sizes.md: {stem}.py has {lines} lines?"
        assert part1 == len(parts(path)[0]), f"doc/sizes.md: {stem}.py's part 1 has {part1} lines?"
        expected = len(cut.cut(path).splitlines()) if stem in CORES else None
        assert stripped == expected, f"doc/sizes.md: {stem}.py's stripped file has {stripped} lines?"
    # the page's sentence: like for like (less their logging), then whole
    text = " ".join((ROOT / "doc" / "sizes.md").read_text().split())
    b, f = stripped_ratios(rows)["baselines"], stripped_ratios(rows)["fast"]
    sentence = f"the stripped baselines are {b[4]}-{b[5]}x their CleanRL file less its logging ({b[2]}-{b[3]}x whole),"
    sentence += f" and the stripped fast files {f[4]}-{f[5]}x their LeanRL file less its logging ({f[2]}-{f[3]}x whole)."
    assert sentence in text, sentence


def test_the_marked_statements_of_main_are_the_ones_listed():
    """doc/sizes.md lists the statements of each script's `main` that its stripped file goes without, as tools/sizes.py
    finds them: a marked statement added, changed or removed shows there. Each listed line is a line of its script."""
    sizes = load_tool(ROOT / "tools" / "sizes.py")
    text = (ROOT / "doc" / "sizes.md").read_text()
    listed = sizes.between(text, "marked")[1]
    assert listed == sizes.marked_lists(), "doc/sizes.md: the marked statements differ: python tools/sizes.py rewrites them"
    for stem in STEMS:
        lines = {line.strip() for line in (SCRIPTS / f"{stem}.py").read_text().splitlines()}
        statements = sizes.marked(stem)
        assert statements and all(s in lines and "# Run:" in s for s in statements), stem
        assert f"<code>scripts/{stem}.py</code>: {len(statements)} statements" in listed, stem


def test_the_writer_puts_one_edit_into_every_file_that_shares_the_text(tmp_path, monkeypatch):
    """tools/shared.py on a copy of the scripts: an edit of Snapshot's one text reaches every gymnasium file,
    the MuJoCo files' hunks kept around it, and no envpool file; the check then passes. An edit of the line a hunk
    replaces stops the write, naming the first file it does not fit, and nothing is written."""
    scripts, text = tmp_path / "scripts", tmp_path / "shared_text.py"
    shutil.copytree(SCRIPTS, scripts)
    original = shared.TEXT.read_text()
    monkeypatch.setattr(shared, "SCRIPTS", scripts)
    monkeypatch.setattr(shared, "TEXT", text)
    line = "        layers, env = [], self.env\n"
    assert original.count(line) == 1
    text.write_text(original.replace(line, line.rstrip("\n") + "  # an edit of the one text\n"))
    shared.write()
    for stem in STEMS:
        source = (scripts / f"{stem}.py").read_text()
        assert ("self.env  # an edit of the one text" in source) == (stem in GYM), stem
    assert "MuJoCo: and the simulator's physics" in (scripts / "sac_continuous_action.py").read_text()
    assert shared.check() == []
    # the line SAC's MuJoCo: hunk replaces, edited in the text: its hunk no longer fits
    written = {p.name: p.read_text() for p in scripts.glob("*.py")}
    replaced = "        return dict(layers=layers)\n"
    text.write_text(text.read_text().replace(replaced, "        return dict(layers=list(layers))\n"))
    with pytest.raises(SystemExit, match=r"ppo_continuous_action\.py: Snapshot: its marked hunk does not fit"):
        shared.write()
    assert {p.name: p.read_text() for p in scripts.glob("*.py")} == written


def test_the_writer_refuses_a_copy_edited_by_hand(tmp_path, monkeypatch):
    """A shared definition edited in a script, not in tools/shared_text.py, would be reverted by the next write: the
    writer refuses it, naming the file, the line and the definition, and writes nothing; in the reference file (whose
    copy the others are merged against) and in another file alike. An edit of the one text still writes."""
    scripts, text = tmp_path / "scripts", tmp_path / "shared_text.py"
    shutil.copytree(SCRIPTS, scripts)
    text.write_text(shared.TEXT.read_text())
    monkeypatch.setattr(shared, "SCRIPTS", scripts)
    monkeypatch.setattr(shared, "TEXT", text)
    docstring = (
        '    """The parts as states() kept them, put back in place: compiled and captured functions read these tensors."""\n'
    )
    for stem in ("dqn", "sac_continuous_action"):  # dqn.py's copy is load_states' reference; SAC's is merged against it
        path = scripts / f"{stem}.py"
        source = path.read_text()
        assert source.count(docstring) == 1
        path.write_text(source.replace(docstring, '    """Edited by hand."""\n'))
        written = {p.name: p.read_text() for p in scripts.glob("*.py")}
        with pytest.raises(SystemExit) as stop:
            shared.write()
        line = 1 + written[path.name].splitlines().index('    """Edited by hand."""')
        assert str(stop.value).startswith(f"shared.py: error: scripts/{stem}.py:{line}: load_states was edited by hand")
        assert "tools/shared_text.py under '# === load_states: dqn'" in str(stop.value)
        assert {p.name: p.read_text() for p in scripts.glob("*.py")} == written  # nothing written
        path.write_text(source)
    text.write_text(text.read_text().replace(docstring, '    """The parts as states() kept them, put back in place."""\n'))
    shared.write()
    assert all('"""The parts as states() kept them, put back in place."""' in p.read_text() for p in scripts.glob("*.py"))
    assert shared.check() == []
