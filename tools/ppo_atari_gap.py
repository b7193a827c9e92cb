"""Where the fast PPO Atari loop spends its time, by taking one cost away at a time (the GPU check's part 2):

    python tools/ppo_atari_gap.py --cached-env -- --compile --cudagraphs --total-timesteps 20480
    python tools/ppo_atari_gap.py --tf32 -- --compile --cudagraphs --total-timesteps 20480

Runs scripts/ppo_atari_torchcompile.py, unchanged, with the flags after `--`, and prints its steps/s (its summary's
`sps`, after its --measure-burnin) on a line of its own. --cached-env: envpool's step returns one result recorded at
the start, so the emulator's time is gone and the rest stays (the action's copy to the host, the observation's to the
device, the policy, the updates): the ceiling of the loop's GPU and Python work on this machine. --tf32: float32
matrix products in TF32 (`torch.set_float32_matmul_precision("high")`), as LeanRL's file sets and ours do not
(cuDNN's convolutions use TF32 by default either way).
"""

import argparse
import json
import pathlib
import runpy
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ppo_atari_torchcompile.py"


def cache_env_steps(counts):
    """envpool.make gives envs whose step returns the result of their first step, every time."""
    import envpool

    make = envpool.make

    class Cached:
        def __init__(self, envs):
            self.envs, self.result = envs, None

        def step(self, action, env_id=None):
            counts["calls"] += 1
            if self.result is None:
                counts["real"] += 1
                self.result = self.envs.step(action)
            return self.result

        def __getattr__(self, name):
            return getattr(self.envs, name)

    envpool.make = lambda *args, **kwargs: Cached(make(*args, **kwargs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cached-env", action="store_true", help="envpool's step returns one recorded result")
    parser.add_argument("--tf32", action="store_true", help='torch.set_float32_matmul_precision("high")')
    parser.add_argument("flags", nargs="*", help="the script's flags, after --")
    ours = parser.parse_args()
    if ours.cached_env and any(flag.startswith("--eval") for flag in ours.flags):
        parser.error("--cached-env: no --eval-episodes or --eval-model (an episode of one recorded step never ends)")
    output_dir = pathlib.Path("runs-gap")
    if "--output-dir" in ours.flags:
        output_dir = pathlib.Path(ours.flags[ours.flags.index("--output-dir") + 1])
    else:
        ours.flags += ["--output-dir", str(output_dir)]
    counts = dict(calls=0, real=0)
    if ours.cached_env:
        cache_env_steps(counts)
    if ours.tf32:
        import torch

        torch.set_float32_matmul_precision("high")
    before = set(output_dir.glob("*/summary.json"))
    sys.argv, code = [str(SCRIPT), *ours.flags], 0
    try:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    except SystemExit as e:
        code = e.code
    written = set(output_dir.glob("*/summary.json")) - before
    if len(written) != 1:  # the script stopped before its run folder (its own error is above)
        sys.exit(code or 1)
    summary = json.loads(written.pop().read_text())
    label = " and ".join(name for name, on in (("a cached env step", ours.cached_env), ("TF32", ours.tf32)) if on)
    import torch

    print(f"float32 matrix products at the end: {torch.get_float32_matmul_precision()} precision")
    print(f"env steps: {counts['calls']} calls, {counts['real']} of them real" if ours.cached_env else "env steps: real")
    sps = "no steps/s (the burn-in took every iteration)" if summary["sps"] is None else f"{summary['sps']:.1f} steps/s"
    print(f"PPO Atari fast file with {label or 'nothing changed'}: {sps} ({summary['status']})")
    sys.exit(code)


if __name__ == "__main__":
    main()
