"""The rollout rows of the fast PPO continuous file and of its Ray variant with 2 env runners, for the test that they are
the same rows in the same env order: each script's own main() runs in this process, on the Target env, whose
observations do not depend on the actions. Prints, as JSON, which rows are equal.

    python tests/helpers/runner_rows.py OUTPUT_DIR
"""

import json
import os
import pathlib
import sys

TESTS = pathlib.Path(__file__).resolve().parents[1]
CORE, RAY = "ppo_continuous_action_torchcompile", "ppo_continuous_action_ray_torchcompile"
# the runners (Ray's worker processes) import the script by its module name and the Target env's module
os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent / "scripts"), str(TESTS), os.environ.get("PYTHONPATH", "")])
sys.path.insert(0, str(TESTS))

import torch  # noqa: E402
import tyro  # noqa: E402

from helpers.scripts import load_script  # noqa: E402


def main():
    core, ray = load_script(CORE), load_script(RAY)
    flags = ["--env-id", "helpers.envs:Target-v0", "--num-envs", "4", "--num-steps", "64", "--num-minibatches", "4"]
    flags += ["--update-epochs", "1", "--total-timesteps", "512", "--no-cuda", "--output-dir", sys.argv[1]]
    states = [core.main(tyro.cli(core.Args, args=flags)), ray.main(tyro.cli(ray.Args, args=[*flags, "--env-runners", "2"]))]
    equal = {k: torch.equal(states[0]["storage"][k], states[1]["storage"][k]) for k in states[0]["storage"]}
    equal.update(
        {
            f"obs_rms.{k}": bool(
                torch.equal(torch.as_tensor(states[0]["obs_rms"][k]), torch.as_tensor(states[1]["obs_rms"][k]))
            )
            for k in ("mean", "var", "count")
        }
    )
    print(json.dumps(dict(equal=equal, status=[state["status"] for state in states])))


if __name__ == "__main__":
    main()
