"""The cut: each core file's part 1, its `Run:` statements removed, as `python tools/cut.py FILE` writes it, is a file a
copier can take alone: formatted; ruff's pyflakes set finds nothing in it; every definition, every value `main`
computes and every flag it accepts is used; it trains on a machine without CUDA with the default flags but for a
short budget, and prints each finished episode's return as CleanRL's files do."""

import ast
import json
import re
import subprocess
import sys

import pytest
import torch
from helpers.cut import cut, leftovers
from helpers.scripts import ROOT, SCRIPTS, run_as_main
from test_files import CORES

# A short run of each stripped file: past the start of learning, the default flags otherwise (no --no-cuda), long
# enough for an episode to end (the MuJoCo files on Pendulum-v1, whose episodes are 200 steps; PPO Atari's full games
# of a random agent, a few hundred steps).
SHORT = {
    "dqn": ["--total-timesteps", 700, "--learning-starts", 300],
    "sac_continuous_action": ["--env-id", "Pendulum-v1", "--total-timesteps", 400, "--learning-starts", 200],
    "td3_continuous_action": ["--env-id", "Pendulum-v1", "--total-timesteps", 400, "--learning-starts", 200],
    "ppo_continuous_action": ["--env-id", "Pendulum-v1", "--num-steps", 64, "--total-timesteps", 256],
    "ppo_atari": ["--num-envs", 2, "--num-steps", 128, "--total-timesteps", 2048],
}


def short_flags(stem):
    return [str(flag) for flag in SHORT[stem.removesuffix("_torchcompile")]]


def stripped(stem, tmp_path):
    """The stripped file, as the command writes it, under the script's own name (--exp-name's default reads it)."""
    path = tmp_path / f"{stem}.py"
    done = subprocess.run(
        [sys.executable, ROOT / "tools" / "cut.py", SCRIPTS / f"{stem}.py", "-o", path], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr
    return path


def test_the_cut_of_a_small_file():
    """A marked `with` keeps its body one level out (its header goes, with the comment lines just above it); a marked
    statement goes with its block and the comment lines just above it; a marked field goes with its docstring; a
    `# Cut:` line under a marked statement takes its place; a block left empty holds `pass`; the appendix goes; the
    guard calls main; ruff formats it."""
    source = """# the file's header stays
import os  # Run: (a marked first statement)
import tyro


class Args:
    seed: int = 1
    \"\"\"the seed\"\"\"
    track: bool = False  # Run:
    \"\"\"the appendix's flag\"\"\"


def main(args):
    run = start()  # Run: the run
    # said of the guard: it goes with its header
    with run.guard():  # Run: stops
        for step in range(3):
            # said of the row
            if step:  # Run: a row
                run.row(step)
            print(step)
            run.episodes.append(step)  # Run:
            # Cut: print(f"episode {step}")
    for _ in range(2):
        run.tick()  # Run:
    try:  # Run: a marked try goes with its except clauses
        run.close()
    except OSError:
        pass

    @run.on_stop  # Run: a marked decorator marks its function
    def stopped():
        pass

    return run  # Run:


# Appendix: what runs the run.
def start():
    pass
"""
    expected = """# the file's header stays
import tyro


class Args:
    seed: int = 1
    \"\"\"the seed\"\"\"


def main(args):
    for step in range(3):
        print(step)
        print(f"episode {step}")
    for _ in range(2):
        pass


if __name__ == "__main__":
    main(tyro.cli(Args))
"""
    assert cut.strip(source) == expected
    assert cut.ruff_format(expected, "small.py") == expected
    # what would cut wrong is refused: a # Cut: line under nothing marked, a Run: mark on no statement's first line,
    # a variant file's idea
    orphan = source.replace("            print(step)\n", "            print(step)\n            # Cut: print(1)\n")
    inner = source.replace("    run = start()  # Run: the run\n", "    run = (\n        start()  # Run:\n    )\n")
    variant = source.replace("    for _ in range(2):\n", "    for _ in range(2):  # DDP: every rank\n")
    for edited, error in [
        (orphan, "a '# Cut:' line right under no marked statement"),
        (inner, "a Run: comment on no statement's first line"),
        (variant, "a variant file (its DDP: lines use the appendix)"),
    ]:
        with pytest.raises(ValueError, match=re.escape(error)):
            cut.strip(edited)


def test_the_command_s_errors_are_one_line(tmp_path):
    (tmp_path / "plain.py").write_text("print(1)\n")
    for args, error in [
        ([tmp_path / "none.py"], f"cut.py: error: no file {tmp_path / 'none.py'}\n"),
        (
            [tmp_path / "plain.py"],
            f"cut.py: error: {tmp_path / 'plain.py'}: no line opens with '# Appendix': not one of the scripts\n",
        ),
        ([SCRIPTS / "dqn.py", "-o", tmp_path / "no" / "x.py"], f"cut.py: error: cannot write {tmp_path / 'no' / 'x.py'}: "),
        (
            [SCRIPTS / "ppo_continuous_action_ray_torchcompile.py"],
            f"cut.py: error: {SCRIPTS / 'ppo_continuous_action_ray_torchcompile.py'}: a variant file (its Runners: lines",
        ),
    ]:
        done = subprocess.run([sys.executable, ROOT / "tools" / "cut.py", *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 2 and done.stderr.startswith(error) and done.stderr.count("\n") == 1, done.stderr


def names_read(tree):
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}


@pytest.mark.parametrize("stem", CORES)
def test_the_stripped_file_is_clean_and_every_flag_does_something(stem, tmp_path):
    """Formatted; ruff's whole pyflakes set finds nothing; every top-level definition is used, every name `main`
    assigns (alone, not unpacked) is read, and every field of `Args` (every flag the file accepts) is read as
    `args.<field>`: what only the appendix reads is marked `Run:` and leaves with it."""
    path = stripped(stem, tmp_path)
    text = path.read_text()
    assert "Run:" not in text and "Cut:" not in text and "# Appendix" not in text
    ruff = [sys.executable, "-m", "ruff"]
    checked = subprocess.run(
        ruff + ["check", "--isolated", "--no-cache", "--select", "F", "--output-format", "concise", path],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    formatted = subprocess.run(
        ruff + ["format", "--isolated", "--line-length", "127", "--check", path], capture_output=True, text=True
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    tree = ast.parse(text)
    read = names_read(tree)
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"Args", "main"} <= defined and not defined - read, f"defined and never used: {sorted(defined - read)}"
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    assigned = [n for n in ast.walk(main) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))]
    stored = {t.id for n in assigned for t in getattr(n, "targets", [getattr(n, "target", None)]) if isinstance(t, ast.Name)}
    unread = stored - names_read(main)  # (names unpacked from a tuple, as CleanRL unpacks envs.step's, may go unread)
    assert not unread, f"main assigns and never reads: {sorted(unread)}"
    args = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args")
    fields = [n.target.id for n in args.body if isinstance(n, ast.AnnAssign)]
    unused = [field for field in fields if not re.search(rf"\bargs\.{field}\b", text)]
    assert not unused, f"flags the stripped file accepts and never reads: {unused}"


@pytest.mark.parametrize("stem", CORES)
def test_the_stripped_file_trains_and_prints_its_returns(stem, tmp_path, monkeypatch):
    """A short run past the start of learning, the default flags otherwise, run as `python FILE FLAGS...` would (in
    this process: run_as_main): exit 0, no traceback, the optimizers stepped (Adam's, which every file uses), a line per
    finished episode as CleanRL prints it, and no run folder (what writes it is the appendix's)."""
    path = stripped(stem, tmp_path)
    steps, step = [0], torch.optim.Adam.step

    def counted(self, *args, **kwargs):
        steps[0] += 1
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", counted)
    done = run_as_main(path, *short_flags(stem), cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert steps[0] > 0, done.stdout[-2000:]
    lines = done.stdout.strip().splitlines()
    printed = r"global_step=\d+, episodic_return=-?\d+(\.\d+)?(, episodic_length=\d+)?"  # (Atari's: its length too)
    episodes = [line for line in lines if re.fullmatch(printed, line)]
    assert episodes and len(episodes) == len(lines), done.stdout[-2000:]  # and nothing else on stdout
    assert not (tmp_path / "runs").exists()


# The speed flags' guards sit in part 1, where the flags are read: the stripped file refuses, warns and falls back as
# the whole file does. (exit status, the lines said)
SPEED_FLAG_LINES = [
    (["--compile-mode", "reduce-overhead"], 1, ["error: --compile-mode reduce-overhead: needs --compile"]),
    (
        ["--compile", "--cudagraphs", "--compile-mode", "max-autotune"],
        1,
        ["error: --compile-mode max-autotune: has its own CUDA graphs, not with --cudagraphs"],
    ),
    (["--cudagraphs", "--no-cuda"], 0, ["warning: --cudagraphs: needs CUDA, running without CUDA graphs"]),
]
SPEED_FLAG = re.compile(r"^(warning|error): --(compile|compile-mode|cudagraphs|precision)\b.*$", re.M)
# Each file's speed_flags on each case's flags as tyro parses them, in one process: [[exit status, stderr], ...] a file
GUARDS = """
import contextlib, importlib.util, io, json, sys
import tyro
found = []
for path in sys.argv[2:]:
    spec = importlib.util.spec_from_file_location("script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    said = []
    for flags in json.loads(sys.argv[1]):
        err, code = io.StringIO(), 0
        with contextlib.redirect_stderr(err):
            try:
                script.speed_flags(tyro.cli(script.Args, args=flags))
            except SystemExit as e:  # sys.exit(message): Python prints it and exits 1
                code = 1
                print(e.code, file=sys.stderr)
        said.append([code, err.getvalue()])
    found.append(said)
print(json.dumps(found))
"""


@pytest.mark.parametrize("stem", [stem for stem in CORES if stem.endswith("_torchcompile")])
def test_the_stripped_file_guards_the_speed_flags_as_the_whole_file_does(stem, tmp_path):
    """Both files' main() checks the speed flags first, and their speed_flags() refuse, warn and fall back alike on
    each case (a short run of the stripped file: test_the_stripped_file_trains_and_prints_its_returns)."""
    path = stripped(stem, tmp_path)
    cases = list(SPEED_FLAG_LINES)
    if stem.startswith(("sac", "td3")):  # eager on a CPU: said once, the run goes on
        cases.append(
            (
                ["--compile", "--no-cuda"],
                0,
                ["warning: --compile: this file runs eager on a CPU, where compiling does not pay"],
            )
        )
    for script in (path, SCRIPTS / f"{stem}.py"):
        main = next(n for n in ast.parse(script.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "main")
        assert ast.unparse(main.body[0]) == "speed_flags(args)", script
    flags = json.dumps([[*short_flags(stem), *case[0]] for case in cases])
    done = subprocess.run(
        [sys.executable, "-c", GUARDS, flags, str(path), str(SCRIPTS / f"{stem}.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for stripped_said, whole_said, (case, code, lines) in zip(*json.loads(done.stdout), cases):
        for said in (stripped_said, whole_said):
            assert said[0] == code and [m.group(0) for m in SPEED_FLAG.finditer(said[1])] == lines, (case, said)


@pytest.mark.parametrize("stem", CORES)
def test_the_stripped_file_leaves_nothing_behind(stem, tmp_path):
    """No value filled for the appendix and never read, none stored and overwritten before a read, no bundle member
    never read, no word for what only the appendix does (metrics.csv, summary.json, model.pt, checkpoints, --resume,
    the evaluation, ...)."""
    assert leftovers(stripped(stem, tmp_path).read_text()) == []


@pytest.mark.parametrize("stem", CORES)
def test_the_stripped_file_closes_its_envs(stem, tmp_path):
    """main ends as CleanRL's files end, closing the envs (the whole file's Run.loop closes them): without it
    --capture-video's last video is not written."""
    tree = ast.parse(stripped(stem, tmp_path).read_text())
    (main,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert ast.unparse(main.body[-1]) == "envs.close()"


def test_the_leftover_check_catches_each_kind():
    store = "def main(args):\n    metrics = {}\n    for x in range(3):\n        metrics.update(a=x)\n"
    member = "from types import SimpleNamespace\n\n\ndef make():\n    return SimpleNamespace(policy=1, agent=2)\n\n\n"
    member += "print(make().policy)\n"
    comment = "def main(args):\n    # the run folder: metrics.csv, model.pt\n    print(args)\n"
    docstring = 'class Args:\n    output_dir: str = "runs"\n    """where the run folder (summary.json) is written"""\n'
    never_read = "def main(args):\n    lrnow = args.learning_rate\n    if args.anneal_lr:\n        lrnow = 0.5\n"
    overwritten = "def main(args):\n    for step in range(9):\n        updates = 0\n        if step > 4:\n"
    overwritten += "            updates = step % 2\n            for _ in range(updates):\n                print(step)\n"
    planted = {
        store: "main stores metrics and never reads it",
        member: "a bundle member never read: agent",
        comment: "words for what the file does not do: # the run folder",
        docstring: "words for what the file does not do: where",
        never_read: "main stores lrnow and never reads it",
        overwritten: "main stores updates and overwrites it before any read",
    }
    for source, problem in planted.items():
        found = leftovers(source)
        assert len(found) == 1 and problem in found[0], (source, found)
    # and none where a read may see the value: on the loop's next turn, past a branch that may not assign it, in a
    # function defined before it
    kept = "def main(args):\n    obs = 0\n    for step in range(3):\n        print(obs)\n        obs = step\n"
    kept += "    x = None\n    if args:\n        x = 1\n    print(x)\n\n    def show():\n        print(y)\n\n"
    kept += "    y = 1\n    y = 2\n    show()\n"
    assert leftovers(kept) == []
