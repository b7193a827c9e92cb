"""The definitions the scripts share, written into them from one text: tools/shared_text.py.

    python tools/shared.py            # after an edit of shared_text.py: writes it into every file that shares it
    python tools/shared.py --check    # each file's copy is the one text, but for its marked hunks

Each script stands alone (nothing imports shared_text.py at run time), so a definition that several files share (the
whole shared appendix, the env snapshots, `evaluate`, `compiled`, ...) is a copy in each: SHARED says which files
share which definitions. shared_text.py holds each one text once, under a line `# === NAME: STEM` naming the file whose
copy is that text exactly (the first of the files that share it). A branch that only some files need is their marked
hunk of the one text, each of its runs of lines carrying the file's marker (HUNK_MARKERS: `MuJoCo:`, `NEXT_STEP:`,
`Runners:`, `DDP:`). Writing merges each file's hunks into the new text (git merge-file, the file's copy against the
text it was made from, the reference file's copy); a hunk that no longer fits stops the write with one line naming the
file and the definition, and nothing is written. --check is what tests/test_files.py runs.

An edit made in a script by hand, not in shared_text.py, would be lost to the next write, so the writer refuses it:
each header line records the hash of the text it last wrote (`# === NAME: STEM  written: HASH`), and a reference copy
that is neither that text nor the new one, or another file's copy that differs from it outside its marked hunks, stops
the write with one line naming the file, the line and how to move the edit into shared_text.py; nothing is written.
"""

import argparse
import ast
import difflib
import hashlib
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
TEXT = pathlib.Path(__file__).with_name("shared_text.py")

STEMS = sorted(p.stem for p in SCRIPTS.glob("*.py"))
ATARI = [s for s in STEMS if s.startswith("ppo_atari")]  # envpool's envs; the others are gymnasium's
GYM = [s for s in STEMS if s not in ATARI]
MUJOCO = [s for s in STEMS if s.startswith(("sac", "td3", "ppo_continuous"))]  # their default tasks are MuJoCo's
PPO_CONTINUOUS = [s for s in STEMS if s.startswith("ppo_continuous")]
FAST_PPO_DQN = ["dqn_torchcompile", *[s for s in STEMS if s.startswith("ppo_") and s.endswith("torchcompile")]]
# Definitions that several files share and that must be one text in every file that has them: (name, files), files
# None for every file that defines the name. The pairs' own classes and functions differ by the speed tricks.
EVERY_FILE = ["start_run", "check", "check_run_flags", "resume", "load_checkpoint", "RESUMABLE", "CHECKPOINT_VERSION"]
EVERY_FILE += ["NUMPY", "Run", "states", "load_states", "random_streams", "set_random_streams"]
SNAPSHOT = ["envs_ignore_signals", "Snapshot", "layer_state", "set_layer_state", "env_state", "set_env_state"]
SHARED = [(name, STEMS) for name in ["__main__", *EVERY_FILE]]  # the shared appendix, in all twelve
SHARED += [(name, None) for name in ["silence_v4_notices", "bf16_matmuls", "explained_variance"]]
SHARED += [(name, GYM) for name in SNAPSHOT]  # a gymnasium env's state, for checkpoints
SHARED += [("env_physics", MUJOCO)]
SHARED += [("obs_statistics", PPO_CONTINUOUS)]
SHARED += [("env_state", ATARI), ("set_env_state", ATARI)]  # envpool's, which cannot be saved
# evaluate: one text for the envs played alike
SHARED += [("evaluate", [s for s in GYM if s not in PPO_CONTINUOUS]), ("evaluate", ATARI), ("evaluate", PPO_CONTINUOUS)]
# part 1's helpers
SHARED += [(name, None) for name in ["GRAPH_MODES", "compiled", "graphed", "adam_settings", "layer_init", "malloc_keep_heap"]]
SHARED += [("EpisodeTracker", ATARI)]  # part 1's: CleanRL's full-game scores
SHARED += [
    ("speed_flags", FAST_PPO_DQN),
    ("speed_flags", ["sac_continuous_action_torchcompile", "td3_continuous_action_torchcompile"]),
]
# A shared definition's branch that only some files need is their marked hunk of the one text (the first file's, which
# has none): MuJoCo's physics in an env's snapshot, NEXT_STEP's pending resets (PPO's gymnasium envs), and the two
# variants' ideas.
HUNK_MARKERS = {stem: () for stem in STEMS}
HUNK_MARKERS.update({stem: ("MuJoCo:",) for stem in MUJOCO})
HUNK_MARKERS.update({stem: ("MuJoCo:", "NEXT_STEP:") for stem in PPO_CONTINUOUS})
HUNK_MARKERS["ppo_continuous_action_ray_torchcompile"] += ("Runners:",)
HUNK_MARKERS["ppo_atari_multigpu_torchcompile"] = ("DDP:",)


def spans(source):
    """{name: (first line, last line)} of a file's top-level classes, functions, assignments (a list continued by `+=`
    included) and `if __name__` block, 1-based."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.Assign):
            name = ast.unparse(node.targets[0])
        elif isinstance(node, ast.AugAssign):  # (a list continued: RESUMABLE += [...])
            name = ast.unparse(node.target)
            found[name] = (found[name][0], node.end_lineno)
            continue
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            name = "__main__"
        else:
            continue  # imports: a variant may add its own
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        found[name] = (first, node.end_lineno)
    return found


def definitions(source):
    """{name: source text} of a file's top-level definitions (spans)."""
    lines = source.splitlines(keepends=True)
    return {name: "".join(lines[first - 1 : last]) for name, (first, last) in spans(source).items()}


def groups(defs):
    """[(name, files)] of SHARED, `None` made the files that define the name; the first file's copy is the text."""
    found = []
    for name, files in SHARED:
        files = files or [stem for stem in STEMS if name in defs[stem]]
        found.append((name, files))
    return found


def read_text(with_hashes=False):
    """{(name, reference stem): text} of shared_text.py, in its order; with_hashes: also {(name, stem): the hash of the
    text last written into the scripts} (None where none is recorded)."""
    texts, hashes, key, lines = {}, {}, None, []
    for line in TEXT.read_text().splitlines(keepends=True):
        if line.startswith("# === "):
            if key:
                texts[key] = "".join(lines).rstrip("\n") + "\n"
            head, _, written = line[len("# === ") :].strip().partition("  written: ")
            name, stem = head.split(": ")
            key, lines = (name, stem), []
            hashes[key] = written or None
        elif key:
            lines.append(line)
    if key:
        texts[key] = "".join(lines).rstrip("\n") + "\n"
    return (texts, hashes) if with_hashes else texts


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def hand_edits(groups_, defs, sources, texts, hashes):
    """One line for the first copy edited by hand: a reference copy that is neither the text last written (its hash) nor
    the new text, or another copy that differs from the reference copy outside its file's marked hunks."""
    for name, files in groups_:
        reference, new = files[0], texts[name, files[0]]
        for stem in files:
            copy, base = defs[stem][name], defs[reference][name]
            if stem == reference:
                edited = copy != new and hashes.get((name, reference)) not in (None, digest(copy))
                against = new if edited else None
            else:
                edited = copy != base and not (HUNK_MARKERS[stem] and not unmarked_hunks(base, copy, HUNK_MARKERS[stem]))
                against = base
            if edited:
                first = spans(sources[stem])[name][0]
                old, ours = against.splitlines(), copy.splitlines()
                ops = difflib.SequenceMatcher(None, old, ours, autojunk=False).get_opcodes()
                offset = next(j1 for op, _, _, j1, _ in ops if op != "equal")
                where = f"scripts/{stem}.py:{first + min(offset, len(ours) - 1)}"
                return (
                    f"{where}: {name} was edited by hand (it is not the text tools/shared_text.py last wrote there); "
                    f"move the edit into tools/shared_text.py under '# === {name}: {reference}' (or drop it: git checkout "
                    f"scripts/{stem}.py), then write again; nothing written"
                )
    return None


def unmarked_hunks(text, copy, markers):
    """The hunks of a copy against the one text that carry no marker (one, or any of a tuple): each added or changed
    run of lines must hold a marker in one of its lines; a removal must have it on a line beside the place it was."""
    core, variant = text.splitlines(), copy.splitlines()
    markers = (markers,) if isinstance(markers, str) else markers
    bad = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, core, variant, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        near = variant[j1:j2] if j2 > j1 else variant[max(j1 - 1, 0) : j1 + 1]
        if not any(marker in line for line in near for marker in markers):
            bad.append("\n".join(["- " + line for line in core[i1:i2]] + ["+ " + line for line in variant[j1:j2]]))
    return bad


def drift(name, files, defs, text=None):
    """Where a shared definition's copies differ from its one text (`text`, else the first file's copy) but by the
    hunks their markers allow: one line naming the file and the definition, with the diff; None where none does."""
    reference = files[0]
    text = defs[reference][name] if text is None else text
    every = {marker for markers in HUNK_MARKERS.values() for marker in markers}
    hunked = [line for line in text.splitlines() if any(marker in line for marker in every)]
    if hunked:
        return f"{name}, the one text, has a marked hunk: {hunked[0]}"
    for stem in files:
        if name not in defs[stem]:
            return f"{stem}.py has no {name}"
        if defs[stem][name] == text:
            continue
        if HUNK_MARKERS[stem] and not unmarked_hunks(text, defs[stem][name], HUNK_MARKERS[stem]):
            continue
        diff = "".join(difflib.unified_diff(text.splitlines(True), defs[stem][name].splitlines(True)))
        return f"{stem}.py: {name} differs from {reference}.py's:\n{diff}"
    return None


def check(defs=None):
    """The problems, one line each (with a diff): a file's copy that is not the one text but for its marked hunks, a
    text shared_text.py lacks or holds for no group."""
    defs = defs or {stem: definitions((SCRIPTS / f"{stem}.py").read_text()) for stem in STEMS}
    texts, problems = read_text(), []
    wanted = {(name, files[0]): files for name, files in groups(defs)}
    for key in texts.keys() - wanted.keys():
        problems.append(f"shared_text.py: {key[0]}: {key[1]} shares it with no file (SHARED)")
    for (name, reference), files in wanted.items():
        if (name, reference) not in texts:
            problems.append(f"shared_text.py has no {name}: {reference}")
            continue
        if defs[reference][name] != texts[name, reference]:  # the file the text is read from, exactly
            problems.append(f"{reference}.py: {name} is not shared_text.py's (run tools/shared.py)")
            continue
        found = drift(name, files, defs, texts[name, reference])
        if found:
            problems.append(found)
    return problems


def merge(copy, base, new):
    """The copy's hunks (against base, the text it was made from) put into the new text; None where they conflict."""
    if copy == base:
        return new
    with tempfile.TemporaryDirectory() as tmp:
        paths = [pathlib.Path(tmp) / name for name in ("copy", "base", "new")]
        for path, text in zip(paths, (copy, base, new)):
            path.write_text(text)
        done = subprocess.run(["git", "merge-file", "-p", *map(str, paths)], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def write(force=False):
    """shared_text.py into every file that shares each text; nothing written where a hunk does not fit, or (unless
    `force`) where a copy was edited by hand."""
    sources = {stem: (SCRIPTS / f"{stem}.py").read_text() for stem in STEMS}
    defs = {stem: definitions(source) for stem, source in sources.items()}
    texts, hashes = read_text(with_hashes=True)
    new_defs = {stem: {} for stem in STEMS}
    missing = [(name, files[0]) for name, files in groups(defs) if (name, files[0]) not in texts]
    if missing:
        sys.exit(f"shared.py: error: shared_text.py has no {missing[0][0]}: {missing[0][1]}")
    edited = None if force else hand_edits(groups(defs), defs, sources, texts, hashes)
    if edited:
        sys.exit(f"shared.py: error: {edited}")
    for name, files in groups(defs):
        base, new = defs[files[0]][name], texts[name, files[0]]
        for stem in files:
            merged = merge(defs[stem][name], base, new)
            if merged is None:
                sys.exit(f"shared.py: error: {stem}.py: {name}: its marked hunk does not fit the new text; nothing written")
            new_defs[stem][name] = merged
    changed = []
    for stem, source in sources.items():
        lines = source.splitlines(keepends=True)
        for name, (first, last) in sorted(spans(source).items(), key=lambda item: -item[1][0]):
            if name in new_defs[stem] and new_defs[stem][name] != defs[stem][name]:
                lines[first - 1 : last] = [new_defs[stem][name]]
        text = "".join(lines)
        if text != source:
            (SCRIPTS / f"{stem}.py").write_text(text)
            changed.append(stem)
    # each header records the hash of the text now written, for the next write's check of hand edits
    master = TEXT.read_text().splitlines()
    for i, line in enumerate(master):
        if line.startswith("# === "):
            head = line.partition("  written: ")[0]
            master[i] = f"{head}  written: {digest(texts[tuple(head[len('# === ') :].split(': '))])}"
    TEXT.write_text("\n".join(master) + "\n")
    print(f"shared.py: {len(changed)} files written" + (f": {', '.join(changed)}" if changed else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; say where a file's copy is not the text")
    parser.add_argument("--force", action="store_true", help="write over copies edited by hand (their edits are lost)")
    args = parser.parse_args()
    if args.check:
        problems = check()
        for problem in problems:
            print(problem)
        print(f"shared.py: {len(problems)} problems" if problems else "shared.py: every copy is its one text")
        sys.exit(1 if problems else 0)
    write(force=args.force)


if __name__ == "__main__":
    main()
