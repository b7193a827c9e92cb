"""The cut: each core file's part 1, its `Run:` statements removed (tests/helpers/cut.py), is a file a copier can take
alone: ruff finds no unused import and no undefined name in it, and it trains on a machine without CUDA with the
default flags but for a short budget."""

import ast
import subprocess
import sys

import pytest
from helpers.cut import strip
from helpers.scripts import SCRIPTS
from test_files import CORES

# A short run of each stripped file: past the start of learning, the default flags otherwise (no --no-cuda).
SHORT = {
    "dqn": ["--total-timesteps", 700, "--learning-starts", 300],
    "sac_continuous_action": ["--total-timesteps", 400, "--learning-starts", 200],
    "td3_continuous_action": ["--total-timesteps", 400, "--learning-starts", 200],
    "ppo_continuous_action": ["--num-steps", 64, "--total-timesteps", 128],
    "ppo_atari": ["--num-envs", 4, "--num-steps", 32, "--total-timesteps", 256],
}


def short_flags(stem):
    return [str(flag) for flag in SHORT[stem.removesuffix("_torchcompile")]]


def stripped(stem, tmp_path):
    path = tmp_path / f"{stem}.py"  # its own name: --exp-name's default reads it
    path.write_text(strip((SCRIPTS / f"{stem}.py").read_text()))
    return path


def test_the_cut_of_a_small_file():
    """A marked `with` keeps its body one level out; a marked statement goes with its block and the comment lines just
    above it; a block left empty holds `pass`; the appendix goes; the guard calls main."""
    source = """import tyro


def main(args):
    run = start()  # Run: the run
    with run.guard():  # Run: stops
        for step in range(3):
            # said of the row
            if step:  # Run: a row
                run.row(step)
            print(step)
    for _ in range(2):
        run.tick()  # Run:
    return run  # Run:


# Appendix: what runs the run.
def start():
    pass
"""
    expected = """import tyro


def main(args):
    for step in range(3):
        print(step)
    for _ in range(2):
        pass


if __name__ == "__main__":
    main(tyro.cli(Args))
"""
    assert strip(source) == expected


@pytest.mark.parametrize("stem", CORES)
def test_the_stripped_file_passes_ruff(stem, tmp_path):
    """No unused import and no undefined name: every part-1 statement that needs the appendix is marked `Run:`, and
    the imports only the appendix uses live in it."""
    path = stripped(stem, tmp_path)
    text = path.read_text()
    assert "Run:" not in text and "# Appendix" not in text
    defined = {n.name for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"Args", "main"} <= defined
    cmd = ["ruff", "check", "--isolated", "--no-cache", "--select", "F401,F821", "--output-format", "concise", str(path)]
    checked = subprocess.run(cmd, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# Runs a stripped file as `python FILE FLAGS...` would, counting the optimizers' steps (Adam's, which every file uses).
COUNTING = """
import runpy, sys, torch
steps, step = [0], torch.optim.Adam.step
def counted(self, *args, **kwargs):
    steps[0] += 1
    return step(self, *args, **kwargs)
torch.optim.Adam.step = counted
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
print("optimizer steps:", steps[0])
"""


@pytest.mark.parametrize("stem", CORES)
def test_the_stripped_file_trains(stem, tmp_path):
    """A short run past the start of learning, the default flags otherwise: exit 0, no traceback, the optimizers
    stepped, and no run folder (what writes it is the appendix's)."""
    path = stripped(stem, tmp_path)
    cmd = [sys.executable, "-c", COUNTING, str(path), *short_flags(stem)]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    steps = int(done.stdout.strip().splitlines()[-1].removeprefix("optimizer steps: "))
    assert steps > 0, done.stdout[-2000:]
    assert not (tmp_path / "runs").exists()
