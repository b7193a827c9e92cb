"""Run under torchrun by tests/test_torchrun.py: a fast PPO script's own main(), unchanged, with two watches.
- Every torch.distributed.all_reduce inside an update is recorded: what this rank put in (its own gradients, divided
  by the world size, and approx_kl), what came back (the average over the ranks), and the gradients this rank computed
  alone, as they stood when the all_reduce was called.
- After every update the agent's parameters are recorded.
Each rank saves what it saw to <out>/probe.<rank>.pt.   Usage: torchrun ... dp_probe.py SCRIPT OUT -- FLAGS"""

import importlib.util
import os
import pathlib
import sys

import torch
import torch.distributed as dist
import tyro

script, out, flags = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[4:]
spec = importlib.util.spec_from_file_location(script.stem, script)
module = importlib.util.module_from_spec(spec)
sys.modules[script.stem] = module
spec.loader.exec_module(module)
seen = {"reduced": [], "params": [], "raw": []}
all_reduce, make_ppo = dist.all_reduce, module.make_ppo
agents, updating = [], []


def watched_all_reduce(tensor, *args, **kwargs):
    if not updating:  # (the loop's own all_reduce of the stop flag, once per iteration)
        return all_reduce(tensor, *args, **kwargs)
    before = tensor.detach().clone()
    seen["raw"].append(torch.cat([p.grad.detach().flatten() for p in agents[0].parameters()]))
    result = all_reduce(tensor, *args, **kwargs)
    seen["reduced"].append((before, tensor.detach().clone()))
    return result


def watched_make_ppo(*args, **kwargs):
    ppo = make_ppo(*args, **kwargs)
    agent = args[1]  # make_ppo(args, agent, device)
    agents.append(agent)
    update = ppo.update

    def update_and_record(*a, **k):
        updating.append(1)
        result = update(*a, **k)
        updating.clear()
        seen["params"].append(torch.cat([p.detach().flatten() for p in agent.parameters()]).clone())
        return result

    ppo.update = update_and_record
    return ppo


dist.all_reduce, module.make_ppo = watched_all_reduce, watched_make_ppo
try:
    module.main(tyro.cli(module.Args, args=flags))
finally:
    torch.save(seen, out / f"probe.{os.environ.get('RANK', '0')}.pt")
