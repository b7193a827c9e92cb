"""A script run in the background, as a user's terminal, Slurm or `kill` would meet it: started in a session of its
own (so that a signal can reach its whole process group), its output read as it comes (a full pipe would stall it),
watched until its metrics.csv holds some rows, then signalled, finished, or stopped. Every wait has a deadline and
fails with the run's own output; nothing is sent to a run that never got going."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

from helpers.scripts import SCRIPTS


def command(pid):
    """A process's command line, "" once it is gone."""
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def alive(pid):
    """Whether a process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def parents():
    """{pid: parent pid} of every process on the machine."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            found[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError):
            continue
    return found


def descendants(pid):
    """Every process below pid (children, their children, ...)."""
    table, found = parents(), {pid}
    grew = True
    while grew:
        more = {p for p, parent in table.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found - {pid}


def kill_if_still(processes):
    """SIGKILL each {pid: command line} that still runs that command (a pid reused since is left alone)."""
    for pid, cmdline in processes.items():
        if cmdline and command(pid) == cmdline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait_until(check, limit, what, output=lambda: ""):
    """Poll check() until it is true; past the deadline, fail saying what was awaited and with the output given."""
    end = time.time() + limit
    while not check():
        if time.time() > end:
            raise AssertionError(f"{what}: not after {limit} s\n{output()}")
        time.sleep(0.1)


class Background:
    """scripts/<script>.py run with flags and --output-dir <tmp_path>/runs, cwd tmp_path (extra env vars: env)."""

    def __init__(self, script, *flags, tmp_path, env=None, cmd=None):
        self.out = tmp_path / "runs"
        self.cmd = cmd or [sys.executable, str(SCRIPTS / f"{script}.py"), *map(str, flags), "--output-dir", str(self.out)]
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=tmp_path,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})),
        )
        self.stdout, self.stderr = [], []
        self.readers = [
            threading.Thread(target=self.drain, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self.drain, args=(self.proc.stderr, self.stderr), daemon=True),
        ]
        for reader in self.readers:
            reader.start()
        self.seen = {}  # every process seen under the run: pid -> its command line

    @staticmethod
    def drain(pipe, lines):
        for line in pipe:
            lines.append(line)

    def output(self):
        return (
            f"--- {' '.join(self.cmd)}\n--- stdout\n{''.join(self.stdout)[-2000:]}\n--- stderr\n{''.join(self.stderr)[-4000:]}"
        )

    def rows(self):
        """metrics.csv's rows so far (0 before the run folder exists)."""
        self.remember()
        files = sorted(self.out.glob("*/metrics.csv"))
        return len(files[0].read_text().splitlines()) - 1 if files else 0

    def wait_for_rows(self, n, limit=300):
        """Until metrics.csv holds n rows; a run that ends, or does not get there in time, fails with its output."""

        def there():
            assert self.proc.poll() is None, f"the run ended (exit {self.proc.returncode}) before {n} rows\n{self.output()}"
            return self.rows() >= n

        wait_until(there, limit, f"{n} metrics rows", self.output)

    def remember(self):
        self.seen.update({pid: command(pid) for pid in descendants(self.proc.pid)})

    def children(self):
        """The run's child processes now (the --async-envs workers)."""
        return [pid for pid, parent in parents().items() if parent == self.proc.pid]

    def signal(self, signum, group=False):
        """The signal to the run's process (as kill and timeout send it) or to its whole group (as a terminal's Ctrl-C
        and Slurm's time limit do)."""
        self.remember()
        if group:
            os.killpg(self.proc.pid, signum)
        else:
            self.proc.send_signal(signum)

    def wait(self, limit=300):
        """The exit status, once the run has ended and its output has been read."""
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the run did not end within {limit} s\n{self.output()}") from None
        for reader in self.readers:
            reader.join(timeout=30)
        return self.proc.returncode

    def summary(self):
        """summary.json, from the path the run printed last."""
        path = pathlib.Path("".join(self.stdout).strip().splitlines()[-1])
        assert path.name == "summary.json", self.output()
        return dict(json.loads(path.read_text()), _run_dir=str(path.parent))

    def finish(self, limit=600, status=0):
        """Until the run ends; its exit status must be `status`; returns its summary."""
        returncode = self.wait(limit)
        assert returncode == status, f"exit {returncode}, not {status}\n{self.output()}"
        return self.summary()

    def stop(self):
        """Whatever is left of the run, gone: the processes seen under it (Ray's leave the session), then the group."""
        self.remember()
        kill_if_still(self.seen)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group is gone already
            pass
        self.wait(60)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
