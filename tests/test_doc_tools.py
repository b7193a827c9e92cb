"""The tools that write the results files behind the pages' tables: tools/micro.py times the scripts' own functions
two ways each and records the machine; tools/torchrun.py runs both ways and writes a row per run; tools/suite.py keeps
the other tier's row; each refuses bad input in one line."""

import csv
import json
import subprocess
import sys

from helpers.scripts import ROOT, load_tool

TOOLS = ROOT / "tools"


def test_micro_times_the_scripts_own_functions(tmp_path):
    """GAE, the baselines' loop against the fast files' loop-free form: the same advantages, each row timed, the
    machine and the commit recorded beside them."""
    command = [sys.executable, TOOLS / "micro.py", "--only", "gae", "--blocks", "1", "--out", tmp_path]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, timeout=300)
    with open(tmp_path / "micro.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["case"], r["variant"]) for r in rows] == [
        ("ppo_continuous_action, 2048 x 1", "loop (baseline)"),
        ("ppo_continuous_action, 2048 x 1", "fast"),
        ("ppo_atari, 128 x 8", "loop (baseline)"),
        ("ppo_atari, 128 x 8", "fast"),
    ]
    for row in rows:
        assert 0 < float(row["low_us"]) <= float(row["median_us"]) <= float(row["high_us"])
    for row in rows[1::2]:
        assert float(row["extra"].removeprefix("max diff ")) < 1e-4, row
    info = json.loads((tmp_path / "machine.json").read_text())
    assert info["git_commit"] and info["cpu_model"] and "cpu_flags" in info
    # the pages' table reads it as it reads the published file
    tables = load_tool(TOOLS / "tables.py")
    tables.RESULTS, tables.MICRO = tmp_path.parent, tmp_path.name
    lines = tables.micro_table("gae")
    assert lines[0].startswith("Timed by `python tools/micro.py` on a ") and info["git_commit"][:7] in lines[0]
    assert lines[-1].startswith("| ppo_atari, 128 x 8 | fast |") and "| 1.00x |" in lines[-1]
    loop = lines[-2].split(" | ")
    assert loop[1] == "loop (baseline)", loop
    assert loop[3] == f"{float(rows[2]['median_us']) / float(rows[3]['median_us']):.2f}x", loop


def test_the_doc_tools_refuse_bad_input_in_one_line(tmp_path):
    for tool, flags, said in [
        ("micro.py", ["--only", "gae,nope"], "--only: no part nope"),
        ("micro.py", ["--blocks", "0"], "--blocks: at least 1"),
        ("torchrun.py", ["--seeds", "one"], "--seeds: a comma-separated list of integers"),
        ("torchrun.py", ["--total-timesteps", "-5"], "--total-timesteps: at least 1"),
        (
            "env_versions.py",
            ["--env-ids", "Nope-v0", "--against", sys.executable],
            "--env-ids: Nope-v0: Environment `Nope` doesn't exist",
        ),
        (
            "env_versions.py",
            ["--env-ids", "CartPole-v1", "--against", sys.executable],
            "--env-ids: CartPole-v1 has Discrete(2) actions, not a Box",
        ),
        ("env_versions.py", ["--steps", "0"], "--steps: must be at least 1, got 0"),
        ("env_versions.py", ["--stretch", "0"], "--stretch: must be at least 1, got 0"),
        ("env_versions.py", ["--seed", "-1", "--against", sys.executable], "--seed: must be in [0, 2**32), got -1"),
        ("env_versions.py", [], "--against: give at least one other Python"),
        ("env_versions.py", ["--against", "/no/python"], "--against /no/python: no program to run there"),
    ]:
        proc = subprocess.run(
            [sys.executable, TOOLS / tool, *flags, "--out", tmp_path], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 2 and said in proc.stderr.strip().splitlines()[-1], (tool, proc.stderr)


def test_suite_keeps_the_other_tier_s_row():
    suite = load_tool(TOOLS / "suite.py")
    quick, full, again = dict(tier="quick", wall_s="200"), dict(tier="full", wall_s="1500"), dict(tier="quick", wall_s="190")
    assert suite.merged([], full) == [full]
    assert suite.merged([full], quick) == [quick, full]
    assert suite.merged([quick, full], again) == [again, full]


def test_curves_draws_every_seed_across_folders_and_their_mean(tmp_path):
    """tools/curves.py: a file's seeds from two results folders, one published without curves.csv (its seed a final
    point), the other with it (each seed's curve); the mean of the finished seeds over the steps they all cover."""
    from helpers.run_sh import check_png

    curves = load_tool(TOOLS / "curves.py")
    header = "algorithm,variant,seed,status,env_id,exp_name,episodic_return,global_step\n"
    (tmp_path / "old").mkdir()
    (tmp_path / "old/results.csv").write_text(
        header
        + "sac_continuous_action,fast,1,finished,HalfCheetah-v4,sac,900.0,1000\n"
        + "sac_continuous_action,fast,9,finished,HalfCheetah-v4,bf16,5.0,1000\n"  # another exp name: not this file's
        + "td3_continuous_action,fast,1,finished,HalfCheetah-v4,td3,7.0,1000\n"
    )
    (tmp_path / "new").mkdir()
    (tmp_path / "new/results.csv").write_text(
        header
        + "sac_continuous_action,fast,2,finished,HalfCheetah-v4,sac,100.0,1000\n"
        + "sac_continuous_action,fast,3,finished,HalfCheetah-v4,sac,300.0,1100\n"
        + "sac_continuous_action,fast,4,terminated,HalfCheetah-v4,sac,50.0,500\n"
        + "sac_continuous_action,fast,5,failed,HalfCheetah-v4,sac,,\n"  # no return: not drawn
    )
    rows = ["algorithm,variant,exp_name,env_id,seed,global_step,wall_time_s,episodic_return"]
    rows += [f"sac_continuous_action,fast,sac,HalfCheetah-v4,2,{step},1.0,{step / 10}" for step in (0, 500, 1000)]
    rows += [f"sac_continuous_action,fast,sac,HalfCheetah-v4,3,{step},1.0,300" for step in (100, 1100)]
    rows += ["sac_continuous_action,fast,sac,HalfCheetah-v4,4,500,1.0,50"]
    (tmp_path / "new/curves.csv").write_text("\n".join(rows) + "\n")

    seeds = curves.seeds_of(tmp_path, ["old", "new"], "sac_continuous_action", "fast", "sac")
    assert [(s["folder"], s["seed"], s["status"], s["final"]) for s in seeds] == [
        ("old", 1, "finished", 900.0),
        ("new", 2, "finished", 100.0),
        ("new", 3, "finished", 300.0),
        ("new", 4, "terminated", 50.0),
    ]
    assert seeds[0]["curve"] is None and seeds[1]["curve"] == ([0, 500, 1000], [0.0, 50.0, 100.0])
    assert seeds[3]["curve"] == ([500], [50.0])

    grid, mean = curves.seed_mean([seeds[1]["curve"], seeds[2]["curve"]], points=5)
    assert list(grid) == [100.0, 325.0, 550.0, 775.0, 1000.0]  # the steps both cover
    assert list(mean) == [(10.0 + 300) / 2, (32.5 + 300) / 2, (55.0 + 300) / 2, (77.5 + 300) / 2, (100.0 + 300) / 2]

    reference = [dict(algorithm="sac_continuous_action", env_id="HalfCheetah-v4", step=1000, ret=200.0, std=20.0, seeds=3)]
    curves.draw("sac_continuous_action", [("SAC: sac.py", seeds)], reference, tmp_path / "learning.png")
    check_png(tmp_path / "learning.png")


def test_env_versions_plays_alike_and_sees_one_ulp(tmp_path):
    """tools/env_versions.py with this Python as the other: the same play to the bit; the control (the first action one
    ulp off) differs from the first step on, by a little, and the trajectories part."""
    command = [sys.executable, TOOLS / "env_versions.py", "--against", sys.executable, "--env-ids", "HalfCheetah-v4"]
    subprocess.run(command + ["--steps", "60", "--out", tmp_path], check=True, cwd=ROOT, capture_output=True, timeout=300)
    with open(tmp_path / "env_versions.csv", newline="") as f:
        nudged, same = list(csv.DictReader(f))
    assert nudged["played_by"] == "the same, first action one ulp off" and same["played_by"] == nudged["reference"]
    assert (same["same_actions"], same["same_reset"], nudged["same_actions"], nudged["same_reset"]) == (
        "True",
        "True",
        "False",
        "True",
    )
    assert float(same["first_step_obs_diff"]) == float(same["largest_jump"]) == 0 and same["parted_at"] == ""
    # HalfCheetah's episodes never end: every step is checked but the three that end a stretch of 20
    assert same["reward_sum"] == same["reference_reward_sum"] and same["checked_steps"] == "57"
    assert 0 < int(same["checked_contact_steps"]) < 57 and 1 <= int(same["first_contact_at"]) < 60  # its feet touch ground
    assert 0 < float(nudged["first_step_obs_diff"]) < 1e-5 and nudged["reward_sum"] != nudged["reference_reward_sum"]
    assert 1 <= int(nudged["checked_steps"]) < 57 and 1 < int(nudged["parted_at"]) < 60  # it grows, then parts
    assert json.loads((tmp_path / "machine.json").read_text())["mujoco"]


def test_torchrun_runs_both_ways_and_writes_a_row_per_run(tmp_path):
    """Two short runs (2 iterations), 2 ranks under torchrun and 1 process: both finish with a speed and a return."""
    command = [sys.executable, TOOLS / "torchrun.py", "--seeds", "1", "--total-timesteps", "2048", "--out", tmp_path]
    subprocess.run(command, check=True, cwd=ROOT, capture_output=True, timeout=600)
    with open(tmp_path / "torchrun.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["mode"] for r in rows] == ["2 ranks x 4 envs (torchrun, gloo)", "1 process x 8 envs"]
    assert all(r["status"] == "finished" and float(r["sps"]) > 0 and r["episodic_return"] for r in rows), rows
