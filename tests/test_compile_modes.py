"""--compile-mode: torch.compile's mode in every fast script, recorded in summary.json's args.
On a CPU: each mode runs past the start of learning (reduce-overhead and max-autotune, which capture CUDA graphs, run
without them, with one warning, as --cudagraphs does), each bad combination gives one line before any work, and the
wrapper of the graph-capturing modes marks a step and returns fresh tensors on every call. Compiled == eager under
max-autotune-no-cudagraphs: test_dqn.py; the graph-capturing modes on a GPU: test_gpu_loops_and_graphs.py and
test_dqn.py (`gpu`)."""

import ast

import numpy as np
import pytest
import torch
import tyro
from helpers.scripts import SCRIPTS, check_summary, load_script, read_metrics, run_main, run_script

FAST = sorted(p.stem for p in SCRIPTS.glob("*_torchcompile.py"))
CUDA = torch.cuda.is_available()
DQN_SHORT = [
    "--total-timesteps",
    600,
    "--learning-starts",
    200,
    "--train-frequency",
    2,
    "--target-network-frequency",
    50,
    "--batch-size",
    32,
    "--buffer-size",
    1000,
    "--measure-burnin",
    2,
    "--log-interval",
    100,
]
PPO_SHORT = [
    "--env-id",
    "Pendulum-v1",
    "--num-envs",
    2,
    "--num-steps",
    128,
    "--num-minibatches",
    4,
    "--update-epochs",
    2,
    "--total-timesteps",
    768,
    "--measure-burnin",
    1,
]
RUNS = [  # script, flags, the mode that runs on this machine
    ("dqn_torchcompile", DQN_SHORT, "reduce-overhead", "reduce-overhead" if CUDA else "default"),
    ("dqn_torchcompile", DQN_SHORT, "max-autotune", "max-autotune" if CUDA else "max-autotune-no-cudagraphs"),
    ("ppo_continuous_action_torchcompile", PPO_SHORT, "max-autotune-no-cudagraphs", "max-autotune-no-cudagraphs"),
]


@pytest.mark.compile
@pytest.mark.parametrize("script,flags,mode,runs", RUNS, ids=[f"{s.split('_')[0]}-{m}" for s, _, m, _ in RUNS])
def test_each_mode_learns(script, flags, mode, runs, tmp_path):
    proc, summary = run_main(script, *flags, "--compile", "--compile-mode", mode, tmp_path=tmp_path)
    algo = script.split("_")[0]
    check_summary(
        summary, script, algo, "CartPole-v1" if algo == "dqn" else "Pendulum-v1", 600 if algo == "dqn" else 768, compile=True
    )
    assert summary["args"]["compile_mode"] == runs
    warnings = [
        line for line in proc.stderr.splitlines() if line.startswith("warning:") and not line.startswith("warning: --cuda:")
    ]
    assert warnings == ([] if runs == mode else [f"warning: --compile-mode {mode}: needs CUDA, running without CUDA graphs"])
    rows = read_metrics(summary)
    loss = "td_loss" if algo == "dqn" else "value_loss"
    if algo == "dqn":
        assert rows[0][loss] == ""  # DQN learns from step 200 on
    assert np.isfinite(float(rows[-1][loss])), rows[-1]  # the (compiled) update ran


BAD = [
    (["--compile-mode", "max-autotune"], "error: --compile-mode max-autotune: needs --compile"),
    (
        ["--compile-mode", "max-autotune-no-cudagraphs", "--cudagraphs"],
        "error: --compile-mode max-autotune-no-cudagraphs: needs --compile",
    ),
    (
        ["--compile", "--cudagraphs", "--compile-mode", "reduce-overhead"],
        "error: --compile-mode reduce-overhead: has its own CUDA graphs, not with --cudagraphs",
    ),
    (
        ["--compile", "--cudagraphs", "--compile-mode", "max-autotune"],
        "error: --compile-mode max-autotune: has its own CUDA graphs, not with --cudagraphs",
    ),
]


@pytest.mark.parametrize("script", FAST)
def test_bad_combinations_fail_with_one_line(script, tmp_path, capsys):
    module = load_script(script)
    for flags, error in BAD:  # main() in this process: the line comes before any work, any warning, any folder
        with pytest.raises(SystemExit) as exit:
            module.main(tyro.cli(module.Args, args=[*flags, "--output-dir", str(tmp_path / "runs")]))
        assert exit.value.code == error and capsys.readouterr().err == ""
    assert not (tmp_path / "runs").exists()
    # allowed: max-autotune-no-cudagraphs with --cudagraphs (inductor's kernels in tensordict's graphs), and the default
    for flags in (
        ["--compile", "--cudagraphs", "--compile-mode", "max-autotune-no-cudagraphs"],
        ["--compile-mode", "default"],
    ):
        assert tyro.cli(module.Args, args=flags)


def test_the_command_line_says_it_in_one_line(tmp_path):
    proc, _ = run_script(
        "dqn_torchcompile", "--compile-mode", "reduce-overhead", tmp_path=tmp_path, expect_ok=False, timeout=120
    )
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        "error: --compile-mode reduce-overhead: needs --compile"
    ]


def test_one_helper_compiles_every_function_in_every_fast_file():
    """No torch.compile call outside `compiled` (one text in every fast file: tests/test_files.py)."""
    for script in FAST:
        source = (SCRIPTS / f"{script}.py").read_text()
        nodes = {n.name: ast.get_source_segment(source, n) for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
        assert source.count("torch.compile(") == 1 and "torch.compile(" in nodes["compiled"], script


def test_graph_modes_mark_a_step_and_return_fresh_tensors(monkeypatch):
    """Under reduce-overhead and max-autotune a replay writes its outputs into the graph's own buffers, over the last
    replay's: the wrapper marks a new step before each call and returns clones, so values kept across calls stay as
    they were. torch.compile is replaced here by a stand-in that behaves like such a replay (a CPU captures nothing)."""
    module = load_script("dqn_torchcompile")
    marks, buffer = [], torch.zeros(4)

    def replaying_compile(fn, mode=None, **kwargs):
        def replay(x, k):  # the outputs live in one static buffer, as a CUDA graph's do
            buffer.copy_(x * k)
            return dict(y=buffer, total=buffer.sum())

        return replay

    monkeypatch.setattr(torch, "compile", replaying_compile)
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    x = torch.arange(4.0)
    for mode in ["reduce-overhead", "max-autotune"]:
        f = module.compiled(None, mode)
        first, second = f(x, 2.0), f(x, 3.0)
        assert torch.equal(first["y"], 2 * x) and first["total"].item() == 12.0 and torch.equal(second["y"], 3 * x)
    assert len(marks) == 4  # one per call
    plain = module.compiled(None, "max-autotune-no-cudagraphs")
    assert plain(x, 1.0)["y"] is buffer and len(marks) == 4  # no mark, no copy outside the graph-capturing modes
