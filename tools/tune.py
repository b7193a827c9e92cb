"""Hyperparameter tuning of any script of the collection with Optuna: trials of sampled flags, each run for several seeds
(and environments), scored by the runs' own summary.json, pruned on their metrics.csv rows, in a study kept in a
database that several workers can share. No script imports this tool: it reads the files the runs write and starts and
stops their processes.

    python tools/tune.py dqn --param learning-rate=float:1e-4:1e-2:log --param batch-size=choice:64,128,256 \\
        --trials 20 --seeds 1,2 -- --total-timesteps 100000
    python tools/tune.py sac_continuous_action --space my_space.py --storage postgresql+psycopg://me@db/tune ...
    ./run.sh --tune --slurm --workers 8 -- dqn --param ... --storage postgresql+psycopg://me@db/tune

The search space: --param NAME=float:LOW:HIGH[:log] | int:LOW:HIGH[:log] | choice:A,B,... (NAME a flag of the script,
with dashes or underscores), or --space FILE, a Python file defining `params(trial)` that returns {flag: value} (as
CleanRL's tuner takes a params_fn). Each trial runs the script once per seed and per --env-ids environment, the flags
after `--` on every run. Its score: the mean over those runs of summary.json's episodic_return (the mean return of the
run's last 20 episodes), each normalized as (return - low) / (high - low) by --target-scores where given (CleanRL's
target_scores; needed to average several environments). Optuna's TPE sampler by default (--sampler-seed for repeatable
studies).

Pruning (--pruner median or hyperband): while a run trains, each new row of its metrics.csv with an episodic return is
reported as an intermediate value (at the run's position in the trial times the budget, plus its global_step), and
none before --prune-after steps (half a run by default: a run that has just begun to learn says little of its flags) nor
before three trials are complete (the median pruner; Hyperband's rungs have no such count); a trial the pruner stops
has its run ended by SIGTERM, which the scripts answer by writing summary.json with status "terminated".

The study lives in --storage: a sqlite file by default (<out>/study.db), --jobs trials at a time in this process; for
workers on many machines a PostgreSQL URL (postgresql+psycopg://user@host/db, through Optuna's RDB storage) or Optuna's
journal file on a shared file system (journal:PATH). The same --study-name resumes a study. With an RDB storage (sqlite
or PostgreSQL) every running trial sends a heartbeat: a worker killed mid-trial (its runs get SIGTERM as their parent
dies) leaves its trial RUNNING until the heartbeat is --grace-s old; the next worker to start a trial marks it failed and
queues it again with the same flags (Optuna's RetryHeartbeatStaleTrialCallback, --retries times). Optuna's journal
storage has no heartbeat: there a killed worker's trial stays as it was. Ctrl-C or SIGTERM (Slurm's time limit) to a
worker stops the runs of its running trials (SIGTERM: each checkpoints and writes its summary), fails those trials and
queues each again with its flags, writes the report and exits 130 or 143: the same command goes on with the study.

What it leaves in --out: each run's folder (runs/trial-N/...), trials.csv and trials.md (every trial of the study: its
state, score, flags, the trial it retries), best.txt (the best trial's command line, to paste), and plots as PNG
(optimization_history.png, param_importances.png). --no-report: run trials and write nothing else (a Slurm worker);
--report-only: run nothing, write them from the storage.

Errors a user meets end with one line and exit 2, before anything is written to the study: a --param naming no flag of
the script, an empty range, a --space file without params(), a storage that cannot be reached. A script that fails in
every trial stops the study after three failed trials in a row, with one line naming the cause (exit 1); a run that
diverged (NaN or inf in its metrics) is its flags' outcome, not a failure: its trial is pruned.
"""

import argparse
import ast
import contextlib
import csv
import ctypes
import importlib.util
import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import threading
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
KINDS = ("float", "int", "choice")


def fail(message, code=2):
    print(f"tune.py: error: {message}", file=sys.stderr)
    sys.exit(code)


def script_path(name):
    """scripts/NAME.py for an algorithm or file name, or a path to a script."""
    path = pathlib.Path(name)
    if not path.suffix:
        path = SCRIPTS / f"{name}.py"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SCRIPTS.glob("*.py")))
        fail(f"{name}: no such script (one of {known}, or a path)")
    return path.resolve()


def script_flags(path):
    """The fields of the script's Args dataclass, read from its text (the script is not imported): {name: default}."""
    tree = ast.parse(path.read_text())
    args = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args"), None)
    if args is None:
        fail(f"{path}: no Args dataclass: not one of the collection's scripts")
    return {n.target.id: n.value for n in args.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def parse_param(text, flags):
    """--param NAME=KIND:SPEC -> (field name, kind, spec) or one line saying what is wrong."""
    name, _, spec = text.partition("=")
    field = name.strip().lstrip("-").replace("-", "_")
    if field not in flags:
        fail(f"--param {name}: not a flag of the script (its flags: {', '.join('--' + f.replace('_', '-') for f in flags)})")
    kind, _, rest = spec.partition(":")
    if kind not in KINDS or not rest:
        fail(f"--param {text}: expected {name}=float:LOW:HIGH[:log], int:LOW:HIGH[:log] or choice:A,B,...")
    if kind == "choice":
        values = [literal(v) for v in rest.split(",") if v != ""]
        if not values:
            fail(f"--param {text}: an empty choice")
        return field, kind, values
    parts = rest.split(":")
    try:
        low, high = (float(parts[0]), float(parts[1])) if kind == "float" else (int(parts[0]), int(parts[1]))
    except (ValueError, IndexError):
        fail(f"--param {text}: LOW and HIGH must be {'numbers' if kind == 'float' else 'integers'}")
    log = parts[2:] == ["log"]
    if parts[2:] not in ([], ["log"]):
        fail(f"--param {text}: only ':log' may follow LOW:HIGH")
    if not low < high:
        fail(f"--param {text}: an empty range ({low} is not below {high})")
    if log and low <= 0:
        fail(f"--param {text}: a log range needs LOW above 0")
    return field, kind, (low, high, log)


def literal(text):
    """A choice's value as the flag takes it: a number where it reads as one, else the text."""
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def load_space(path):
    """--space FILE: its params(trial) -> {flag: value}."""
    if not path.endswith(".py"):
        fail(f"--space {path}: a Python file, FILE.py")
    try:
        spec = importlib.util.spec_from_file_location("tune_space", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:  # (it cannot be read, or fails as it runs: a syntax error, an import it lacks)
        problem = f"{type(e).__name__}: {e}".replace("\n", " ")
        fail(f"--space {path}: cannot be read ({problem})")
    if not callable(getattr(module, "params", None)):
        fail(f"--space {path}: defines no params(trial) function")
    return module.params


def parse_targets(text, env_ids):
    """--target-scores 'ENV=LOW:HIGH,...' (or JSON {env: [low, high]}) -> {env: (low, high)}, for every env id."""
    if not text:
        if len(env_ids) > 1:
            fail("--env-ids: several environments need --target-scores to be averaged (ENV=LOW:HIGH,...)")
        return {}
    try:
        targets = json.loads(text) if text.lstrip().startswith("{") else {}
        if not targets:
            for item in text.split(","):
                env, _, span = item.partition("=")
                low, high = span.split(":")
                targets[env.strip()] = (float(low), float(high))
        targets = {env: (float(lo), float(hi)) for env, (lo, hi) in targets.items()}
    except (ValueError, TypeError):
        fail(f'--target-scores {text}: expected ENV=LOW:HIGH,... (or JSON: {{"ENV": [LOW, HIGH]}})')
    missing = [env for env in env_ids if env not in targets]
    if missing:
        fail(f"--target-scores: no range for {missing[0]}")
    if any(lo == hi for lo, hi in targets.values()):
        fail("--target-scores: an empty range (LOW equals HIGH)")
    return targets


def make_storage(url, heartbeat_s, grace_s, retries):
    """Optuna's storage for the URL: RDB (sqlite, PostgreSQL, ...) with a heartbeat and the retry of a dead worker's
    trial, or a journal file (journal:PATH). One line and exit 2 where it cannot be reached."""
    import optuna

    for attempt in range(5):
        try:
            if url.startswith("journal:"):
                path = url[len("journal:") :]
                return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))
            retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=retries)
            storage = optuna.storages.RDBStorage(
                url,
                heartbeat_interval=heartbeat_s,
                grace_period=grace_s,
                heartbeat_stale_trial_callback=retry,
                # sqlite: a writer waits for another's lock (--jobs, workers on one machine) rather than failing
                engine_kwargs={"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {"pool_pre_ping": True},
            )
            storage.get_all_studies()  # a query: the database answers
            return storage
        except Exception as e:  # (sqlalchemy's OperationalError, a missing driver, a bad URL, an unwritable file)
            race = any(w in str(e) for w in ("already exists", "UNIQUE constraint", "duplicate key"))
            if race and attempt < 4:  # workers starting together: another made the tables first
                time.sleep(0.5 + attempt)
                continue
            problem = f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
            fail(f"--storage {url}: cannot be reached ({problem})")


def budget(flags, extra):
    """The runs' env steps: --total-timesteps among the flags after --, else the script's default."""
    for i, flag in enumerate(extra):
        value = extra[i + 1] if flag == "--total-timesteps" and i + 1 < len(extra) else None
        value = flag.split("=", 1)[1] if flag.startswith("--total-timesteps=") else value
        if value is not None:
            try:
                return int(value)
            except ValueError:
                fail(f"-- --total-timesteps {value}: an integer (the runs' budget, as the scripts take it)")
    with contextlib.suppress(ValueError, TypeError):
        return int(ast.literal_eval(flags["total_timesteps"]))
    return 10**9


def parent_death_signal():
    """In the child, before exec: SIGTERM when the worker that started it dies (Linux), so that a worker killed with
    SIGKILL leaves no run training alone; the run then checkpoints and writes its summary as "terminated"."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Stopped(Exception):
    """A trial's runs stopped by a signal to the tuner (Ctrl-C, SIGTERM): the trial fails and is queued again."""


class Tuner:
    def __init__(self, options, space, fixed):
        self.o, self.space, self.fixed = options, space, fixed
        self.script = script_path(options.script)
        self.flags = script_flags(self.script)
        self.out = pathlib.Path(options.out).resolve()
        self.failed_in_a_row, self.last_failure, self.lock = 0, None, threading.Lock()
        self.stopping = None  # the signal that stops the study (Ctrl-C, SIGTERM): its running trials are queued again
        self.stopped = []  # those trials
        self.budget = budget(self.flags, options.extra)  # env steps per run: a run's intermediate values follow the last's

    def sample(self, trial):
        """The trial's flags: --param's, or --space's params(trial)."""
        if self.space is not None:
            values = self.space(trial)
            unknown = [k for k in values if k.lstrip("-").replace("-", "_") not in self.flags]
            if unknown:
                raise ValueError(f"--space: params() returned {unknown[0]}, not a flag of {self.script.name}")
            return {k.lstrip("-").replace("-", "_"): v for k, v in values.items()}
        values = {}
        for field, kind, spec in self.fixed:
            if kind == "choice":
                values[field] = trial.suggest_categorical(field, spec)
            elif kind == "float":
                values[field] = trial.suggest_float(field, spec[0], spec[1], log=spec[2])
            else:
                values[field] = trial.suggest_int(field, spec[0], spec[1], log=spec[2])
        return values

    def command(self, values, seed=None, env_id=None, output_dir=None):
        """The script's command line for these flags (a bool flag: --x or --no-x, as tyro takes them)."""
        cmd = [sys.executable, str(self.script)]
        if output_dir is not None:
            cmd += ["--output-dir", str(output_dir)]
        if seed is not None:
            cmd += ["--seed", str(seed)]
        if env_id:
            cmd += ["--env-id", env_id]
        for field, value in values.items():
            flag = field.replace("_", "-")
            if isinstance(value, bool):
                cmd.append(f"--{flag}" if value else f"--no-{flag}")
            else:
                cmd += [f"--{flag}", str(value)]
        return cmd + list(self.o.extra)

    def score(self, value, env_id):
        low, high = self.o.targets.get(env_id, (0.0, 1.0)) if self.o.targets else (0.0, 1.0)
        return (value - low) / (high - low)

    def objective(self, trial):
        import optuna

        values = self.sample(trial)
        trial.set_user_attr("worker", f"{os.uname().nodename}:{os.getpid()}")
        trial.set_user_attr("flags", values)  # (--space's params() may suggest nothing for a flag it sets)
        runs = [(seed, env_id) for seed in self.o.seeds for env_id in self.o.env_ids]
        scores = []
        for position, (seed, env_id) in enumerate(runs):
            name = f"seed{seed}" + (f"-{env_id.replace('/', '_')}" if env_id else "")
            folder = self.out / "runs" / f"trial-{trial.number}" / name
            summary = self.run(trial, values, seed, env_id, folder, position)
            if summary is None:  # pruned
                raise optuna.TrialPruned()
            if summary.get("status") == "diverged":  # its flags' outcome, not the script's failure: scored as pruned
                trial.set_user_attr("error", f"{name}: diverged at step {summary.get('global_step')}")
                raise optuna.TrialPruned()
            scores.append(self.score(summary["episodic_return"], env_id))
        return sum(scores) / len(scores)

    def run(self, trial, values, seed, env_id, folder, position):
        """One run of the trial, its metrics.csv rows reported as it writes them; its summary, or None where the pruner
        stopped it (SIGTERM). A run that fails raises RuntimeError with its last error line."""
        folder.mkdir(parents=True, exist_ok=True)
        earlier = set(folder.iterdir())  # (another study's trial of this number in this --out: not this run's)
        cmd = self.command(values, seed, env_id, folder)
        trial.set_user_attr(f"command{position}", shlex.join(cmd[1:]))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(folder / "run.log", "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=parent_death_signal)
            try:
                seen, pruned = 0, False
                while proc.poll() is None and not self.stopping:
                    time.sleep(self.o.poll_s)
                    seen, pruned = self.read_rows(trial, folder, earlier, seen, position, env_id)
                    if pruned:
                        break
            finally:  # pruned, the study stopped, or an error here: the script checkpoints, writes its summary, ends
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                proc.wait()
        if self.stopping:  # (a Ctrl-C reaches the run itself too)
            raise Stopped(f"stopped by {signal.Signals(self.stopping).name}")
        if pruned:
            return None
        self.read_rows(trial, folder, earlier, seen, position, env_id)
        summaries = sorted(p for p in folder.glob("*/summary.json") if p.parent not in earlier)
        summary = json.loads(summaries[-1].read_text()) if summaries else None
        if summary is not None and summary.get("status") == "diverged":
            return summary
        if proc.returncode != 0 or summary is None or summary.get("episodic_return") is None:
            lines = (folder / "run.log").read_text(errors="replace").strip().splitlines()
            errors = [line for line in lines if line.startswith(("error:", "warning:")) or "Error" in line]
            cause = (errors or lines or ["no output"])[-1]
            if proc.returncode == 0 and summary is not None:
                cause = "no episode finished (summary.json's episodic_return is null): a longer budget?"
            raise RuntimeError(f"{shlex.join(cmd[1:])} exited {proc.returncode}: {cause}")
        return summary

    def read_rows(self, trial, folder, earlier, seen, position, env_id):
        """New metrics.csv rows of this run (not of the `earlier` folders) with a return, as intermediate values; (rows
        read, whether to prune)."""
        rows = []
        for path in [p for p in folder.glob("*/metrics.csv") if p.parent not in earlier]:
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
        for row in rows[seen:]:
            if row.get("episodic_return"):
                trial.report(
                    self.score(float(row["episodic_return"]), env_id), position * self.budget + int(row["global_step"])
                )
        if rows[seen:] and self.o.pruner != "none" and trial.should_prune():
            return len(rows), True
        return len(rows), False

    def failed(self, study, trial):
        """After each trial: three failed trials in a row (a script that fails in every trial) stop the study, as a
        signal does."""
        import optuna

        if self.stopping:
            study.stop()
            return
        if trial.state != optuna.trial.TrialState.FAIL:  # complete, or pruned (diverged runs too)
            with self.lock:
                self.failed_in_a_row = 0
            return
        with self.lock:
            self.failed_in_a_row += 1
            self.last_failure = trial.user_attrs.get("error") or trial.system_attrs.get("fail_reason")
            if self.failed_in_a_row >= 3:
                study.stop()


def report(study, tuner, out):
    """trials.csv, trials.md, best.txt and the plots, from every trial of the study."""
    import optuna

    out.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    names = sorted({name for t in trials for name in t.params})
    rows = []
    for t in trials:
        duration = (
            (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and t.datetime_start else None
        )
        value = t.value if t.state == optuna.trial.TrialState.COMPLETE else None  # (a pruned trial's is its last row's)
        retries = t.system_attrs.get("failed_trial", t.user_attrs.get("failed_trial"))  # (a dead worker's, a stopped one)
        row = dict(number=t.number, state=t.state.name, value=value, retries=retries)
        row.update({n: t.params.get(n) for n in names}, duration_s=None if duration is None else round(duration, 1))
        row.update(worker=t.user_attrs.get("worker"), error=t.user_attrs.get("error"))
        rows.append(row)
    columns = ["number", "state", "value", *names, "retries", "duration_s", "worker", "error"]
    with open(out / "trials.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    done = [r for r in rows if r["state"] == "COMPLETE"]
    ranked = sorted(done, key=lambda r: r["value"], reverse=study.direction == optuna.study.StudyDirection.MAXIMIZE)
    ranked += [r for r in rows if r["state"] != "COMPLETE"]
    shown = ["number", "state", "value", *names, "retries", "duration_s"]
    lines = [f"Study `{study.study_name}`: {len(done)} of {len(rows)} trials complete, best first.", ""]
    lines += ["| " + " | ".join(shown) + " |", "| " + " | ".join("---" for _ in shown) + " |"]
    for r in ranked:
        cells = [r[c] for c in shown]
        lines.append(
            "| " + " | ".join("" if c is None else f"{c:.4g}" if isinstance(c, float) else str(c) for c in cells) + " |"
        )
    (out / "trials.md").write_text("\n".join(lines) + "\n")
    if done:
        best = study.best_trial
        command = tuner.command(best.user_attrs.get("flags", best.params))
        with contextlib.suppress(ValueError):  # the script's path from the project's root, as the README runs it
            command[1] = str(pathlib.Path(command[1]).relative_to(ROOT))
        command[0] = "python"
        (out / "best.txt").write_text(
            f"# trial {best.number}: score {best.value:.6g} (study {study.study_name})\n{shlex.join(command)}\n"
        )
        print(f"tune.py: best, trial {best.number} (score {best.value:.6g}): {shlex.join(command)}")
    plot(study, out, len(done))


def plot(study, out, complete):
    """optimization_history.png, and param_importances.png where two complete trials or more vary a parameter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as optuna_plots

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    if complete:
        optuna_plots.plot_optimization_history(study)
        plt.gcf().set_size_inches(8, 5)
        plt.tight_layout()
        plt.savefig(out / "optimization_history.png", dpi=100)
        plt.close("all")
    if complete >= 2 and any(t.params for t in study.get_trials(deepcopy=False)):
        try:
            optuna_plots.plot_param_importances(study)
            plt.gcf().set_size_inches(8, 5)
            plt.tight_layout()
            plt.savefig(out / "param_importances.png", dpi=100)
        except (RuntimeError, ValueError) as e:  # one parameter, or one that never varied
            print(f"tune.py: no param_importances.png ({e})", file=sys.stderr)
        plt.close("all")


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="tools/tune.py", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("script", help="an algorithm (dqn, sac_continuous_action, ...) or a script's path")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=SPEC", help="a flag to tune (repeat it)")
    parser.add_argument("--space", help="a Python file defining params(trial) -> {flag: value}, instead of --param")
    parser.add_argument("--trials", type=int, default=10, help="trials this worker runs (default 10)")
    parser.add_argument("--seeds", default="1", help="the seeds of each trial's runs (default 1)")
    parser.add_argument("--env-ids", default="", help="environments (default: the script's), each run per seed")
    parser.add_argument("--target-scores", default="", help="ENV=LOW:HIGH,...: each env's return normalized")
    parser.add_argument("--storage", help="sqlite:///FILE, postgresql+psycopg://..., journal:PATH (default <out>/study.db)")
    parser.add_argument("--study-name", help="the study (default tune-<script>); an existing one is resumed")
    parser.add_argument("--direction", choices=["maximize", "minimize"], default="maximize")
    parser.add_argument("--sampler", choices=["tpe", "random"], default="tpe")
    parser.add_argument("--sampler-seed", type=int, help="the sampler's seed (repeatable studies)")
    parser.add_argument("--pruner", choices=["median", "hyperband", "none"], default="median")
    parser.add_argument("--prune-after", type=int, help="env steps of a trial's first run before any pruning (default: half)")
    parser.add_argument("--jobs", type=int, default=1, help="trials at once in this worker (default 1)")
    parser.add_argument("--out", help="where runs and reports go (default bench/tune-<script>)")
    parser.add_argument("--heartbeat-s", type=int, default=60, help="RDB storage: seconds between a trial's heartbeats")
    parser.add_argument("--grace-s", type=int, default=180, help="RDB storage: a trial silent this long is dead")
    parser.add_argument("--retries", type=int, default=2, help="times a dead worker's trial is queued again (default 2)")
    parser.add_argument("--poll-s", type=float, default=1.0, help="seconds between two reads of a run's metrics.csv")
    parser.add_argument("--no-report", action="store_true", help="run trials only (a Slurm worker)")
    parser.add_argument("--report-only", action="store_true", help="run nothing: write the report from the storage")
    argv = sys.argv[1:] if argv is None else list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)  # after --: flags for every run (budgets, ...)
    o = parser.parse_args(argv[:cut])
    o.extra = argv[cut + 1 :]
    path = script_path(o.script)
    flags = script_flags(path)
    if o.param and o.space:
        fail("--param and --space: give one of them")
    if not (o.param or o.space or o.report_only):
        fail("no search space: give --param NAME=SPEC (one or more) or --space FILE")
    for name, low in [("--trials", o.trials), ("--jobs", o.jobs), ("--heartbeat-s", o.heartbeat_s), ("--grace-s", o.grace_s)]:
        if low < 1:
            fail(f"{name}: must be 1 or more, got {low}")
    if not o.poll_s > 0:
        fail(f"--poll-s: must be above 0, got {o.poll_s}")
    for name, value in [("--retries", o.retries), ("--prune-after", o.prune_after)]:
        if value is not None and value < 0:
            fail(f"{name}: must be 0 or more, got {value}")
    # the tuner's own flags after --: the runs would take them, not the tuner's values
    own = [f for f in o.extra if f.split("=")[0] in ("--seed", "--env-id", "--output-dir", "--resume")]
    if own:
        fail(f"-- {own[0].split('=')[0]}: set by the tuner for each run (--seeds, --env-ids, --out), not after --")
    budget(flags, o.extra)  # (a budget that is no integer: said here, before the storage is opened)
    if o.grace_s <= o.heartbeat_s:
        fail(f"--grace-s: must be above --heartbeat-s ({o.heartbeat_s}), got {o.grace_s}")
    try:
        o.seeds = [int(s) for s in o.seeds.split(",") if s.strip()]
    except ValueError:
        fail(f"--seeds {o.seeds}: a comma-separated list of integers")
    if not o.seeds:
        fail("--seeds: at least one seed")
    o.env_ids = [e.strip() for e in o.env_ids.split(",") if e.strip()] or [""]
    o.targets = parse_targets(o.target_scores, [e for e in o.env_ids if e])
    fixed = [parse_param(p, flags) for p in o.param]
    space = load_space(o.space) if o.space else None
    o.script = str(path)
    o.out = o.out or str(ROOT / "bench" / f"tune-{path.stem}")
    o.study_name = o.study_name or f"tune-{path.stem}"
    if o.storage is None:
        pathlib.Path(o.out).mkdir(parents=True, exist_ok=True)
        o.storage = f"sqlite:///{pathlib.Path(o.out).resolve() / 'study.db'}"

    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # (a failed trial: said here in one line)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # (heartbeats, the retry callback)
    storage = make_storage(o.storage, o.heartbeat_s, o.grace_s, o.retries)
    tuner = Tuner(o, space, fixed)
    if o.report_only:
        try:
            study = optuna.load_study(study_name=o.study_name, storage=storage)
        except KeyError:
            fail(f"--study-name {o.study_name}: no such study in {o.storage}")
        report(study, tuner, pathlib.Path(o.out))
        return 0
    sampler = (
        optuna.samplers.TPESampler(seed=o.sampler_seed)
        if o.sampler == "tpe"
        else optuna.samplers.RandomSampler(seed=o.sampler_seed)
    )
    # no pruning before --prune-after env steps of a trial's first run (half of it by default: what a run shows early,
    # while it acts at random or has just begun to learn, says little of its flags), nor before 3 trials are complete
    warmup = tuner.budget // 2 if o.prune_after is None else o.prune_after
    runs = len(o.seeds) * len(o.env_ids)
    if o.pruner == "median":
        pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=warmup)
    elif o.pruner == "hyperband":
        pruner = optuna.pruners.HyperbandPruner(min_resource=max(warmup, 1), max_resource=tuner.budget * runs)
    else:
        pruner = optuna.pruners.NopPruner()
    study = optuna.create_study(
        study_name=o.study_name, storage=storage, sampler=sampler, pruner=pruner, direction=o.direction, load_if_exists=True
    )
    study.set_user_attr("script", path.stem)

    def objective(trial):
        try:
            return tuner.objective(trial)
        except Stopped as e:  # failed, and queued again with its flags: the same command goes on with it
            trial.set_user_attr("error", f"{e}, queued again")
            study.enqueue_trial(trial.params, user_attrs={"failed_trial": trial.number})
            tuner.stopped.append(trial.number)
            raise
        except (RuntimeError, ValueError) as e:
            trial.set_user_attr("error", str(e)[-500:])
            print(f"tune.py: trial {trial.number} failed: {e}", file=sys.stderr)
            raise

    def ask_to_stop(signum, frame):  # Ctrl-C, SIGTERM: each running trial's run stops (checkpointed), no new trial
        tuner.stopping = signum

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, ask_to_stop)
    study.optimize(
        objective,
        n_trials=o.trials,
        n_jobs=o.jobs,
        callbacks=[tuner.failed],
        catch=(RuntimeError, ValueError, Stopped),
        gc_after_trial=False,
    )
    if not o.no_report:
        report(study, tuner, pathlib.Path(o.out))
    if tuner.stopping:
        name = signal.Signals(tuner.stopping).name
        queued = (
            f"trials {', '.join(map(str, sorted(tuner.stopped)))} failed and queued again"
            if tuner.stopped
            else "no trial running"
        )
        print(f"tune.py: stopped by {name} ({queued}); the same command goes on with the study", file=sys.stderr)
        return 130 if tuner.stopping == signal.SIGINT else 143
    if tuner.failed_in_a_row >= 3:
        fail(f"three trials in a row failed, the study stops here: {tuner.last_failure}", code=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
