"""run.sh, the benchmark driver: aggregate.py (its Python) on folders of summaries (run.sh's, and a user's own runs/ of
several env ids and exp names), the aggregation through run.sh on synthetic runs, the driver on stand-in scripts
(failures, a missing script, pass-through flags, Ctrl-C, SIGTERM), and `--quick` on the real SAC pair end to end."""

import csv
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import types

import pytest
from helpers.background import command, descendants
from helpers.run_sh import RUN_SH, check_png, load_aggregate, md_rows, md_table, read_results, run_sh
from helpers.scripts import ROOT, SUMMARY_KEYS, importable

pytestmark = pytest.mark.skipif(
    not (importable("pandas") and importable("matplotlib")),
    reason="run.sh's tables and plots need pandas and matplotlib (tests/test_without_pandas.py checks the rest)",
)

aggregate = load_aggregate()


def write_run(
    parent,
    algorithm,
    variant,
    seed,
    sps,
    ret,
    status="finished",
    returns_curve=(1.0, 2.0, 3.0),
    env_id="HalfCheetah-v4",
    exp_name=None,
):
    """A run folder like a script leaves: summary.json (the flags in its args only) and metrics.csv. exp_name: the
    script's name unless given, as in the scripts."""
    fast = variant != "baseline"
    script = algorithm + ("_torchcompile" if fast else "")
    if exp_name is None:
        exp_name = script
    run_dir = parent / f"{env_id}__{exp_name}__{seed}__1700000000"
    run_dir.mkdir(parents=True)
    args = {"seed": seed, "total_timesteps": 3000, "env_id": env_id, "exp_name": exp_name}
    if fast:  # a baseline has no --compile, --cudagraphs
        args.update(compile=variant.startswith("compile"), cudagraphs=variant.endswith("cudagraphs"))
    summary = {
        "script": script,
        "algo": algorithm.split("_")[0],
        "device": "cpu",
        "gpu_name": None,
        "cpu_count": 2,
        "torch_version": "2.13.0",
        "world_size": 1,
        "global_step": 3000,
        "sps": sps,
        "wall_time_s": 30.0,
        "warmup_s": 1.0,
        "episodic_return": ret,
        "episodes": 0 if ret is None else 2,
        "status": status,
        "args": args,
    }
    assert SUMMARY_KEYS <= set(summary)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    with open(run_dir / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s", "qf_loss"])
        w.writerow([1000, "", "", "", 10.0, ""])
        for i, r in enumerate(returns_curve if ret is not None else ()):
            w.writerow([2000 + 500 * i, sps, r, 1000, 20.0 + i, 0.5])
    return run_dir


RUNS_TSV_HEADER = "algorithm\tvariant\tseed\tstatus\texit_code\tsummary\tlog\tcommand\n"


def test_aggregate_py_groups_runs_and_records_failures(tmp_path):
    """aggregate.py on its own, on summary.json files and a runs.tsv: a results.csv row per run in the order given, a
    results.md row per algorithm and variant; a run that left no summary.json and one whose summary.json cannot be read
    are recorded as failed, with the reason."""
    out = tmp_path / "bench"
    write_run(out / "a", "td3_continuous_action", "fast", 1, 300.0, 3.0)
    write_run(out / "b", "sac_continuous_action", "fast", 2, 200.0, 2.0)
    write_run(out / "c", "sac_continuous_action", "fast", 1, 100.0, None)
    write_run(out / "d", "sac_continuous_action", "baseline", 1, 50.0, 4.0)
    (out / "e").mkdir()
    (out / "e/summary.json").write_text('{"script": ')  # cut off
    (out / "logs").mkdir()
    (out / "logs/x.log").write_text("step 1\rstep 2\nValueError: bad\n")  # a progress bar redraws its line after \r
    (out / "runs.tsv").write_text(
        RUNS_TSV_HEADER + "sac_continuous_action\tcompile\t1\tfailed\t1\t\tlogs/x.log\tpython x.py\n"
    )

    aggregate.aggregate(
        out, algorithms=["sac_continuous_action", "td3_continuous_action"], variants=["baseline", "fast", "compile"]
    )

    rows = read_results(out)
    assert list(rows[0]) == aggregate.COLUMNS
    assert [(r["algorithm"], r["variant"], r["seed"], r["status"]) for r in rows] == [
        ("sac_continuous_action", "baseline", "1", "finished"),
        ("sac_continuous_action", "fast", "1", "finished"),
        ("sac_continuous_action", "fast", "2", "finished"),
        ("sac_continuous_action", "compile", "1", "failed"),
        ("td3_continuous_action", "fast", "1", "finished"),
        ("?", "?", "", "failed"),  # names it does not know come last
    ]
    assert (rows[3]["exit_code"], rows[3]["error"], rows[3]["command"]) == ("1", "ValueError: bad", "python x.py")
    assert rows[5]["error"].startswith("unreadable summary.json") and rows[5]["run_dir"] == "e"
    assert (rows[1]["env_id"], rows[1]["compile"], rows[1]["total_timesteps"]) == ("HalfCheetah-v4", "False", "3000")

    table = md_rows(out)
    assert list(table) == [
        ("sac_continuous_action", "baseline"),
        ("sac_continuous_action", "fast"),
        ("sac_continuous_action", "compile"),
        ("td3_continuous_action", "fast"),
        ("?", "?"),
    ]
    columns = ["algorithm", "variant", "env", "steps", "runs", "steps/s median", "steps/s range", "speed-up", "warm-up s"]
    assert list(table[("sac_continuous_action", "fast")]) == columns + ["episodic return"]
    fast = table[("sac_continuous_action", "fast")]
    assert (fast["runs"], fast["steps/s median"], fast["steps/s range"], fast["speed-up"]) == (
        "2/2",
        "150",
        "100–200",
        "3.00x",
    )
    assert fast["episodic return"] == "2.0 (1 run) (1 of 2 runs had a finished episode)"
    assert (fast["env"], fast["steps"], fast["warm-up s"]) == ("HalfCheetah-v4", "3,000", "1.0")
    failed = table[("sac_continuous_action", "compile")]
    assert (failed["runs"], failed["steps/s median"], failed["speed-up"]) == ("0/1", "–", "–")
    assert table[("td3_continuous_action", "fast")]["speed-up"] == "–"  # no baseline to compare with
    md = (out / "results.md").read_text()
    assert "### sac_continuous_action compile seed 1: failed (exit 1)" in md and "\nstep 2\nValueError: bad\n" in md
    assert "### ? ? seed nan: failed" in md and "unreadable summary.json" in md
    for name in ["sps_sac_continuous_action.png", "curves_sac_continuous_action.png", "sps_td3_continuous_action.png"]:
        check_png(out / name)

    # curves.csv: each run's rows that have a return (metrics.csv's first row has none), under the run's keys; the run
    # without an episode and the two without a run folder give none
    with open(out / "curves.csv", newline="") as f:
        curves = list(csv.DictReader(f))
    assert list(curves[0]) == ["algorithm", "variant", "exp_name", "env_id", "seed"] + [
        "global_step",
        "wall_time_s",
        "episodic_return",
    ]
    runs = [(r["algorithm"], r["variant"], r["seed"], r["exp_name"], r["env_id"]) for r in curves[::3]]
    assert runs == [
        ("sac_continuous_action", "baseline", "1", "sac_continuous_action", "HalfCheetah-v4"),
        ("sac_continuous_action", "fast", "2", "sac_continuous_action_torchcompile", "HalfCheetah-v4"),
        ("td3_continuous_action", "fast", "1", "td3_continuous_action_torchcompile", "HalfCheetah-v4"),
    ]
    assert [(r["global_step"], r["wall_time_s"], r["episodic_return"]) for r in curves[:3]] == [
        ("2000", "20.0", "1.0"),
        ("2500", "21.0", "2.0"),
        ("3000", "22.0", "3.0"),
    ]


def test_curves_csv_thins_a_long_curve_evenly(tmp_path):
    """A run of 1,000 logged returns gives curves.csv CURVE_POINTS rows, evenly spaced, its first and last kept."""
    write_run(tmp_path, "sac_continuous_action", "fast", 1, 100.0, 5.0, returns_curve=[float(i) for i in range(1000)])
    aggregate.aggregate(tmp_path, algorithms=["sac_continuous_action"], variants=["fast"])
    with open(tmp_path / "curves.csv", newline="") as f:
        returns = [float(r["episodic_return"]) for r in csv.DictReader(f)]
    assert len(returns) == aggregate.CURVE_POINTS == 250
    assert returns[0] == 0.0 and returns[-1] == 999.0
    gaps = {b - a for a, b in zip(returns, returns[1:])}
    assert gaps <= {4.0, 5.0}, gaps  # 999 steps of the index over 249 gaps: each 4 or 5


def test_the_last_100_episodes_where_metrics_csv_holds_them_exactly(tmp_path):
    """CleanRL's measure (each run's last 100 episodes): HalfCheetah's episodes all last its time limit, 1,000 steps,
    so five rows of 20-episode means, 20,000 steps apart, tile the last 100; not where an episode in them ended sooner,
    a row is missing, several envs step, the run is shorter than 100 episodes of 1,000 steps, PPO's files (an episode
    takes a step more: the reset's), or the env has no time limit known here."""

    def run(name, env_id="HalfCheetah-v4", short_at=None, skip=None, last=120_000, num_envs=1, algo="sac"):
        run_dir = tmp_path / name
        run_dir.mkdir()
        args = {"env_id": env_id, "num_envs": num_envs}
        (run_dir / "summary.json").write_text(json.dumps({"algo": algo, "episodes": last // 1000, "args": args}))
        with open(run_dir / "metrics.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s"])
            w.writerow([100, "", "", "", 1.0])
            for step in range(10_000, last + 1, 10_000):  # a row every 10,000 steps; the return: the step / 1,000
                if step != skip:
                    w.writerow([step, 50.0, step / 1000, 990.0 if step == short_at else 1000.0, 2.0])
        return aggregate.return_last_episodes(run_dir)

    assert run("tiled") == (120 + 100 + 80 + 60 + 40) / 5
    assert run("between the tiles", short_at=110_000) == 80.0  # a row between the tiles is not read
    assert run("just 100", last=100_000) == (100 + 80 + 60 + 40 + 20) / 5
    assert run("cut short", short_at=60_000) is None
    assert run("a row missing", skip=40_000) is None
    assert run("two envs", num_envs=2) is None
    assert run("90 episodes", last=90_000) is None
    assert run("PPO", algo="ppo") is None
    assert run("envpool's", env_id="Breakout-v5") is None
    # and aggregate() writes it into results.csv
    write_run(tmp_path / "agg", "td3_continuous_action", "fast", 1, 100.0, 5.0)
    aggregate.aggregate(tmp_path / "agg", algorithms=["td3_continuous_action"], variants=["fast"])
    assert [r["return_last100"] for r in read_results(tmp_path / "agg")] == [""]  # 2 episodes: not 100


def test_aggregate_py_gives_the_time_to_the_first_update_cold_and_warm(tmp_path):
    """From runs.tsv's launch time and each summary's first update and compile-cache counters: results.csv's
    first_update_s and compile_cache, and results.md's median over the cold runs / the warm ones (one figure where
    nothing compiled); a row of an older runs.tsv, without the launch, has none."""
    out = tmp_path / "bench"
    rows = []
    for name, variant, seed, first, cache in [
        ("b1", "baseline", 1, 3.0, None),
        ("c1", "compile", 1, 30.0, dict(hits=0, misses=4)),
        ("c2", "compile", 2, 9.0, dict(hits=4, misses=0)),
        ("c3", "compile", 3, 11.0, dict(hits=4, misses=0)),
    ]:
        run_dir = write_run(out / name, "dqn", variant, seed, 100.0, 1.0)
        summary = json.loads((run_dir / "summary.json").read_text())
        summary.update(first_update_at=1000.0 + first, compile_cache=cache or dict(hits=0, misses=0))
        (run_dir / "summary.json").write_text(json.dumps(summary))
        where = (run_dir / "summary.json").relative_to(out)
        rows.append(f"dqn\t{variant}\t{seed}\tfinished\t0\t{where}\t\tpython x.py\t1000.0\n")
    (out / "runs.tsv").write_text(RUNS_TSV_HEADER.replace("\n", "\tlaunched\n") + "".join(rows))
    aggregate.aggregate(out, algorithms=["dqn"], variants=["baseline", "compile"])
    found = [(r["variant"], r["first_update_s"], r["compile_cache"]) for r in read_results(out)]
    assert found == [
        ("baseline", "3.0", ""),
        ("compile", "30.0", "cold"),
        ("compile", "9.0", "warm"),
        ("compile", "11.0", "warm"),
    ]
    table = md_rows(out)
    assert table[("dqn", "baseline")]["first update s"] == "3.0"
    assert table[("dqn", "compile")]["first update s"] == "30.0 / 10.0"
    assert "cold / warm" in (out / "results.md").read_text()
    (out / "runs.tsv").write_text(RUNS_TSV_HEADER + "".join(row.rsplit("\t", 1)[0] + "\n" for row in rows))
    aggregate.aggregate(out, algorithms=["dqn"], variants=["baseline", "compile"])
    assert {r["first_update_s"] for r in read_results(out)} == {""}
    assert "first update s" not in next(iter(md_rows(out).values()))


def test_aggregate_py_orders_rows_by_the_lists_it_is_given(tmp_path):
    """run.sh's lists order the rows; a name not in them comes after those that are, by name; no lists: all by name."""
    out = tmp_path / "bench"
    for variant in ["baseline", "fast", "compile_cudagraphs", "compile"]:
        write_run(out / variant, "dqn", variant, 1, 100.0, 1.0)
    aggregate.aggregate(out, algorithms=["dqn"], variants=["fast", "compile", "baseline"])
    assert [r["variant"] for r in read_results(out)] == ["fast", "compile", "baseline", "compile_cudagraphs"]
    assert [variant for _, variant in md_rows(out)] == ["fast", "compile", "baseline", "compile_cudagraphs"]
    aggregate.main([str(out)])
    assert [r["variant"] for r in read_results(out)] == ["baseline", "compile", "compile_cudagraphs", "fast"]
    aggregate.main([str(out), "--algorithms", "dqn", "--variants", "compile_cudagraphs,baseline"])
    assert [r["variant"] for r in read_results(out)] == ["compile_cudagraphs", "baseline", "compile", "fast"]


def test_aggregate_py_compares_own_runs_by_env_id_and_exp_name(tmp_path):
    """A user's own runs/ (run folders as the scripts leave them, no runs.tsv): a row per algorithm, env id, exp name and
    variant, each naming its env and exp name; a variant's speed-up is over the baseline of its own env id and exp name
    (none: no speed-up); a run stopped by SIGTERM is listed among those that did not finish, with the reason."""
    runs = tmp_path / "runs"
    sac = "sac_continuous_action"
    for seed, sps in [(1, 100.0), (2, 120.0)]:
        write_run(runs, sac, "baseline", seed, sps, 10.0, env_id="HalfCheetah-v4")
        write_run(runs, sac, "fast", seed, sps + 120.0, 10.0, env_id="HalfCheetah-v4")
        write_run(runs, sac, "baseline", seed, 50.0, 5.0, env_id="Hopper-v4")
        write_run(runs, sac, "fast", seed, 150.0, 5.0, env_id="Hopper-v4")
    write_run(runs, sac, "fast", 3, 99.0, 5.0, env_id="Hopper-v4", status="terminated")
    write_run(runs, sac, "fast", 1, 300.0, 10.0, env_id="HalfCheetah-v4", exp_name="bs512")  # no baseline of its own
    write_run(runs, sac, "baseline", 1, 40.0, 5.0, env_id="Hopper-v4", exp_name="bs512")
    write_run(runs, sac, "fast", 2, 400.0, 5.0, env_id="Hopper-v4", exp_name="bs512")

    aggregate.aggregate(runs, algorithms=[sac], variants=["baseline", "fast"])

    table = md_table(runs)
    columns = ["algorithm", "variant", "env", "exp name", "steps", "runs", "steps/s median", "steps/s range", "speed-up"]
    assert list(table[0]) == columns + ["warm-up s", "episodic return"]
    cells = ["variant", "env", "exp name", "runs", "steps/s median", "speed-up"]
    assert [[row[cell] for cell in cells] for row in table] == [
        ["baseline", "HalfCheetah-v4", sac, "2/2", "110", "1.00x"],
        ["fast", "HalfCheetah-v4", sac + "_torchcompile", "2/2", "230", "2.09x"],  # over 110, not over all baselines
        ["fast", "HalfCheetah-v4", "bs512", "1/1", "300", "–"],
        ["baseline", "Hopper-v4", sac, "2/2", "50.0", "1.00x"],
        ["fast", "Hopper-v4", sac + "_torchcompile", "2/3", "150", "3.00x"],  # the terminated run is not measured
        ["baseline", "Hopper-v4", "bs512", "1/1", "40.0", "1.00x"],
        ["fast", "Hopper-v4", "bs512", "1/1", "400", "10.00x"],
    ]
    rows = read_results(runs)
    assert [(r["env_id"], r["exp_name"], r["seed"]) for r in rows][:3] == [
        ("HalfCheetah-v4", sac, "1"),
        ("HalfCheetah-v4", sac, "2"),
        ("HalfCheetah-v4", sac + "_torchcompile", "1"),
    ]
    terminated = next(r for r in rows if r["status"] == "terminated")
    assert (terminated["env_id"], terminated["seed"], terminated["error"]) == ("Hopper-v4", "3", aggregate.TERMINATED)
    md = (runs / "results.md").read_text()
    assert "12 runs: 11 finished, 1 terminated." in md
    assert "- rows: one per algorithm, env id, exp name (`--exp-name`) and variant" in md
    failures = md.split("## Runs that did not finish")[1]
    assert failures.startswith(f"\n\n### {sac} fast seed 3: terminated\n\n`Hopper-v4__{sac}_torchcompile__3__1700000000`\n")
    assert f"The run was {aggregate.TERMINATED}." in failures
    assert sorted(p.name for p in runs.glob("*.png")) == [f"curves_{sac}.png", f"sps_{sac}.png"]  # a panel per group
    for name in [f"curves_{sac}.png", f"sps_{sac}.png"]:
        check_png(runs / name)


def test_aggregate_py_records_how_run_sh_was_called_and_the_machine(tmp_path):
    """--record-bench: bench.json, the flags after -- kept as given, an --append merged into one record;
    --record-machine: machine.json and machine.md with the split of --jobs."""
    aggregate.main(
        ["--record-bench", str(tmp_path), "--command=./run.sh --quick", "--quick", "--budget=dqn=--total-timesteps 12000"]
        + ["--seeds=1 2", "--variants=baseline fast", "--", "--seeds", "9"]
    )
    bench = json.loads((tmp_path / "bench.json").read_text())
    assert bench["extra"] == ["--seeds", "9"] and bench["seeds"] == [1, 2] and bench["variants"] == ["baseline", "fast"]
    assert bench["quick"] is True and bench["total_timesteps"] is None and bench["jobs"] == 1 and bench["slurm"] is False
    aggregate.main(
        ["--record-bench", str(tmp_path), "--command=./run.sh --append", "--budget=sac_continuous_action="]
        + ["--total-timesteps=500", "--seeds=3", "--variants=fast", "--jobs=2", "--slurm"]
    )
    bench = json.loads((tmp_path / "bench.json").read_text())
    assert bench["command"] == "./run.sh --quick; then ./run.sh --append"
    assert bench["budgets"] == {"dqn": "--total-timesteps 12000", "sac_continuous_action": ""}
    assert (bench["seeds"], bench["total_timesteps"], bench["jobs"], bench["slurm"]) == ([1, 2, 3], 500, 2, True)
    assert bench["quick"] is True and bench["extra"] == ["--seeds", "9"]

    aggregate.main(["--record-machine", str(tmp_path), "--jobs=2", "--cpu-sets=0 1", "--gpus="])
    machine = json.loads((tmp_path / "machine.json").read_text())
    assert (machine["jobs"], machine["cpu_sets"], machine["gpus"]) == (2, ["0", "1"], None)
    assert machine["cpu_count"] == os.cpu_count() and machine["python"] and machine["torch"] != "not installed"
    assert "- cpu_sets: ['0', '1']" in (tmp_path / "machine.md").read_text()
    # the CPU's matrix-product extensions, as /proc/cpuinfo lists them (which of the project's CPUs it is)
    flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split(":", 1)[1].split()
    named = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    assert machine["cpu_flags"] == (" ".join(named) or None), machine["cpu_flags"]


def test_a_call_on_another_machine_or_checkout_keeps_the_earlier_record(tmp_path, capsys):
    """An --append or --resume from another commit or machine: a warning naming what changed, the earlier record kept
    in machines-earlier.jsonl (machine.md says so); the same machine again adds nothing."""
    aggregate.main(["--record-machine", str(tmp_path)])
    first = json.loads((tmp_path / "machine.json").read_text())
    aggregate.main(["--record-machine", str(tmp_path)])
    assert not (tmp_path / "machines-earlier.jsonl").exists() and "warning" not in capsys.readouterr().err
    (tmp_path / "machine.json").write_text(json.dumps(dict(first, git_commit="0123456789ab", cpu_model="Another CPU")))
    aggregate.main(["--record-machine", str(tmp_path), "--jobs=2"])
    err = capsys.readouterr().err
    assert "git_commit 0123456789ab -> " in err and "cpu_model Another CPU -> " in err and "jobs" not in err, err
    (kept,) = [json.loads(line) for line in (tmp_path / "machines-earlier.jsonl").read_text().splitlines()]
    assert kept["git_commit"] == "0123456789ab" and json.loads((tmp_path / "machine.json").read_text()) != kept
    assert (
        "earlier calls into this folder ran on 1 other record(s): machines-earlier.jsonl"
        in (tmp_path / "machine.md").read_text()
    )


def test_the_budgets_line_names_every_algorithms_budget(tmp_path):
    """Two calls with --append, each with its own --total-timesteps: results.md names both budgets, not the last one."""
    runs = tmp_path / "runs"
    write_run(runs, "sac_continuous_action", "fast", 1, 100, 3.0)
    dqn = write_run(runs, "dqn", "fast", 1, 100, 3.0, env_id="CartPole-v1")
    summary = json.loads((dqn / "summary.json").read_text())
    summary["args"]["total_timesteps"] = 500
    (dqn / "summary.json").write_text(json.dumps(summary))
    aggregate.main(["--record-bench", str(tmp_path), "--command=./run.sh a", "--total-timesteps=3000", "--budget=sac="])
    aggregate.main(["--record-bench", str(tmp_path), "--command=./run.sh b", "--total-timesteps=500", "--budget=dqn="])
    run_sh("--aggregate", tmp_path, check=0)
    md = (tmp_path / "results.md").read_text()
    assert "**Budgets: not the defaults**: --total-timesteps sac_continuous_action 3,000; dqn 500 (" in md, md[:800]

    # Flags after -- count as a budget only where they set one, in any form tyro takes, in any call of an --append: SAC's
    # 1M with --precision bf16 is its default budget
    bf16, budget = ["--precision", "bf16"], "Budgets: not the defaults"
    for calls, line in [
        ([bf16], "Budgets: the scripts' defaults."),
        ([["--total-timesteps", "100"]], budget),
        ([["--total_timesteps=100"]], budget),
        ([bf16, ["--total-timesteps", "100"]], budget),
    ]:
        (tmp_path / "bench.json").unlink()
        for extra in calls:
            aggregate.main(["--record-bench", str(tmp_path), "--command=./run.sh c", "--budget=sac=", "--", *extra])
        run_sh("--aggregate", tmp_path, check=0)
        assert line in (tmp_path / "results.md").read_text(), calls


def test_aggregate_synthetic(tmp_path):
    out = tmp_path / "bench"
    runs = out / "runs"
    for seed, sps, ret in [(1, 100.0, 10.0), (2, 120.0, 20.0), (3, 90.0, 30.0)]:
        write_run(runs / "sac_continuous_action/baseline" / f"seed{seed}", "sac_continuous_action", "baseline", seed, sps, ret)
    for seed, sps, ret in [(1, 250.0, 40.0), (2, 200.0, 60.0), (3, 230.0, None)]:  # seed 3: no finished episode
        write_run(runs / "sac_continuous_action/fast" / f"seed{seed}", "sac_continuous_action", "fast", seed, sps, ret)
    for seed, sps, ret in [(2, 400.0, 70.0), (3, 500.0, 80.0)]:
        write_run(runs / "sac_continuous_action/compile" / f"seed{seed}", "sac_continuous_action", "compile", seed, sps, ret)
    write_run(runs / "td3_continuous_action/fast/seed1", "td3_continuous_action", "fast", 1, 1000.0, 5.0)
    # compile seed 1 failed: only the driver's manifest and its log know about it
    (out / "logs").mkdir()
    (out / "logs/sac_continuous_action__compile__seed1.log").write_text(
        'starting\nTraceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: inductor exploded\n'
    )
    (out / "runs.tsv").write_text(
        "algorithm\tvariant\tseed\tstatus\texit_code\tsummary\tlog\tcommand\n"
        "sac_continuous_action\tcompile\t1\tfailed\t1\t\tlogs/sac_continuous_action__compile__seed1.log\t"
        "python x.py --compile\n"
    )

    run_sh("--aggregate", out, check=0)

    rows = read_results(out)
    assert len(rows) == 10
    key = {(r["algorithm"], r["variant"], r["seed"]): r for r in rows}
    failed = key[("sac_continuous_action", "compile", "1")]
    assert failed["status"] == "failed" and failed["exit_code"] == "1"
    assert failed["error"] == "RuntimeError: inductor exploded"
    assert failed["sps"] == ""
    assert key[("sac_continuous_action", "fast", "3")]["episodic_return"] == ""
    assert key[("sac_continuous_action", "fast", "3")]["status"] == "finished"
    assert float(key[("sac_continuous_action", "baseline", "2")]["sps"]) == 120.0
    # the flags come from the summaries' args
    assert [key[("sac_continuous_action", v, "2")]["env_id"] for v in ["baseline", "compile"]] == ["HalfCheetah-v4"] * 2
    assert [
        (key[("sac_continuous_action", v, "2")]["compile"], key[("sac_continuous_action", v, "2")]["cudagraphs"])
        for v in ["baseline", "fast", "compile"]
    ] == [("False", "False"), ("False", "False"), ("True", "False")]
    assert sum(r["status"] == "finished" for r in rows) == 9
    # rows come in algorithm, variant, seed order
    assert [(r["algorithm"], r["variant"]) for r in rows][:4] == [("sac_continuous_action", "baseline")] * 3 + [
        ("sac_continuous_action", "fast")
    ]

    table = md_rows(out)
    base = table[("sac_continuous_action", "baseline")]
    assert (base["steps/s median"], base["steps/s range"], base["speed-up"]) == ("100", "90–120", "1.00x")
    assert base["episodic return"] == "20.0 ± 10.0" and base["runs"] == "3/3"
    fast = table[("sac_continuous_action", "fast")]
    assert (fast["steps/s median"], fast["steps/s range"], fast["speed-up"]) == ("230", "200–250", "2.30x")
    assert fast["episodic return"].startswith("50.0 ± 14.1")  # the run without an episode is left out
    assert "2 of 3" in fast["episodic return"]
    comp = table[("sac_continuous_action", "compile")]
    assert (comp["steps/s median"], comp["speed-up"], comp["runs"]) == ("450", "4.50x", "2/3")
    assert comp["episodic return"] == "75.0 ± 7.1"
    td3 = table[("td3_continuous_action", "fast")]
    assert (td3["steps/s median"], td3["speed-up"]) == ("1,000", "–")  # no baseline to compare with
    md = (out / "results.md").read_text()
    assert "inductor exploded" in md and "sac_continuous_action compile seed 1: failed (exit 1)" in md

    for name in [
        "sps_sac_continuous_action.png",
        "curves_sac_continuous_action.png",
        "sps_td3_continuous_action.png",
        "curves_td3_continuous_action.png",
    ]:
        check_png(out / name)
        assert f"]({name})" in md

    # publishing copies the small files only
    pub = tmp_path / "doc/results/test-machine"
    run_sh("--aggregate", out, "--publish", pub, check=0)
    assert {p.name for p in pub.iterdir()} == {
        "results.csv",
        "curves.csv",
        "results.md",
        "sps_sac_continuous_action.png",
        "curves_sac_continuous_action.png",
        "sps_td3_continuous_action.png",
        "curves_td3_continuous_action.png",
    }
    # published again: what it replaces said, a plot it did not make named and left alone
    (pub / "sps_dqn.png").write_bytes(b"an earlier plot")
    proc = run_sh("--aggregate", out, "--publish", pub, check=0)
    assert f"run.sh: published to {pub} (replacing results.csv curves.csv results.md curves_" in proc.stdout, proc.stdout
    assert f"{pub} also holds sps_dqn.png, which this aggregation did not make: left as it was" in proc.stderr


# A stand-in for a training script: parses the common flags, writes what a run leaves behind, no torch. Ctrl-C and
# SIGTERM stop it as they stop the scripts: its summary says "interrupted" (exit 130) or "terminated" (exit 143).
FAKE_SCRIPT = textwrap.dedent("""
    import json, os, pathlib, signal, sys, time
    class Terminated(Exception):
        pass
    def on_sigterm(signum, frame):
        raise Terminated
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGUSR1, on_sigterm)  # (Slurm's warning: the scripts stop as on SIGTERM)
    argv = sys.argv[1:]
    def flag(name, default=None):
        value = default
        for i, a in enumerate(argv):
            if a == name:
                value = argv[i + 1]
        return value
    script = pathlib.Path(__file__).stem
    seed, compile_, graphs = int(flag("--seed")), "--compile" in argv, "--cudagraphs" in argv
    if compile_ and os.environ.get("FAKE_FAIL_COMPILE"):
        print("compiling...", flush=True)
        raise RuntimeError("fake compile failure")
    status, code = "finished", 0
    if os.environ.get("FAKE_RENDEZVOUS"):  # wait until every run of the rendezvous has started: they run at once
        meeting = pathlib.Path(os.environ["FAKE_RENDEZVOUS"])
        (meeting / f"{script}-{seed}").write_text("here")
        for _ in range(6000):
            if len(list(meeting.iterdir())) >= int(os.environ["FAKE_RENDEZVOUS_N"]):
                break
            time.sleep(0.01)
        else:
            sys.exit("nobody came")
    if os.environ.get("FAKE_DIVERGE_SEED") == str(seed):
        status, code = "diverged", 1
    hang = os.environ.get("FAKE_HANG_SEED") == str(seed)
    terminate = str(seed) in os.environ.get("FAKE_TERMINATE_SEED", "").split(",")
    if hang:
        pathlib.Path(os.environ["FAKE_MARKER"]).write_text("started")
    try:
        if terminate:  # as Slurm's time limit, kill or timeout would, to itself
            os.kill(os.getpid(), signal.SIGTERM)
        while hang or terminate:
            time.sleep(0.05)
    except KeyboardInterrupt:
        status, code = "interrupted", 130
    except Terminated:
        status, code = "terminated", 143
    run_dir = pathlib.Path(flag("--resume") or pathlib.Path(flag("--output-dir", "runs")) / f"Fake-v0__{script}__{seed}__1")
    run_dir.mkdir(parents=True, exist_ok="--resume" in argv)
    metrics = "global_step,sps,episodic_return,episodic_length,wall_time_s\\n100,50,1.5,10,0.5\\n200,50,2.5,10,1.0\\n"
    (run_dir / "metrics.csv").write_text(metrics)
    args = {"env_id": "Fake-v0", "seed": seed, "total_timesteps": int(flag("--total-timesteps", 200)), "argv": argv,
            "cores": sorted(os.sched_getaffinity(0)), "omp": os.environ.get("OMP_NUM_THREADS"),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if script.endswith("_torchcompile"):
        args.update(compile=compile_, compile_mode=flag("--compile-mode", "default"), cudagraphs=graphs)
    summary = {"script": script, "algo": "fake", "device": "cpu", "gpu_name": None, "cpu_count": os.cpu_count(),
               "torch_version": "none", "world_size": 1, "global_step": 200, "sps": 50.0 * seed, "wall_time_s": 1.0,
               "warmup_s": 0.1, "episodic_return": 2.5, "episodes": 2, "status": status, "args": args}
    path = run_dir / "summary.json"
    path.write_text(json.dumps(summary))
    print(path)
    sys.exit(code)
""")


def fake_scripts(tmp_path, *names):
    d = tmp_path / "scripts"
    d.mkdir()
    for name in names:
        (d / f"{name}.py").write_text(FAKE_SCRIPT)
    return d


def test_driver_failures_missing_scripts_and_flags(tmp_path):
    scripts = fake_scripts(tmp_path, "sac_continuous_action", "sac_continuous_action_torchcompile")  # no td3 at all
    out = tmp_path / "bench"
    proc = run_sh(
        "--quick",
        "--scripts",
        "sac_continuous_action,td3_continuous_action",
        "--variants",
        "baseline,fast,compile",
        "--seeds",
        "1,2",
        "--total-timesteps",
        "1500",
        "--out",
        out,
        "--",
        "--env-id",
        "Fake-v0",
        env={"RUN_SH_SCRIPTS_DIR": str(scripts), "FAKE_FAIL_COMPILE": "1"},
        check=1,
    )
    assert "MISSING" in proc.stderr and "td3_continuous_action.py does not exist" in proc.stderr

    rows = read_results(out)
    assert len(rows) == 12  # 2 algorithms x 3 variants x 2 seeds, each one recorded
    recorded = aggregate.read_runs(out)  # runs.tsv, as run.sh writes it and aggregate.py reads it
    assert len(recorded) == 12 and sorted({r["status"] for r in recorded}) == ["failed", "finished", "missing"]
    assert all(r["summary"] for r in recorded if r["status"] == "finished")
    assert all(r["command"].startswith("python ") for r in recorded)
    status = {(r["algorithm"], r["variant"], r["seed"]): r["status"] for r in rows}
    for seed in "12":
        assert status[("sac_continuous_action", "baseline", seed)] == "finished"
        assert status[("sac_continuous_action", "fast", seed)] == "finished"
        assert status[("sac_continuous_action", "compile", seed)] == "failed"
        for v in ["baseline", "fast", "compile"]:
            assert status[("td3_continuous_action", v, seed)] == "missing"
    failed = next(r for r in rows if r["status"] == "failed")
    assert failed["error"] == "RuntimeError: fake compile failure" and failed["exit_code"] == "1"
    assert (out / failed["log"]).is_file()

    # the budget: --quick's flags, then --total-timesteps (the last one wins), then the pass-through flags
    run = next(r for r in rows if r["status"] == "finished")
    argv = json.loads((out / run["run_dir"] / "summary.json").read_text())["args"]["argv"]
    assert argv[argv.index("--learning-starts") + 1] == "1000"
    assert argv[-4:] == ["--total-timesteps", "1500", "--env-id", "Fake-v0"]
    assert run["total_timesteps"] == "1500"

    table = md_rows(out)
    assert table[("sac_continuous_action", "fast")]["steps/s median"] == "75.0"  # seeds 1, 2 -> 50, 100
    assert table[("sac_continuous_action", "fast")]["speed-up"] == "1.00x"
    assert table[("sac_continuous_action", "compile")]["runs"] == "0/2"
    assert table[("td3_continuous_action", "baseline")]["runs"] == "0/2"
    md = (out / "results.md").read_text()
    assert "fake compile failure" in md and "`--quick`" in md and "td3_continuous_action baseline seed 1: missing" in md
    assert "## Machine" in md and "python:" in md
    check_png(out / "sps_sac_continuous_action.png")
    check_png(out / "curves_sac_continuous_action.png")
    bench = json.loads((out / "bench.json").read_text())
    assert bench["quick"] and bench["total_timesteps"] == 1500 and bench["extra"] == ["--env-id", "Fake-v0"]

    # the same folder is not run into twice by mistake, but can be added to
    again = run_sh("--out", out, env={"RUN_SH_SCRIPTS_DIR": str(scripts)}, check=2)
    assert "already holds a benchmark" in again.stderr
    run_sh(
        "--append",
        "--scripts",
        "sac_continuous_action",
        "--variants",
        "fast",
        "--seeds",
        "1,3",
        "--out",
        out,
        env={"RUN_SH_SCRIPTS_DIR": str(scripts)},
        check=0,
    )
    rows = read_results(out)
    assert len(rows) == 14 and sum(r["status"] == "finished" for r in rows) == 6
    fast = [r for r in rows if r["variant"] == "fast" and r["algorithm"] == "sac_continuous_action"]
    assert sorted(r["seed"] for r in fast) == ["1", "1", "2", "3"] and len({r["log"] for r in fast}) == 4
    assert md_rows(out)[("sac_continuous_action", "fast")]["steps/s median"] == "75.0"  # 50, 50, 100, 150
    assert "; then ./run.sh --append" in json.loads((out / "bench.json").read_text())["command"]


def test_driver_interrupt_keeps_what_finished(tmp_path):
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out, marker = tmp_path / "bench", tmp_path / "marker"
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        MPLBACKEND="Agg",
        RUN_SH_SCRIPTS_DIR=str(scripts),
        FAKE_HANG_SEED="2",
        FAKE_MARKER=str(marker),
    )
    proc = subprocess.Popen(
        [
            "bash",
            str(RUN_SH),
            "--scripts",
            "sac_continuous_action",
            "--variants",
            "baseline",
            "--seeds",
            "1,2,3",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not marker.exists() and proc.poll() is None:  # seed 2 is running (and waits for us)
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the driver and its run both get it
    stdout, stderr = proc.communicate()
    assert proc.returncode == 130, stdout + stderr
    rows = read_results(out)
    assert [(r["seed"], r["status"]) for r in rows] == [("1", "finished"), ("2", "interrupted")]  # seed 3 never started
    assert md_rows(out)[("sac_continuous_action", "baseline")]["steps/s median"] == "50.0"
    check_png(out / "sps_sac_continuous_action.png")


def hanging_run_sh(tmp_path, scripts, hang_seed, args):
    """run.sh started in a session of its own with `args`, its run of seed `hang_seed` running (and running for ever
    until a signal stops it): the Popen."""
    marker = tmp_path / "marker"
    env = dict(os.environ, PYTHON=sys.executable, MPLBACKEND="Agg", RUN_SH_SCRIPTS_DIR=str(scripts))
    env.update(FAKE_HANG_SEED=str(hang_seed), FAKE_MARKER=str(marker))
    proc = subprocess.Popen(["bash", str(RUN_SH), *args], cwd=ROOT, env=env, start_new_session=True, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    while not marker.exists() and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    return proc


def test_sigterm_to_the_driver_alone_stops_its_running_run(tmp_path):
    """kill PID (docker stop, systemd) reaches run.sh alone: it passes the SIGTERM on to the run going, which writes its
    summary as terminated, and exits 143 without waiting for the run's end."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2,3", "--out", str(out)]
    proc = hanging_run_sh(tmp_path, scripts, 2, args)  # seed 2 is running
    os.kill(proc.pid, signal.SIGTERM)  # run.sh alone
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stdout + stderr
    recorded = [(r["seed"], r["status"], r["exit_code"]) for r in aggregate.read_runs(out)]
    assert recorded == [(1, "finished", "0"), (2, "terminated", "143")]  # seed 3 never started


def test_a_second_call_into_a_folder_in_use_is_refused(tmp_path):
    """While run.sh runs into a folder, a second call into it (--resume, --append) would run the same unfinished runs
    into the same run folders: it is refused before any work, and the first goes on."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2", "--out", str(out)]
    proc = hanging_run_sh(tmp_path, scripts, 2, args)  # seed 2 is running
    try:
        plan = (out / "plan.tsv").read_text()
        for again, flag in [(["--resume", out], "--resume"), ([*args, "--append"], "--out")]:
            second = run_sh(*again, env={"RUN_SH_SCRIPTS_DIR": str(scripts)}, check=2)
            said = f"run.sh: error: {flag}: another ./run.sh is running into {out}; wait for it or stop it"
            assert second.stderr.strip().splitlines()[-1] == said, second.stderr
        assert proc.poll() is None and (out / "plan.tsv").read_text() == plan
        assert [(r["seed"], r["status"]) for r in aggregate.read_runs(out)] == [(1, "finished")]
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stdout + stderr
    run_sh("--resume", out, env={"RUN_SH_SCRIPTS_DIR": str(scripts)}, check=0)  # the folder is free again


def test_relative_paths_are_the_callers(tmp_path):
    """Run from another folder, the relative paths given (PYTHON, RUN_SH_SCRIPTS_DIR, --out, --publish) are that
    folder's, though the runs start from the checkout's root."""
    fake_scripts(tmp_path, "sac_continuous_action")
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.symlink_to(sys.executable)
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1", "--out", "bench"]
    env = {"RUN_SH_SCRIPTS_DIR": "scripts", "PYTHON": "bin/python"}
    run_sh(*args, "--publish", "pub", env=env, check=0, cwd=tmp_path)
    assert [(r["seed"], r["status"]) for r in aggregate.read_runs(tmp_path / "bench")] == [(1, "finished")]
    assert (tmp_path / "pub" / "results.md").is_file()


@pytest.mark.parametrize(
    "flags,said",
    [
        (["--aggregate", "OUT", "--scripts", "dqn"], "--scripts: not with --aggregate"),
        (["--aggregate", "OUT", "--out", "elsewhere"], "--out: not with --aggregate"),
        (["--resume", "OUT", "--total-timesteps", "5000"], "--total-timesteps: not with --resume"),
        (["--resume", "OUT", "--quick"], "--quick: not with --resume"),
        (["--resume", "OUT", "--", "--no-cuda"], "-- FLAGS: not with --resume"),
    ],
)
def test_an_option_the_other_leaves_without_effect_is_refused(flags, said, tmp_path):
    """--aggregate makes the tables of all its folder holds, --resume runs its plan's commands as they are: an option
    they would ignore is refused, before any work."""
    out = tmp_path / "bench"
    out.mkdir()
    proc = run_sh(*[str(out) if f == "OUT" else f for f in flags], check=2)
    assert proc.stderr.strip().splitlines()[-1].startswith(f"run.sh: error: {said}"), proc.stderr
    assert list(out.iterdir()) == []


@pytest.mark.parametrize(
    "flag,value,said",
    [
        ("--scripts", "dqn,dqn", "dqn twice"),
        ("--variants", "baseline,baseline", "baseline twice"),
        ("--seeds", "1,01", "01 twice"),
    ],
)
def test_a_name_given_twice_is_refused(flag, value, said, tmp_path):
    """A seed given twice would run one run twice and count it as two seeds in the median and the spread."""
    proc = run_sh(flag, value, "--out", tmp_path / "bench", check=2)
    assert proc.stderr.strip().splitlines()[-1].startswith(f"run.sh: error: {flag}: {said}"), proc.stderr
    assert not (tmp_path / "bench").exists()


def test_a_diverged_run_is_recorded_as_diverged(tmp_path):
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2", "--out", out]
    run_sh(*args, env={"RUN_SH_SCRIPTS_DIR": str(scripts), "FAKE_DIVERGE_SEED": "2"}, check=1)
    assert [(r["seed"], r["status"]) for r in read_results(out)] == [("1", "finished"), ("2", "diverged")]


@pytest.mark.parametrize("flag", ["--scripts", "--variants", "--seeds"])
def test_a_list_given_empty_is_refused(flag, tmp_path):
    """As an unset shell variable gives it (--scripts "$ALGO"): not the whole matrix at full budgets."""
    proc = run_sh(flag, "", "--out", tmp_path / "bench", check=2)
    assert proc.stderr.strip().splitlines()[-1] == f"run.sh: error: {flag}: empty (leave it out for its default)"
    assert not (tmp_path / "bench").exists()


def test_driver_records_a_terminated_run_and_stops(tmp_path):
    """A run stopped by SIGTERM (its summary says "terminated", exit 143) is recorded as terminated, not failed nor
    interrupted; no more runs start, what exists is aggregated, and run.sh exits 143."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2,3", "--out", out]
    proc = run_sh(*args, env={"RUN_SH_SCRIPTS_DIR": str(scripts), "FAKE_TERMINATE_SEED": "2"}, check=143)
    assert "run.sh: terminated (SIGTERM)" in proc.stderr
    assert [(r["seed"], r["status"], r["exit_code"]) for r in aggregate.read_runs(out)] == [
        (1, "finished", "0"),
        (2, "terminated", "143"),
    ]  # seed 3 never started
    rows = read_results(out)
    assert [(r["seed"], r["status"]) for r in rows] == [("1", "finished"), ("2", "terminated")]
    assert rows[1]["error"] == aggregate.TERMINATED and rows[1]["run_dir"]  # its summary.json is kept
    assert md_rows(out)[("sac_continuous_action", "baseline")]["runs"] == "1/2"
    md = (out / "results.md").read_text()
    failure = md.split("## Runs that did not finish")[1]
    assert "### sac_continuous_action baseline seed 2: terminated (exit 143)" in failure
    assert (
        f"The run was {aggregate.TERMINATED}." in failure
        and "End of `logs/sac_continuous_action__baseline__seed2.log`" in failure
    )


def test_resume_runs_anew_a_run_without_checkpoint_and_counts_it_once(tmp_path):
    """A run that stopped before its first checkpoint runs again from the start: its earlier attempt is kept aside in
    superseded/ (out of the tables), runs.tsv and the results keep one row per run."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2,3", "--out", out]
    run_sh(*args, env={"RUN_SH_SCRIPTS_DIR": str(scripts), "FAKE_TERMINATE_SEED": "2"}, check=143)
    run_sh("--resume", out, env={"RUN_SH_SCRIPTS_DIR": str(scripts)}, check=0)
    assert [(r["seed"], r["status"]) for r in aggregate.read_runs(out)] == [(1, "finished"), (2, "finished"), (3, "finished")]
    assert [(r["seed"], r["status"]) for r in read_results(out)] == [("1", "finished"), ("2", "finished"), ("3", "finished")]
    (kept,) = (out / "superseded/runs/sac_continuous_action/baseline").iterdir()
    assert kept.name.startswith("seed2.") and list(kept.rglob("summary.json"))


def test_resume_with_jobs_rewrites_runs_tsv_once_before_the_runs(tmp_path):
    """--resume --jobs 2: the earlier attempts' rows go before any run starts, so that runs ending at once cannot race
    over runs.tsv; one row per run."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2", "--out", out, "--jobs", "2"]
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    both = {"FAKE_RENDEZVOUS": str(meeting), "FAKE_RENDEZVOUS_N": "2", "FAKE_TERMINATE_SEED": "1,2"}  # both stopped
    run_sh(*args, env={"RUN_SH_SCRIPTS_DIR": str(scripts), **both}, check=143)
    assert [r["status"] for r in aggregate.read_runs(out)] == ["terminated", "terminated"]
    for seed in (1, 2):
        for folder in (out / f"runs/sac_continuous_action/baseline/seed{seed}").iterdir():
            (folder / "checkpoint.pt").write_bytes(b"a checkpoint")
    run_sh("--resume", out, "--jobs", "2", env={"RUN_SH_SCRIPTS_DIR": str(scripts)}, check=0)
    assert sorted((r["seed"], r["status"]) for r in aggregate.read_runs(out)) == [(1, "finished"), (2, "finished")]


def test_resume_finishes_the_runs_an_earlier_call_left(tmp_path):
    """./run.sh --resume OUT: the runs of the earlier call's plan that did not finish run again, each from its run's
    checkpoint.pt where it has one (--resume), in its own folder; those never started start; runs.tsv and results.csv
    keep one row per run; the finished ones are left alone."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2,3", "--out", out]
    run_sh(*args, env={"RUN_SH_SCRIPTS_DIR": str(scripts), "FAKE_TERMINATE_SEED": "2"}, check=143)
    (stopped,) = (out / "runs/sac_continuous_action/baseline/seed2").iterdir()
    (stopped / "checkpoint.pt").write_bytes(b"a checkpoint")  # as the script leaves one when SIGTERM stops it
    first = (out / "runs/sac_continuous_action/baseline/seed1").stat().st_mtime_ns
    proc = run_sh("--resume", out, env={"RUN_SH_SCRIPTS_DIR": str(scripts)}, check=0)
    assert "[1/2] sac_continuous_action__baseline__seed2" in proc.stdout and "[resumed]" in proc.stdout, proc.stdout
    recorded = aggregate.read_runs(out)
    assert [(r["seed"], r["status"]) for r in recorded] == [(1, "finished"), (2, "finished"), (3, "finished")]
    argv = json.loads((stopped / "summary.json").read_text())["args"]["argv"]
    assert argv[argv.index("--resume") + 1] == str(stopped)  # on from its checkpoint, in its folder
    assert len(list((out / "runs/sac_continuous_action/baseline/seed2").iterdir())) == 1
    assert "--resume" in next(r["command"] for r in recorded if r["seed"] == 2)
    assert (out / "runs/sac_continuous_action/baseline/seed1").stat().st_mtime_ns == first  # not run again
    assert [r["status"] for r in read_results(out)] == ["finished"] * 3
    assert run_sh("--resume", tmp_path / "nothing", check=2).stderr.startswith("run.sh: error: --resume: ")


def test_resume_with_a_selection_runs_only_those(tmp_path):
    """./run.sh --resume OUT --seeds 3: of the plan's unfinished runs, only those the selection names, the others left
    as they are for a later --resume; a selection of none of them runs nothing."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    env = {"RUN_SH_SCRIPTS_DIR": str(scripts)}
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2,3", "--out", out]
    run_sh(*args, env={**env, "FAKE_TERMINATE_SEED": "2"}, check=143)
    (stopped,) = (out / "runs/sac_continuous_action/baseline/seed2").iterdir()
    (stopped / "checkpoint.pt").write_bytes(b"a checkpoint")  # as the script leaves one when SIGTERM stops it
    proc = run_sh("--resume", out, "--seeds", "3", env=env, check=0)
    assert "[1/1] sac_continuous_action__baseline__seed3" in proc.stdout and "seed2" not in proc.stdout, proc.stdout
    assert [(r["seed"], r["status"]) for r in aggregate.read_runs(out)] == [
        (1, "finished"),
        (2, "terminated"),
        (3, "finished"),
    ]
    proc = run_sh("--resume", out, "--variants", "fast", env=env, check=0)
    assert "seed2" not in proc.stdout, proc.stdout
    assert run_sh("--resume", out, "--scripts", "nonsense", env=env, check=2).stderr.startswith("run.sh: error: --scripts: ")
    proc = run_sh("--resume", out, env=env, check=0)
    assert "[1/1] sac_continuous_action__baseline__seed2" in proc.stdout, proc.stdout
    assert [r["status"] for r in aggregate.read_runs(out)] == ["finished"] * 3


def test_a_run_resumed_by_its_own_script_counts_as_finished(tmp_path):
    """A run that run.sh recorded as terminated, then taken to its end with its script's own --resume (to resume it
    before the plan's earlier runs): the tables say finished, and ./run.sh --resume leaves it alone."""
    scripts = fake_scripts(tmp_path, "sac_continuous_action")
    out = tmp_path / "bench"
    args = ["--scripts", "sac_continuous_action", "--variants", "baseline", "--seeds", "1,2,3", "--out", out]
    run_sh(*args, env={"RUN_SH_SCRIPTS_DIR": str(scripts), "FAKE_TERMINATE_SEED": "2"}, check=143)
    (stopped,) = (out / "runs/sac_continuous_action/baseline/seed2").iterdir()
    script = [sys.executable, str(scripts / "sac_continuous_action.py"), "--seed", "2", "--resume", str(stopped)]
    subprocess.run(script, check=True, capture_output=True)
    mtime = (stopped / "summary.json").stat().st_mtime_ns
    run_sh("--aggregate", out, check=0)
    assert [r["status"] for r in read_results(out)] == ["finished", "finished"]
    assert [r["status"] for r in aggregate.read_runs(out)] == ["finished", "terminated"]  # run.sh's own record stays
    proc = run_sh("--resume", out, env={"RUN_SH_SCRIPTS_DIR": str(scripts)}, check=0)
    assert "[1/1] sac_continuous_action__baseline__seed3" in proc.stdout and "seed2" not in proc.stdout, proc.stdout
    assert (stopped / "summary.json").stat().st_mtime_ns == mtime  # not run again
    assert [(r["seed"], r["status"], r["exit_code"]) for r in read_results(out)] == [
        ("1", "finished", "0"),
        ("2", "finished", "0"),
        ("3", "finished", "0"),
    ]


def test_jobs_run_at_once_each_on_its_own_cores(tmp_path):
    """--jobs 2: two runs at once (each waits until the other has started), each pinned to its own half of the cores
    with OMP_NUM_THREADS set to match; machine.json records the split and results.md says the speeds shared the machine."""
    scripts = fake_scripts(tmp_path, "dqn", "dqn_torchcompile")
    out, meeting = tmp_path / "bench", tmp_path / "meeting"
    meeting.mkdir()
    proc = run_sh(
        "--scripts",
        "dqn",
        "--variants",
        "baseline,fast",
        "--seeds",
        "1",
        "--jobs",
        "2",
        "--out",
        out,
        env={"RUN_SH_SCRIPTS_DIR": str(scripts), "FAKE_RENDEZVOUS": str(meeting), "FAKE_RENDEZVOUS_N": "2"},
        check=0,
    )
    assert "(2 at once)" in proc.stdout
    rows = read_results(out)
    assert [(r["variant"], r["status"]) for r in rows] == [("baseline", "finished"), ("fast", "finished")]
    cores = sorted(os.sched_getaffinity(0))
    half = max(1, len(cores) // 2)
    machine = json.loads((out / "machine.json").read_text())
    assert machine["jobs"] == 2 and machine["cpu_sets"] == [
        ",".join(map(str, cores[:half])),
        ",".join(map(str, cores[half : 2 * half] or cores[:1])),
    ]
    seen = [json.loads((out / r["run_dir"] / "summary.json").read_text())["args"] for r in rows]
    assert sorted(tuple(a["cores"]) for a in seen) == sorted(tuple(map(int, c.split(","))) for c in machine["cpu_sets"])
    assert all(a["omp"] == str(half) for a in seen)
    assert "**Runs 2 at a time**" in (out / "results.md").read_text()


def test_jobs_pass_ctrl_c_on_to_every_running_run(tmp_path):
    """With --jobs the runs sit in their own process groups (a terminal's Ctrl-C reaches run.sh alone): run.sh passes it
    on, the hanging run writes its summary as interrupted, and what finished is kept."""
    scripts = fake_scripts(tmp_path, "dqn")
    out, marker = tmp_path / "bench", tmp_path / "marker"
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        MPLBACKEND="Agg",
        RUN_SH_SCRIPTS_DIR=str(scripts),
        FAKE_HANG_SEED="1",
        FAKE_MARKER=str(marker),
    )
    proc = subprocess.Popen(
        [
            "bash",
            str(RUN_SH),
            "--scripts",
            "dqn",
            "--variants",
            "baseline",
            "--seeds",
            "1,2",
            "--jobs",
            "2",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # seed 1 hangs; seed 2 has finished and run.sh has recorded it (its summary.json alone is written before its
    # script exits, and a Ctrl-C in between would interrupt it)
    runs_tsv = out / "runs.tsv"
    while proc.poll() is None and not (
        marker.exists() and runs_tsv.is_file() and "dqn\tbaseline\t2\tfinished\t" in runs_tsv.read_text()
    ):
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # run.sh's own process group only
    stdout, stderr = proc.communicate()
    assert proc.returncode == 130, stdout + stderr
    assert sorted((r["seed"], r["status"]) for r in read_results(out)) == [("1", "interrupted"), ("2", "finished")]


def test_slurm_without_sbatch_and_other_bad_scale_options(tmp_path):
    """One line and exit 2, nothing started: --jobs 0, a GPU that does not exist, --slurm where sbatch is missing."""
    bin_dir = tmp_path / "bin"  # every command this machine has, but sbatch
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        for f in pathlib.Path(d).iterdir() if pathlib.Path(d).is_dir() else []:
            if f.name != "sbatch" and not (bin_dir / f.name).exists():
                (bin_dir / f.name).symlink_to(f)
    out = tmp_path / "bench"
    for args, env, message in [
        (["--jobs", "0"], {}, "--jobs: '0' is not a positive integer"),
        (["--gpus", "7"], {}, "--gpus: GPU 7 does not exist here"),
        (["--slurm"], {"PATH": str(bin_dir)}, "--slurm: sbatch is not on PATH"),
    ]:
        proc = run_sh(*args, "--out", out, env=env, check=2)
        assert (
            proc.stderr.strip().splitlines() == [f"run.sh: error: {proc.stderr.split('error: ', 1)[1].strip()}"]
            and message in proc.stderr
        )
        assert not out.exists()


def fake_sbatch(tmp_path):
    """A stand-in sbatch on PATH that accepts any job and prints a job id, as `sbatch --parsable` does."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho $$\n")
    (bin_dir / "sbatch").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_slurm_task_killed_midway_is_recorded_as_failed(tmp_path):
    """A task that Slurm kills (time limit, scancel, a node lost) never reaches its last line: the record it wrote
    first stays, and the run shows as failed in the results. And a Slurm folder takes no local runs."""
    scripts = fake_scripts(tmp_path, "dqn")
    out, marker = tmp_path / "bench", tmp_path / "marker"
    env = {"RUN_SH_SCRIPTS_DIR": str(scripts), **fake_sbatch(tmp_path)}
    run_sh("--scripts", "dqn", "--variants", "baseline", "--seeds", "1", "--slurm", "--out", out, env=env, check=0)
    assert (out / "slurm" / "plan.1.tsv").is_file()
    task = subprocess.Popen(
        ["bash", str(RUN_SH), "--out", str(out), "--run-task", "1:0"],
        cwd=ROOT,
        start_new_session=True,
        env=dict(os.environ, PYTHON=sys.executable, **env, FAKE_HANG_SEED="1", FAKE_MARKER=str(marker)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not marker.exists() and task.poll() is None:
        time.sleep(0.05)
    os.killpg(task.pid, signal.SIGKILL)  # what a node lost does (or Slurm's SIGKILL, where SIGTERM did not end the run)
    task.wait()
    assert (out / "tasks" / "1.0.tsv").read_text().split("\t")[:4] == ["dqn", "baseline", "1", "failed"]
    run_sh("--aggregate", out, check=0)
    assert [(r["seed"], r["status"]) for r in read_results(out)] == [("1", "failed")]
    proc = run_sh("--append", "--scripts", "dqn", "--seeds", "2", "--out", out, env=env, check=2)
    assert "holds a benchmark run through Slurm" in proc.stderr


def test_a_slurm_task_at_its_time_limit_is_recorded_as_terminated(tmp_path):
    """Slurm's time limit (or scancel) sends SIGTERM to every process of the task: the task waits for its run, which
    writes its summary as terminated, records it so, and exits 143."""
    scripts = fake_scripts(tmp_path, "dqn")
    out, marker = tmp_path / "bench", tmp_path / "marker"
    env = {"RUN_SH_SCRIPTS_DIR": str(scripts), **fake_sbatch(tmp_path)}
    run_sh("--scripts", "dqn", "--variants", "baseline", "--seeds", "1", "--slurm", "--out", out, env=env, check=0)
    task = subprocess.Popen(
        ["bash", str(RUN_SH), "--out", str(out), "--run-task", "1:0"],
        cwd=ROOT,
        start_new_session=True,
        env=dict(os.environ, PYTHON=sys.executable, **env, FAKE_HANG_SEED="1", FAKE_MARKER=str(marker)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not marker.exists() and task.poll() is None:
        time.sleep(0.05)
    os.killpg(task.pid, signal.SIGTERM)
    assert task.wait() == 143
    assert (out / "tasks" / "1.0.tsv").read_text().split("\t")[:5] == ["dqn", "baseline", "1", "terminated", "143"]
    run_sh("--aggregate", out, check=0)
    assert [(r["seed"], r["status"]) for r in read_results(out)] == [("1", "terminated")]


def test_bad_options():
    for args, message in [
        (["--variants", "baseline,turbo"], "--variants: unknown variant 'turbo'"),
        (["--scripts", "a2c"], "--scripts: unknown algorithm 'a2c'"),
        (["--seeds", "1,x"], "--seeds: 'x'"),
        (["--total-timesteps", "-5"], "--total-timesteps"),
        (["--frobnicate"], "unknown option '--frobnicate'"),
    ]:
        proc = run_sh(*args, check=2)
        assert message in proc.stderr, proc.stderr
    help_text = run_sh("--help", check=0).stdout
    for option in [
        "--quick",
        "--scripts",
        "--variants",
        "--seeds",
        "--total-timesteps",
        "--out",
        "--aggregate",
        "--publish",
        "--jobs",
        "--gpus",
        "--slurm",
        "--slurm-args",
    ]:
        assert option in help_text


def test_quick_sac_end_to_end(tmp_path):
    """The real SAC pair under --quick (baseline and lean eager; compile is covered by the scripts' own tests)."""
    out = tmp_path / "bench"
    run_sh("--quick", "--scripts", "sac_continuous_action", "--variants", "baseline,fast", "--out", out, check=0)
    rows = read_results(out)
    assert [(r["algorithm"], r["variant"], r["seed"], r["status"]) for r in rows] == [
        ("sac_continuous_action", "baseline", "1", "finished"),
        ("sac_continuous_action", "fast", "1", "finished"),
    ]
    for r in rows:
        assert r["env_id"] == "HalfCheetah-v4" and r["total_timesteps"] == "1200"
        assert int(r["global_step"]) >= 1200 and float(r["sps"]) > 0
        assert r["episodic_return"] != ""  # one 1000-step episode ends before learning starts
        summary = json.loads((out / r["run_dir"] / "summary.json").read_text())
        assert SUMMARY_KEYS <= set(summary) and summary["status"] == "finished"
    table = md_rows(out)
    base, fast = table[("sac_continuous_action", "baseline")], table[("sac_continuous_action", "fast")]
    assert base["speed-up"] == "1.00x" and base["runs"] == "1/1" and fast["runs"] == "1/1"
    ratio = float(rows[1]["sps"]) / float(rows[0]["sps"])
    assert fast["speed-up"] == f"{ratio:.2f}x"
    assert base["episodic return"].endswith("(1 run)")
    for r in rows:  # from the launch to the first update: imports, envs and the random steps before learning starts
        summary = json.loads((out / r["run_dir"] / "summary.json").read_text())
        assert 0 < float(r["first_update_s"]) and r["compile_cache"] == "" and summary["compile_cache"]["misses"] == 0
        assert table[("sac_continuous_action", r["variant"])]["first update s"] == f"{float(r['first_update_s']):.1f}"
    md = (out / "results.md").read_text()
    assert "`--quick`" in md and "HalfCheetah-v4" in md
    machine = json.loads((out / "machine.json").read_text())
    assert machine["torch"] != "not installed" and machine["cpu_count"] == os.cpu_count() and machine["python"]
    check_png(out / "sps_sac_continuous_action.png")
    check_png(out / "curves_sac_continuous_action.png")


def test_compile_modes_are_variants(tmp_path):
    """--variants names torch.compile's other modes (issue 21): each passes its --compile-mode, and a summary found
    without runs.tsv is named from its args the same way; results.md gives each variant's warm-up."""
    scripts = fake_scripts(tmp_path, "dqn_torchcompile")
    out = tmp_path / "bench"
    modes = {
        "compile": None,
        "compile_max_autotune_no_cudagraphs": "max-autotune-no-cudagraphs",
        "compile_reduce_overhead": "reduce-overhead",
        "compile_max_autotune": "max-autotune",
    }
    run_sh(
        "--quick",
        "--scripts",
        "dqn",
        "--variants",
        ",".join(modes),
        "--seeds",
        "1",
        "--out",
        out,
        env={"RUN_SH_SCRIPTS_DIR": str(scripts)},
    )
    rows = read_results(out)
    assert [r["variant"] for r in rows] == list(modes) and {r["status"] for r in rows} == {"finished"}
    for r in rows:
        argv = json.loads((out / r["run_dir"] / "summary.json").read_text())["args"]["argv"]
        assert "--compile" in argv and "--cudagraphs" not in argv
        assert (argv[argv.index("--compile-mode") + 1] if "--compile-mode" in argv else None) == modes[r["variant"]]
        assert r["compile_mode"] == (modes[r["variant"]] or "default")
    assert {v: t["warm-up s"] for (_, v), t in md_rows(out).items()} == dict.fromkeys(modes, "0.1")
    (out / "runs.tsv").unlink()  # the same summaries, named from their args alone
    run_sh("--aggregate", out)
    assert [r["variant"] for r in read_results(out)] == list(modes)
    proc = run_sh("--variants", "compile_turbo", "--out", tmp_path / "x", check=2)
    assert "compile_max_autotune_no_cudagraphs" in proc.stderr


def test_a_bare_run_sh_runs_nothing_and_says_what_all_would_run():
    """The full reproduction takes hours: with no option run.sh starts nothing, says what --all would run (how many
    runs, at what budgets) and where the last published benchmark is, and exits 2."""
    before = set((ROOT / "bench").glob("*")) if (ROOT / "bench").is_dir() else set()
    proc = run_sh(check=2)
    assert proc.stderr.startswith("run.sh: nothing run. With no options it would run the full reproduction: 60 runs")
    assert "./run.sh --all" in proc.stderr and "doc/results/cpu-2core" in proc.stderr and proc.stdout == ""
    after = set((ROOT / "bench").glob("*")) if (ROOT / "bench").is_dir() else set()
    assert after == before  # no benchmark folder made


def test_variant_files_are_variants_of_their_algorithm(tmp_path):
    """The scale variants' files of their own: ray runs the Ray file of PPO continuous (2 envs, 2 runners) and multigpu
    the torchrun file of PPO Atari (under torchrun where it is installed); the algorithms without such a file are
    left out of the plan; --quick runs both; each is aggregated as a variant of its algorithm, its speed-up over the
    same baseline."""
    scripts = fake_scripts(
        tmp_path,
        "ppo_continuous_action",
        "ppo_continuous_action_ray_torchcompile",
        "ppo_atari",
        "ppo_atari_multigpu_torchcompile",
    )
    out = tmp_path / "bench"
    env = {"RUN_SH_SCRIPTS_DIR": str(scripts)}
    flags = ["--scripts", "ppo_continuous_action,ppo_atari,dqn", "--seeds", "1,2", "--out", out, "--", "--env-id", "Fake-v0"]
    run_sh("--quick", "--variants", "baseline,ray,multigpu", *flags[:-3], env=env, check=1)  # dqn's baseline: missing
    recorded = {(r["algorithm"], r["variant"]): r for r in aggregate.read_runs(out) if r["seed"] == 1}
    assert sorted(recorded) == [
        ("dqn", "baseline"),
        ("ppo_atari", "baseline"),
        ("ppo_atari", "multigpu"),
        ("ppo_continuous_action", "baseline"),
        ("ppo_continuous_action", "ray"),
    ]
    assert "--num-envs 2 --env-runners 2" in recorded[("ppo_continuous_action", "ray")]["command"]
    assert recorded[("ppo_atari", "multigpu")]["command"].startswith("python -m torch.distributed.run --standalone")
    rows = {(r["algorithm"], r["variant"]): r for r in read_results(out) if r["seed"] == "1"}
    assert rows[("ppo_continuous_action", "ray")]["status"] == rows[("ppo_atari", "multigpu")]["status"] == "finished"
    table = md_rows(out)
    assert table[("ppo_continuous_action", "ray")]["speed-up"] == "1.00x"  # the fake scripts' speeds are the seed's
    assert table[("ppo_atari", "multigpu")]["speed-up"] == "1.00x"
    bench = json.loads((out / "bench.json").read_text())
    assert bench["variants"] == ["baseline", "ray", "multigpu"]
    run_sh("--quick", *flags[:2], "--seeds", "1", "--out", tmp_path / "quick", env=env, check=1)  # fast files: missing
    quick = json.loads((tmp_path / "quick" / "bench.json").read_text())
    assert quick["variants"] == ["baseline", "fast", "compile", "compile_cudagraphs", "ray", "multigpu"]


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="run.sh runs the multigpu variant under torchrun")
def test_torchrun_passes_slurm_s_warning_on_and_the_run_is_recorded_as_it_ended(tmp_path):
    """Under torchrun (the multigpu variant), SIGUSR1, Slurm's warning before the time limit, reaches the ranks, which
    stop with their checkpoint; torchrun then exits 1 after it, and run.sh records the run as its summary says it
    ended: terminated, as the run of another variant is."""
    scripts = fake_scripts(tmp_path, "ppo_atari_multigpu_torchcompile")
    out = tmp_path / "bench"
    args = ["--scripts", "ppo_atari", "--variants", "multigpu", "--seeds", "1", "--out", str(out)]
    proc = hanging_run_sh(tmp_path, scripts, 1, args)  # the rank is running
    try:
        (torchrun,) = [pid for pid in descendants(proc.pid) if "torch.distributed.run" in command(pid)]
        os.kill(torchrun, signal.SIGUSR1)  # (the run's own process: Slurm's B:USR1 reaches run.sh, which passes it on)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143, stdout + stderr
    (recorded,) = aggregate.read_runs(out)
    assert (recorded["status"], recorded["exit_code"]) == ("terminated", "1"), recorded
    assert "--signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1" in recorded["command"]


def test_aggregate_draws_a_reference(tmp_path):
    """--reference FILE (CleanRL's published returns, offline): each curves panel shows the reference's points for its
    env id, and results.md gains a column: each row's return at the reference's last step against the reference."""
    runs = tmp_path / "runs"
    for seed, curve in [(1, (1.0, 2.0, 3.0)), (2, (1.0, 2.0, 5.0))]:
        write_run(runs, "sac_continuous_action", "fast", seed, 100, curve[-1], returns_curve=curve)
    write_run(runs, "dqn", "fast", 1, 100, 3.0, env_id="CartPole-v1")  # no reference for it: a dash
    reference = tmp_path / "reference.csv"
    reference.write_text(
        "algorithm,env_id,step,return,std,seeds,source,how_read\n"
        "sac_continuous_action,HalfCheetah-v4,2500,2.0,,3,here,read off a plot\n"
        "sac_continuous_action,HalfCheetah-v4,3000,4.5,0.5,3,here,published\n"
        "sac_continuous_action,Hopper-v4,3000,9.0,1.0,3,here,another env: not on this panel\n"
    )
    run_sh("--aggregate", runs, "--reference", reference, check=0)
    table = md_rows(runs)
    # the runs' returns at step 3000 (their rows at 2000, 2500, 3000): 3.0 and 5.0
    assert table[("sac_continuous_action", "fast")]["return at CleanRL's step"] == "4.0 ± 1.4 (2 runs) vs 4.5 ± 0.5 at 3,000"
    assert table[("dqn", "fast")]["return at CleanRL's step"] == "–"
    assert "return at CleanRL's step: each run's episodic return" in (runs / "results.md").read_text()
    check_png(runs / "curves_sac_continuous_action.png")
    # A finished run's last row may fall short of its budget by less than a batch (PPO's 1M ends at 999,424): it got there
    run = types.SimpleNamespace(
        run_dir=next(runs.glob("HalfCheetah-v4__*__1__*")).name, status="finished", total_timesteps=3500
    )
    assert aggregate.return_at(runs, run, 3500) == 3.0
    assert aggregate.return_at(runs, types.SimpleNamespace(**{**vars(run), "status": "terminated"}), 3500) is None
    proc = run_sh("--aggregate", runs, "--reference", tmp_path / "none.csv", check=2)
    assert proc.stderr.startswith("run.sh: error: --reference: no such file"), proc.stderr
