"""The network class a reader sees is the code that runs: edit the class (another hidden width, a forward of one's
own) and the fast file's updates and policy follow it, with nothing rebuilt from parameter names or positions."""

import numpy as np
import pytest
import torch
import torch.nn as nn
from helpers.scripts import load_script

OBS_DIM, ACTION_DIM, WIDTH = 3, 1, 48


def edited(cls, layers, calls):
    """A subclass of the script's critic with other layers and a forward that counts its calls."""

    class Edited(cls):
        def __init__(self, *dims):
            super().__init__(*dims)
            for name, layer in layers(*dims).items():
                setattr(self, name, layer)

        def forward(self, *inputs):
            calls.append(len(inputs[0]))
            return super().forward(*inputs)

    return Edited


def critic_layers(obs_dim, action_dim):  # SAC's and TD3's critics: fc1, fc2, fc3
    return dict(fc1=nn.Linear(obs_dim + action_dim, WIDTH), fc2=nn.Linear(WIDTH, WIDTH), fc3=nn.Linear(WIDTH, 1))


def dqn_layers(obs_dim, n_actions):
    return dict(network=nn.Sequential(nn.Linear(obs_dim, WIDTH), nn.ReLU(), nn.Linear(WIDTH, n_actions)))


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_sac_and_td3_updates_run_the_critic_class(algo, monkeypatch):
    script = {"sac": "sac_continuous_action_torchcompile", "td3": "td3_continuous_action_torchcompile"}[algo]
    module = load_script(script)
    name = "SoftQNetwork" if algo == "sac" else "QNetwork"
    calls = []
    monkeypatch.setattr(module, name, edited(getattr(module, name), critic_layers, calls))
    low, high = -np.ones(ACTION_DIM, np.float32), np.ones(ACTION_DIM, np.float32)
    make = module.make_sac if algo == "sac" else module.make_td3
    torch.manual_seed(0)
    agent = make(module.Args(), OBS_DIM, ACTION_DIM, low, high, torch.device("cpu"))
    assert agent.learned["qf1"].fc2.weight.shape == (WIDTH, WIDTH) and agent.learned["qf2_target"].fc2.weight.shape == (
        WIDTH,
        WIDTH,
    )
    before = {k: v.clone() for k, v in agent.learned["qf1"].state_dict().items()}
    batch = torch.randn(16, 2 * OBS_DIM + ACTION_DIM + 2)

    agent.update_critic(batch)
    assert len(calls) == 4, calls  # the two critics and their two targets, through the class's forward
    assert all(
        not torch.equal(before[k], v) for k, v in agent.learned["qf1"].state_dict().items()
    )  # the edited layers learned
    calls.clear()
    agent.update_actor(batch)
    assert len(calls) == (2 if algo == "sac" else 1), calls  # the actor's loss asks the critic class too
    assert agent.policy(torch.randn(2, OBS_DIM)).shape == (2, ACTION_DIM)


def test_dqn_update_and_policy_run_the_q_network_class(monkeypatch):
    module = load_script("dqn_torchcompile")
    calls = []
    monkeypatch.setattr(module, "QNetwork", edited(module.QNetwork, dqn_layers, calls))
    torch.manual_seed(0)
    agent = module.make_dqn(module.Args(batch_size=8), 4, 2, torch.device("cpu"))
    assert [m.out_features for m in agent.learned["q_network"].network if isinstance(m, nn.Linear)] == [WIDTH, 2]
    rows = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    agent.rb.add(rows, rows, np.zeros(16, np.int64), np.ones(16, np.float32), np.zeros(16, np.float32))
    before = agent.learned["q_network"].network[0].weight.clone()

    out = agent.update()
    assert calls == [8, 8], calls  # the target network and the online one, both through the class's forward
    assert np.isfinite(out["td_loss"].item()) and not torch.equal(before, agent.learned["q_network"].network[0].weight)
    assert agent.policy(torch.from_numpy(rows[:3])).shape == (3,) and calls[-1] == 3
