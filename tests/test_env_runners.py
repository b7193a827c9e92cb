"""Ray env runners (--env-runners), scripts/ppo_continuous_action_ray_torchcompile.py: each runner steps its share of the
envs through a whole rollout and meets the learner at the rollout's end. Real Ray, real processes: a local Ray that
the script starts (on 127.0.0.1 only), and a real two-node cluster on loopback (tests/helpers/ray_cluster.py, Ray's
own multi-node test utility). Every process a test starts is stopped by its process id. This test process never
imports ray."""

import csv
import ipaddress
import json
import os
import pathlib
import select
import signal
import subprocess
import sys
import time

import pytest
from helpers.background import Background, command, descendants, kill_if_still, wait_until
from helpers.scripts import ROOT, importable, load_script, run_script

pytestmark = pytest.mark.skipif(not (importable("ray")), reason="the env runners need ray (requirements-ray.txt)")

CONT = "ppo_continuous_action_ray_torchcompile"
CORE = "ppo_continuous_action_torchcompile"  # the same PPO with its envs in the learner's process
# A task PPO learns in a few thousand steps (tests/helpers/envs.py); runners import its module in their processes.
TARGET = ["--env-id", "helpers.envs:Target-v0", "--num-envs", 4, "--num-steps", 128, "--num-minibatches", 4]
SMALL = [*TARGET, "--update-epochs", 2, "--total-timesteps", 2048]


@pytest.fixture(autouse=True)
def helpers_importable(monkeypatch):
    """The runs (and their runners) import `helpers.envs` for the Target env."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")


def metrics_rows(run):
    """A running run's metrics.csv rows so far."""
    (path,) = run.out.glob("*/metrics.csv")
    with open(path) as f:
        return list(csv.DictReader(f))


def runner_pids(pid):
    """The env runners' processes under a run's local Ray."""
    return sorted(p for p in descendants(pid) if command(p).startswith("ray::EnvRunner"))


def listening_addresses(pids):
    """The local addresses on which these processes listen (TCP, IPv4 and IPv6), read from /proc."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    addresses = []
    for table in ["/proc/net/tcp", "/proc/net/tcp6"]:
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                words = bytes.fromhex(fields[1].split(":")[0])  # 32-bit words in the host's (little-endian) order
                raw = b"".join(words[i : i + 4][::-1] for i in range(0, len(words), 4))
                address = ipaddress.ip_address(raw)
                addresses.append(getattr(address, "ipv4_mapped", None) or address)  # ::ffff:127.0.0.1 is 127.0.0.1
    return addresses


@pytest.fixture
def cluster():
    """A real two-node Ray cluster on loopback (2 CPUs each): (address, head node id, worker node id, process)."""
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "helpers" / "ray_cluster.py"), "--cpus", "2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        ready = select.select([proc.stdout], [], [], 300)[0]  # a guard against a hang, not a speed bound
        assert ready, "the cluster did not start in 300 s"
        address, head, worker = proc.stdout.readline().split()
        yield address, head, worker, proc
    finally:
        started = {pid: command(pid) for pid in descendants(proc.pid)}
        proc.stdin.close()  # the helper shuts the cluster down
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        kill_if_still(started)


def cluster_env(monkeypatch):
    """The script joins the loopback cluster: its driver stays on 127.0.0.1 as the nodes do."""
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def test_two_runners_on_a_local_ray(tmp_path):
    proc, summary = run_script(CONT, *SMALL, "--env-runners", 2, tmp_path=tmp_path)
    assert summary["status"] == "finished"
    assert summary["global_step"] == summary["args"]["total_timesteps"]
    assert summary["args"]["env_runners"] == 2 and summary["runner_restarts"] == []
    assert len(summary["runner_nodes"]) == 2 and len(summary["nodes_used"]) == 1  # one machine: one node
    assert summary["episodes"] > 0
    assert "warning: --env-runners" not in proc.stderr


def test_runners_fill_the_same_rows_in_the_same_env_order(tmp_path):
    """The Target env's observations do not depend on the actions: with the same seed, the core file (its envs in its
    own process) and this file with 2 runners must give exactly the same observations, valid rows, dones and
    terminations in every env's column, and the same statistics of env 0 (model.pt's), which catches a wrong env
    order, seed or runner-0 choice."""
    helper = ROOT / "tests" / "helpers" / "runner_rows.py"
    proc = subprocess.run([sys.executable, str(helper), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["status"] == ["finished", "finished"]
    same = ["obs", "valids", "dones", "terminations", "obs_rms.mean", "obs_rms.var", "obs_rms.count"]
    assert all(result["equal"][k] for k in same), result["equal"]
    assert not result["equal"]["actions"]  # the runners draw their own actions: the comparison can tell rows apart


def final_return(summary):
    return summary["episodic_return"]


def test_runners_learn_as_the_in_process_run(tmp_path):
    """Same budget and seeds: with 2 runners PPO learns the Target task as the core file's in-process run does (a
    random policy scores about -64, these runs end near -16; seeds differ by about 2)."""
    finals = {0: [], 2: []}
    for seed in [1, 2]:
        for runners in finals:
            flags = [*TARGET, "--update-epochs", 4, "--total-timesteps", 8192, "--seed", seed]
            flags += ["--env-runners", runners] if runners else []
            (tmp_path / f"{seed}-{runners}").mkdir()
            _, summary = run_script(CONT if runners else CORE, *flags, tmp_path=tmp_path / f"{seed}-{runners}")
            finals[runners].append(final_return(summary))
    assert all(r > -25 for r in finals[0] + finals[2]), finals  # both learned
    in_process, with_runners = sum(finals[0]) / 2, sum(finals[2]) / 2
    assert abs(in_process - with_runners) < 5, finals


def test_a_killed_runner_is_restarted_and_the_local_ray_listens_on_loopback_only(tmp_path):
    run = Background(CONT, *TARGET, "--update-epochs", 1, "--total-timesteps", 60_000, "--env-runners", 2, tmp_path=tmp_path)
    try:
        run.wait_for_rows(2)
        ray_processes = descendants(run.proc.pid) | {run.proc.pid}
        addresses = listening_addresses(ray_processes)
        assert len(addresses) >= 3, addresses  # the GCS, the raylet, the runners: there is something to check
        assert all(address.is_loopback for address in addresses), addresses
        victims = runner_pids(run.proc.pid)
        assert len(victims) == 2, victims
        os.kill(victims[1], signal.SIGKILL)  # as the OOM killer does
        summary = run.finish()
        err = "".join(run.stderr)
    finally:
        run.stop()
    assert summary["status"] == "finished" and summary["global_step"] == 60_000 // 512 * 512
    assert len(summary["runner_restarts"]) == 1, summary["runner_restarts"]  # the one killed (which index: Ray's choice)
    restarted = summary["runner_restarts"][0]["runner"]
    warnings = [line for line in err.splitlines() if line.startswith("warning: --env-runners")]
    assert warnings == [f"warning: --env-runners: runner {restarted} was restarted by Ray (its process or node was lost)"], err


def test_runners_spread_over_a_two_node_cluster(cluster, tmp_path, monkeypatch):
    address, head, worker, _ = cluster
    cluster_env(monkeypatch)
    flags = [*SMALL, "--env-runners", 2, "--ray-address", address]
    _, summary = run_script(CONT, *flags, tmp_path=tmp_path)
    assert summary["status"] == "finished" and summary["runner_restarts"] == []
    assert sorted(summary["runner_nodes"]) == sorted([head, worker])  # SPREAD: one runner on each node
    assert sorted(summary["nodes_used"]) == sorted([head, worker])


def test_a_runner_larger_than_any_node_is_refused(cluster, tmp_path, monkeypatch):
    """4 CPUs free in the cluster, but 2 on each node: a runner of 3 CPUs could never start (Ray would wait forever)."""
    address = cluster[0]
    cluster_env(monkeypatch)
    flags = [*SMALL, "--env-runners", 1, "--env-runner-cpus", 3, "--ray-address", address]
    proc, _ = run_script(CONT, *flags, tmp_path=tmp_path, expect_ok=False, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "(its nodes hold 0 such runners)" in errors[0], errors
    assert not (tmp_path / "runs").exists()


def test_a_removed_node_s_runners_come_back_on_the_other_node(cluster, tmp_path, monkeypatch):
    address, head, worker, helper = cluster
    cluster_env(monkeypatch)
    flags = [*TARGET, "--update-epochs", 1, "--total-timesteps", 60_000, "--env-runners", 2, "--ray-address", address]
    run = Background(CONT, *flags, tmp_path=tmp_path)
    try:
        run.wait_for_rows(2)
        helper.stdin.write("remove\n")  # the worker node goes, with its runner
        helper.stdin.flush()
        assert helper.stdout.readline().split() == ["removed", worker]
        summary = run.finish()
        err = "".join(run.stderr)
    finally:
        run.stop()
    assert summary["status"] == "finished" and summary["global_step"] == 60_000 // 512 * 512
    assert summary["runner_nodes"] == [head, head]  # both on the node that is left
    assert sorted(summary["nodes_used"]) == sorted([head, worker])
    assert [(r["node"], r["was_on"]) for r in summary["runner_restarts"]] == [(head, worker)], summary["runner_restarts"]
    assert err.count("warning: --env-runners: runner") == 1, err[-3000:]


def test_a_stop_does_not_wait_for_a_stuck_runner(tmp_path):
    """A runner whose rollout never comes back (SIGSTOP: a hung simulator; Ray sees nothing wrong): SIGTERM to the
    learner ends the run at most 10 s later, terminated, with the iterations it finished, instead of waiting on."""
    flags = [*TARGET, "--update-epochs", 1, "--total-timesteps", 1_000_000, "--env-runners", 2]
    with Background(CONT, *flags, tmp_path=tmp_path) as run:
        run.wait_for_rows(2)
        stuck = runner_pids(run.proc.pid)[1]
        os.kill(stuck, signal.SIGSTOP)
        time.sleep(3)  # the learner waits for it now (its iteration in flight may have ended meanwhile)
        rows = metrics_rows(run)
        run.signal(signal.SIGTERM)
        summary = run.finish(limit=60, status=143)  # (Ray would wait for the runner forever)
    assert summary["status"] == "terminated" and summary["global_step"] == int(rows[-1]["global_step"])
    # no error of the run's own; Ray's core worker may log one line of its own as it shuts down with the stopped
    # runner's rollout in flight ("[... E ...] task_manager.cc: Failed to push error to driver for task ...", about 1
    # run in 8 here, by timing), which says nothing about the run
    own = [line for line in "".join(run.stderr).splitlines() if line.startswith("error") or "Traceback" in line]
    assert rows == metrics_rows(run) and not own, run.output()


# --- bad input: one line naming the flag, no run folder, no hang -------------------------------------------------

BAD = [
    pytest.param(dict(env_runners=3, num_envs=4), "--env-runners", "must divide --num-envs (4)", id="not-dividing"),
    pytest.param(dict(env_runners=-1), "--env-runners", "in [1, inf)", id="negative"),
    pytest.param(dict(env_runners=0), "--env-runners", "in [1, inf)", id="none"),
    pytest.param(dict(env_runners=2, num_envs=2, async_envs=True), "--async-envs", "not in this file", id="async"),
    pytest.param(dict(env_runner_cpus=0.0, env_runners=1), "--env-runner-cpus", "in [0.0001, inf)", id="zero-cpus"),
    pytest.param(
        dict(env_runners=1, ray_address="127.0.0.1:9"), "--ray-address", "cannot be reached", id="address-unreachable"
    ),
    pytest.param(dict(env_runners=1, ray_address="no-port"), "--ray-address", "cannot be reached", id="address-no-port"),
]


@pytest.mark.parametrize("fields,flag,says", BAD)
def test_bad_runner_flags(fields, flag, says):
    module = load_script(CONT)
    args = module.Args(**{"env_id": "Pendulum-v1", **fields})
    with pytest.raises(SystemExit) as stop:
        module.check_args(args)
    line = str(stop.value.code)
    assert line.startswith(f"error: {flag}: ") and says in line and "\n" not in line, line


def test_without_ray_installed_the_install_command_is_named(monkeypatch):
    module = load_script(CONT)
    real = module.importlib.util.find_spec
    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    args = module.Args(env_id="Pendulum-v1", env_runners=1)
    with pytest.raises(SystemExit) as stop:
        module.check_args(args)
    assert str(stop.value.code).startswith("error: --env-runners: needs ray: pip install "), stop.value.code


def test_more_runners_than_the_cluster_has_cpus_for(tmp_path):
    n = os.cpu_count() + 1  # one CPU more than the local Ray has (it takes the machine's)
    flags = [*TARGET, "--num-envs", n, "--total-timesteps", 128 * n, "--env-runners", n, "--env-runner-cpus", 1]
    proc, _ = run_script(CONT, *flags, tmp_path=tmp_path, expect_ok=False, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors[0].startswith(f"error: --env-runners: {n} runners x --env-runner-cpus 1.0 need {n} CPUs"), errors
    assert not (tmp_path / "runs").exists()  # said before the run folder


def test_ray_address_auto_without_a_cluster(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path / "ray"))  # no cluster file of another run to find
    proc, _ = run_script(CONT, *SMALL, "--env-runners", 1, "--ray-address", "auto", tmp_path=tmp_path, expect_ok=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert errors[0].startswith("error: --ray-address: auto: "), errors
    assert not (tmp_path / "runs").exists()


def test_sigterm_to_all_the_run_s_processes_ends_it_checkpointed_and_leaves_no_ray_process(tmp_path):
    """As Slurm does: its warning sent without B: (SIGUSR1), then its time limit (SIGTERM), each to every process of
    the run (the script, its local Ray's GCS, raylet and agents, the runners). The local Ray started with both blocked,
    so the learner alone acts on them: the run says it was terminated, its checkpoint holds the step it stopped at and
    both runners' envs, its model is kept, and the learner's shutdown ends Ray's processes."""
    import torch

    flags = [*TARGET, "--update-epochs", 1, "--total-timesteps", 1_000_000, "--env-runners", 2, "--save-model"]
    with Background(CONT, *flags, tmp_path=tmp_path) as run:
        run.wait_for_rows(2)
        started = {pid: command(pid) for pid in descendants(run.proc.pid)}
        for signum in (signal.SIGUSR1, signal.SIGTERM):
            run.signal(signum)
            for pid, cmdline in started.items():
                if command(pid) == cmdline:  # (still that process)
                    os.kill(pid, signum)
        summary = run.finish(limit=120, status=143)
        assert summary["status"] == "terminated" and 0 < summary["global_step"] < 1_000_000
        run_dir = pathlib.Path(summary["_run_dir"])
        assert (run_dir / "model.pt").is_file()
        with torch.serialization.safe_globals(load_script(CONT).NUMPY):
            saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
        assert saved["log"]["step"] == summary["global_step"] and len(saved["runners"]) == 2

        def ray_gone():  # Ray's processes end after the driver's shutdown
            return not [pid for pid, cmdline in started.items() if command(pid) == cmdline]

        wait_until(ray_gone, 60, "no Ray process of the run left", run.output)


@pytest.mark.parametrize("due", [True, False])
def test_the_checkpoint_asks_the_runners_for_their_state_when_it_saves(due, tmp_path):
    """The runners' state is asked for by the save itself, not decided beforehand: a signal that arrives between the
    loop's step and the save (while a row is written) makes the checkpoint due, and it still holds the runners' envs."""
    import torch

    module = load_script(CONT)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    try:
        run = module.Run(module.Args(env_id="Pendulum-v1", checkpoint_interval=10**9, cuda=False))
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    run.run_dir, asked = tmp_path, []
    run.stopping = "terminated" if due else None  # (a signal's handler sets it)
    stop = run.checkpoint(512, {}, None, runners=lambda: asked.append(1) or ["runner 0", "runner 1"], iteration=1)
    assert stop == due and asked == ([1] if due else [])
    if due:
        with torch.serialization.safe_globals(module.NUMPY):
            saved = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
        assert saved["runners"] == ["runner 0", "runner 1"] and saved["log"]["step"] == 512


def test_fractions_of_a_cpu_count_as_ray_counts_them(monkeypatch):
    """10 runners x 0.2 CPU fit a Ray of 2 CPUs (in floats they would need 2.0000000000000004), 3 x 0.7 do not."""
    import ray

    module = load_script(CONT)
    ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False, num_cpus=2, logging_level="ERROR")
    try:
        monkeypatch.setattr(ray, "init", lambda **_: None)  # the cluster is joined already
        args = module.Args(env_id="Pendulum-v1", num_envs=10, env_runners=10, env_runner_cpus=0.2)
        module.Runners(args)  # no exit
        args = module.Args(env_id="Pendulum-v1", num_envs=3, env_runners=3, env_runner_cpus=0.7)
        with pytest.raises(SystemExit) as stop:
            module.Runners(args)
        said = "error: --env-runners: 3 runners x --env-runner-cpus 0.7 need 2.1 CPUs, the Ray cluster has 2 free"
        assert str(stop.value.code).startswith(said), stop.value.code
    finally:
        ray.shutdown()


def test_another_cluster_or_share_of_cpus_may_resume_the_run():
    """--ray-address and --env-runner-cpus change where the runners run, not what they compute (a Slurm requeue lands
    on another node); --env-runners would split the envs otherwise and is refused."""
    module = load_script(CONT)
    assert {"ray_address", "env_runner_cpus"} <= set(module.RESUMABLE) and "env_runners" not in module.RESUMABLE
