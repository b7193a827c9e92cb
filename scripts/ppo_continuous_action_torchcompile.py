# PPO for continuous actions, the fast variant of ppo_continuous_action.py: the same algorithm, defaults and learning,
# rewritten for speed. --compile (torch.compile) and --cudagraphs (tensordict's CudaGraphModule) are independent;
# with neither it is the lean eager version. Each speed trick is marked "Speed:" where it is used.
# As in the baseline: gymnasium 1.x autoresets in NEXT_STEP mode, so the step after a done only resets the
# env (reward 0, action ignored). That row is masked out of the losses, and a truncated episode bootstraps from
# its true final observation (see compute_gae); CleanRL's loop was written for the older same-step autoreset.
import gc
import math
import os
import random
import sys
import time
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from tensordict.nn import CudaGraphModule
from torch.utils._pytree import tree_map_only

# compile modes that capture CUDA graphs, and their stand-ins without CUDA
GRAPH_MODES = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be used when available (the CPU otherwise)"""
    track: bool = False  # Run:
    """if toggled, this experiment will be tracked with Weights and Biases (needs `wandb`)"""
    wandb_project_name: str = "cleanRL"  # Run:
    """the wandb's project name"""
    wandb_entity: str | None = None  # Run:
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (of the first env, in the run folder's videos/)"""
    save_model: bool = False  # Run:
    """whether to save the agent to `model.pt` in the run folder (at the end, also on Ctrl-C)"""
    eval_episodes: int = 0  # Run:
    """episodes of the deterministic policy to play after training, on freshly seeded envs (0: none)"""
    eval_model: str | None = None  # Run:
    """a saved `model.pt` to evaluate instead of training (--eval-episodes, 10 if not given)"""
    output_dir: str = "runs"
    """where the run's folder is made (named as in CleanRL: <env-id>__<exp-name>__<seed>__<unix time>)"""
    checkpoint_interval: int = 200_000  # Run:
    """env steps between two checkpoints (checkpoint.pt in the run folder; also on Ctrl-C, SIGTERM, SIGUSR1; 0: none)"""
    resume: str | None = None  # Run:
    """a run folder to go on from, at its checkpoint.pt: the same flags, --total-timesteps may grow"""
    measure_burnin: int = 1  # Run:
    """iterations (rollout + update) left out of the steps/s measurement; metrics.csv gets one row per iteration"""
    compile: bool = False
    """if toggled, the policy, GAE and the update are compiled with torch.compile"""
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    """torch.compile's mode (needs --compile); reduce-overhead and max-autotune capture CUDA graphs (not with --cudagraphs)"""
    cudagraphs: bool = False
    """if toggled, the policy and the update functions replay as CUDA graphs (tensordict's CudaGraphModule; needs CUDA)"""

    # Algorithm specific arguments
    env_id: str = "HalfCheetah-v4"
    """the id of the environment"""
    total_timesteps: int = 1000000
    """total timesteps of the experiments"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    async_envs: bool = False
    """if toggled, each env steps in its own process (gymnasium's AsyncVectorEnv, shared memory), not all in this one"""
    num_steps: int = 2048
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 32
    """the number of mini-batches"""
    update_epochs: int = 10
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold (checked once per epoch, as in CleanRL)"""


def make_env(env_id, idx, capture_video, video_dir, gamma):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, video_dir)
        else:
            env = gym.make(env_id)
        env = gym.wrappers.FlattenObservation(env)  # deal with dm_control's Dict observation space
        # before the normalizations: it records the true returns
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        clipped = gym.spaces.Box(-10.0, 10.0, env.observation_space.shape, np.float32)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10).astype(np.float32), clipped)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
        env = Snapshot(env)  # Run: outermost, so that checkpoints reach every layer
        return env

    return thunk


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, action_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, x):
        return self.critic(x)

    # Speed: the Normal distribution's closed forms instead of a torch.distributions object (its construction and
    # argument checks cost more than the math). Same formulas as Normal.sample, .log_prob and .entropy.
    def get_action(self, x):
        """The rollout's policy, a sampled action: only the actor runs per step; log-probs and values come later, batched."""
        action_mean = self.actor_mean(x)
        return action_mean + self.actor_logstd.exp() * torch.randn_like(action_mean)

    def evaluate(self, x, action):
        """(log-prob of action, entropy, value) for a batch of observations."""
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        var = torch.exp(2 * action_logstd)
        logprob = -((action - action_mean) ** 2) / (2 * var) - action_logstd - math.log(math.sqrt(2 * math.pi))
        entropy = 0.5 + 0.5 * math.log(2 * math.pi) + action_logstd
        return logprob.sum(1), entropy.sum(1), self.critic(x).view(-1)


def compute_gae(rewards, values, next_value, terminations, dones, valids, gamma, gae_lambda):
    """GAE over a NEXT_STEP rollout; all inputs are (num_steps, num_envs) but next_value, V(obs after the last step).

    Row t is the transition obs[t] -> obs[t+1]. When it ends an episode (dones[t]), obs[t+1] is the true final
    observation, so a truncation bootstraps from V(obs[t+1]) and only a termination stops the bootstrap. Row t+1 is
    then the reset step (valids[t+1] = 0): not a transition, so it gets no advantage and the chain is cut at dones[t].
    """
    # Speed: A[t] = delta[t] + coef[t] * A[t+1] solved by a parallel (Hillis-Steele) scan: log2(num_steps) whole-rollout
    # steps, not num_steps tiny ones: a short fixed graph to compile and capture, O(num_steps) memory (PPO Atari's
    # 128 steps take one masked matrix contraction instead; at 2048 steps its matrix would be 2048 x 2048 per env)
    next_values = torch.cat([values[1:], next_value.reshape(1, -1)], 0)
    adv = (rewards + gamma * next_values * (1.0 - terminations) - values) * valids  # the deltas
    coef = (gamma * gae_lambda) * (1.0 - dones) * valids
    shift = 1
    # here A[t] = adv[t] + coef[t] * A[t+shift], with A = 0 past the rollout's end
    while shift < adv.shape[0]:
        adv = torch.cat([adv[:-shift] + coef[:-shift] * adv[shift:], adv[-shift:]])
        coef = torch.cat([coef[:-shift] * coef[shift:], coef[-shift:]])
        shift *= 2
    return adv, adv + values


def compiled(fn, mode: str, **kwargs):
    """torch.compile in `mode` (--compile-mode); in GRAPH_MODES, whose replays overwrite their outputs, clones of them."""
    fn = torch.compile(fn, mode=mode, **kwargs)
    if mode not in GRAPH_MODES:
        return fn

    def call(*inputs, **named_inputs):
        torch.compiler.cudagraph_mark_step_begin()
        return tree_map_only(torch.Tensor, torch.clone, fn(*inputs, **named_inputs))

    return call


def graphed(fn, compile: bool):
    """fn replayed as a CUDA graph (tensordict's CudaGraphModule), made once; its warm-up and capture calls run with the
    garbage collector collected, then frozen. Since torch 2.9 a capture collects nothing first, and a collection that
    frees an older graph while this one is captured invalidates the capture (tensordict #1804)."""
    warmup = 3 if compile else 2  # a compiled function wants one more eager call before capture
    graph = CudaGraphModule(fn, warmup=warmup)
    calls = 0

    def call(*inputs, **named_inputs):
        nonlocal calls
        if calls == warmup:  # captured: a replay
            return graph(*inputs, **named_inputs)
        calls += 1
        gc.collect()
        # what lives now, older graphs included, is out of the collector's reach until the call returns
        gc.freeze()
        try:
            return graph(*inputs, **named_inputs)
        finally:
            gc.unfreeze()

    return call


def speed_flags(args: Args):
    """The speed flags as this machine can run them, checked before any work: what cannot go together is refused, and
    what needs CUDA falls back without it, one line each (the flags changed here are the ones the run goes on with)."""
    cuda = args.cuda and torch.cuda.is_available()
    if args.compile_mode != "default" and not args.compile:
        sys.exit(f"error: --compile-mode {args.compile_mode}: needs --compile")
    if args.compile_mode in GRAPH_MODES and args.cudagraphs:
        sys.exit(f"error: --compile-mode {args.compile_mode}: has its own CUDA graphs, not with --cudagraphs")
    if args.cudagraphs and not cuda:
        print("warning: --cudagraphs: needs CUDA, running without CUDA graphs", file=sys.stderr)
        args.cudagraphs = False
    if args.compile_mode in GRAPH_MODES and not cuda:
        print(f"warning: --compile-mode {args.compile_mode}: needs CUDA, running without CUDA graphs", file=sys.stderr)
        args.compile_mode = GRAPH_MODES[args.compile_mode]


def adam_settings(compile: bool, cudagraphs: bool, device: torch.device) -> dict:
    # Speed: Adam plain under --compile (inductor fuses it), capturable under CUDA graphs, fused in eager
    if compile:
        return {}
    if cudagraphs and device.type == "cuda":
        # CudaGraphModule's warm-up calls run the step uncaptured on purpose: torch's warning about it is not for the user
        warnings.filterwarnings("ignore", message="This instance was constructed with capturable=True")
        return dict(capturable=True, foreach=True)
    return dict(fused=True)


def make_ppo(args: Args, agent, device):
    """The optimizer and the three hot functions: policy (one rollout step), gae (after the rollout), update (one
    minibatch), compiled and/or graph-captured as asked."""
    # Speed: the lr, a 0-d tensor changed in place, never recompiles or recaptures
    lr = torch.tensor(args.learning_rate, device=device)
    optimizer = optim.Adam(agent.parameters(), lr=lr, eps=1e-5, **adam_settings(args.compile, args.cudagraphs, device))

    def policy(obs):
        # the trained agent itself (the latest weights) without autograd, to compile and capture alone
        with torch.no_grad():
            return agent.get_action(obs)

    def gae(next_obs, obs, actions, rewards, terminations, dones, valids):
        # Speed: the rollout's log-probs and values in one batched forward (the parameters did not change)
        with torch.no_grad():
            logprobs, _, values = agent.evaluate(obs.flatten(0, 1), actions.flatten(0, 1))
            # bootstrap value (next_obs is the true final observation if the last step ended an episode)
            next_value = agent.get_value(next_obs).reshape(1, -1)
        values = values.view(rewards.shape)
        advantages, returns = compute_gae(
            rewards, values, next_value, terminations, dones, valids, args.gamma, args.gae_lambda
        )
        return dict(logprobs=logprobs, values=values.flatten(), advantages=advantages.flatten(), returns=returns.flatten())

    def update(obs, actions, logprobs, advantages, returns, values, valids, idx):
        # Speed: the minibatch is gathered inside the (compiled) update from indices drawn on the device.
        obs = obs[idx]
        actions = actions[idx]
        logprobs = logprobs[idx]
        advantages = advantages[idx]
        returns = returns[idx]
        values = values[idx]
        w = valids[idx]  # reset rows stay, with weight 0
        wsum = w.sum().clamp(min=1.0)
        optimizer.zero_grad()
        newlogprob, entropy, newvalue = agent.evaluate(obs, actions)
        logratio = newlogprob - logprobs
        ratio = logratio.exp()

        with torch.no_grad():
            # calculate approx_kl http://joschu.net/blog/kl-approx.html
            approx_kl = (((ratio - 1) - logratio) * w).sum() / wsum

        if args.norm_adv:  # mean and (unbiased) std over the valid rows
            mean = (advantages * w).sum() / wsum
            std = (((advantages - mean) ** 2 * w).sum() / (wsum - 1).clamp(min=1.0)).sqrt()
            advantages = (advantages - mean) / (std + 1e-8)

        # Policy loss
        pg_loss1 = -advantages * ratio
        pg_loss2 = -advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
        pg_loss = (torch.max(pg_loss1, pg_loss2) * w).sum() / wsum

        # Value loss
        if args.clip_vloss:
            v_loss_unclipped = (newvalue - returns) ** 2
            v_clipped = values + torch.clamp(newvalue - values, -args.clip_coef, args.clip_coef)
            v_loss_clipped = (v_clipped - returns) ** 2
            v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
            v_loss = 0.5 * (v_loss_max * w).sum() / wsum
        else:
            v_loss = 0.5 * (((newvalue - returns) ** 2) * w).sum() / wsum

        entropy_loss = (entropy * w).sum() / wsum
        loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

        loss.backward()
        nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
        optimizer.step()
        # Speed: the statistics stay on the device, read once per iteration
        return dict(  # Run: the logged values
            value_loss=v_loss.detach(),
            policy_loss=pg_loss.detach(),
            entropy=entropy_loss.detach(),
            old_approx_kl=(-logratio.detach() * w).sum() / wsum,
            approx_kl=approx_kl,
            clipfrac=(((ratio.detach() - 1.0).abs() > args.clip_coef).float() * w).sum() / wsum,
        )
        # Cut: return dict(approx_kl=approx_kl)

    if args.compile:  # Speed: torch.compile fuses the small ops of each function
        policy = compiled(policy, args.compile_mode)
        gae = compiled(gae, args.compile_mode)
        update = compiled(update, args.compile_mode)
    if args.cudagraphs:  # Speed: CUDA graphs replay each function's kernels with one launch
        policy = graphed(policy, args.compile)
        gae = graphed(gae, args.compile)
        update = graphed(update, args.compile)
    return SimpleNamespace(optimizer=optimizer, policy=policy, gae=gae, update=update)


def main(args: Args):
    speed_flags(args)  # before any work: the speed flags as this machine can run them
    # the run's folder, named as in CleanRL (--capture-video's videos go there)
    run_dir = f"{args.output_dir}/{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_dir = args.resume or run_dir  # Run: --resume: the resumed run's
    run = start_run(  # Run: flags checked, metrics
        args, run_dir, "learning_rate value_loss policy_loss entropy old_approx_kl approx_kl clipfrac explained_variance"
    )
    batch_size = int(args.num_envs * args.num_steps)
    minibatch_size = int(batch_size // args.num_minibatches)
    num_iterations = args.total_timesteps // batch_size

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup. NEXT_STEP autoreset, on purpose: an episode's last step returns its true final observation,
    # then a reset step (masked out: valids)
    capture_video = args.capture_video
    capture_video = capture_video and not args.eval_episodes  # Run: the evaluation is filmed
    with envs_ignore_signals():  # Run: Ctrl-C and SIGTERM reach this process alone
        envs = (gym.vector.AsyncVectorEnv if args.async_envs else gym.vector.SyncVectorEnv)(
            [make_env(args.env_id, i, capture_video, f"{run_dir}/videos", args.gamma) for i in range(args.num_envs)],
            autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
        )
    obs_dim, action_dim = int(np.prod(envs.single_observation_space.shape)), int(np.prod(envs.single_action_space.shape))

    agent = Agent(obs_dim, action_dim).to(device)
    ppo = make_ppo(args, agent, device)

    # ALGO LOGIC: Storage setup. Speed: preallocated once; the envs' values go into `host` through its numpy views
    # (`stage`), then to the device (`storage`) in one copy per buffer per rollout, not small copies per step
    host = dict(
        obs=torch.zeros((args.num_steps, args.num_envs, obs_dim)),
        actions=torch.zeros((args.num_steps, args.num_envs, action_dim)),
        rewards=torch.zeros((args.num_steps, args.num_envs)),
        terminations=torch.zeros((args.num_steps, args.num_envs)),
        dones=torch.zeros((args.num_steps, args.num_envs)),
        valids=torch.zeros((args.num_steps, args.num_envs)),
    )
    stage = {k: v.numpy() for k, v in host.items()}
    storage = {k: torch.zeros(v.shape, device=device) for k, v in host.items()}

    global_step = 0
    iterations = range(1, num_iterations + 1)

    # TRY NOT TO MODIFY: start the game
    next_obs = envs.reset(seed=args.seed)[0].reshape(args.num_envs, -1).astype(np.float32)
    # carried across iterations: the first row after a done is a reset
    next_done = np.zeros(args.num_envs, dtype=bool)
    # the observation statistics the policy acts with (useless without them, CleanRL #425): the file's, else training's
    obs_rms = run.model["obs_rms"] if args.eval_model else None  # Run:
    # --eval-model: the agent's weights; --resume: the learned parts, the envs and the random streams as the
    # checkpoint has them, and the loop's values below. A second Ctrl-C or a dead env worker ends the loop.
    with run.loop(envs, dict(agent=agent, optimizer=ppo.optimizer), "agent") as saved:  # Run:
        if saved:  # Run: the loop's values, from the checkpoint
            next_obs, next_done, obs_rms = saved["next_obs"], saved["next_done"], saved["obs_rms"]
            global_step, iterations = saved["log"]["step"], iterations[saved["iteration"] :]
        for iteration in iterations:
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / num_iterations
                # fill_, not copy_: a float copy_ blocks on CUDA
                ppo.optimizer.param_groups[0]["lr"].fill_(frac * args.learning_rate)

            for step in range(0, args.num_steps):
                global_step += args.num_envs
                stage["obs"][step] = next_obs
                stage["valids"][step] = ~next_done  # 0 on a NEXT_STEP reset row

                # ALGO LOGIC: action logic. Speed: only the actor runs here; the log-probs and values come after the
                # rollout, batched. The action's copy to the host is the loop's one sync.
                action = ppo.policy(torch.from_numpy(next_obs).to(device, non_blocking=True)).cpu().numpy()
                stage["actions"][step] = action

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs, reward, termination, truncation, infos = envs.step(action)
                next_done = np.logical_or(termination, truncation)
                stage["rewards"][step] = reward
                stage["terminations"][step] = termination
                stage["dones"][step] = next_done
                next_obs = next_obs.reshape(args.num_envs, -1).astype(np.float32)
                for i in np.flatnonzero(infos.get("_episode", [])):  # the finished episodes
                    run.episodes.append(  # Run:
                        (infos["episode"]["r"][i], infos["episode"]["l"][i])
                    )
                    # Cut: print(f"global_step={global_step}, episodic_return={infos['episode']['r'][i]}")

            for k in storage:
                storage[k].copy_(host[k], non_blocking=True)
            # the rollout's log-probs, values, advantages and returns, flat; bootstrap value from next_obs (the true
            # final observation if the last step ended an episode)
            rollout = ppo.gae(torch.from_numpy(next_obs).to(device, non_blocking=True), **storage)

            # flatten the batch
            batch = dict(obs=storage["obs"].view(-1, obs_dim), actions=storage["actions"].view(-1, action_dim))
            batch.update(rollout, valids=storage["valids"].view(-1))

            clipfrac_sum = torch.zeros((), device=device)  # Run: logged
            # Optimizing the policy and value network. Reset rows stay in the minibatches with weight 0.
            for epoch in range(args.update_epochs):
                # Speed: the permutation is drawn on the device; no host round trip per minibatch.
                b_inds = torch.randperm(batch_size, device=device)
                for start in range(0, batch_size, minibatch_size):
                    mb_inds = b_inds[start : start + minibatch_size]
                    out = ppo.update(**batch, idx=mb_inds)
                    clipfrac_sum += out["clipfrac"]  # Run:
                # Speed: no sync per minibatch; target_kl reads approx_kl once per epoch, as CleanRL checks it.
                if args.target_kl is not None and out["approx_kl"] > args.target_kl:
                    break

            # env 0's NormalizeObservation statistics (each env keeps its own), read between steps
            obs_rms = obs_statistics(envs.get_attr("obs_rms")[0])  # Run: (checkpoints, model.pt)
            # The iteration counted for steps/s; a row of metrics.csv (Speed: one read of the device per iteration,
            # the explained variance over the valid rows); a checkpoint every --checkpoint-interval steps; Ctrl-C,
            # SIGTERM or SIGUSR1 stop the run here, after one.
            if run.step(  # Run:
                global_step,
                1,
                rows=1,
                values=dict(
                    out,
                    clipfrac=clipfrac_sum / ((epoch + 1) * args.num_minibatches),
                    learning_rate=ppo.optimizer.param_groups[0]["lr"],
                    explained_variance=explained_variance(batch["values"], batch["returns"], batch["valids"]),
                ),
                next_obs=next_obs,
                next_done=next_done,
                iteration=iteration,
                obs_rms=obs_rms,
            ):
                break

    # the evaluation's policy, deterministic: the mean action, on observations normalized as in training (frozen)
    def act(obs):  # Run:
        normalized = (obs - obs_rms["mean"].numpy()) / np.sqrt(obs_rms["var"].numpy() + 1e-8)
        normalized = np.clip(normalized, -10, 10).astype(np.float32)
        return agent.actor_mean(torch.from_numpy(normalized).to(device)).cpu().numpy()

    return run.finish(  # Run: summary.json, and what the tests read
        act,
        {"agent": "ppo_continuous_action", "model": agent.state_dict(), "obs_rms": obs_rms},
        device=device,
        envs=envs,
        agent=agent,
        ppo=ppo,
        storage=storage,
        obs_rms=obs_rms,
    )
    # Cut: envs.close()


# Appendix: what runs the run (flag checks, evaluation, saved models, env snapshots, the run folder, metrics, checkpoints).
# Each definition that several files share is the same text in each; nothing above depends on the order below.

import collections
import contextlib
import csv
import json
import pathlib
import signal
from dataclasses import asdict

import mujoco
import tqdm
from torch.utils.tensorboard import SummaryWriter


def start_run(args, run_dir, columns):
    """Before any work, the flags checked and --resume's checkpoint read; then the run folder, with these metrics."""
    model = check_args(args)
    saved = resume(args) if args.resume else None
    return Run(args, saved, model).open(run_dir, columns.split())


def check_args(args: Args):
    """Bad input ends the run here, before any work, with one line naming the flag (`check` is below).
    What this machine lacks falls back with a warning. The one place that changes `args`."""
    silence_v4_notices()
    try:  # a registered id, or gymnasium's `module:id` (the module registers it)
        continuous = isinstance(gym.make(args.env_id).action_space, gym.spaces.Box)
    except gym.error.UnregisteredEnv:
        continuous = False
    except Exception as e:
        # registered but not made here (a missing dependency, a module that failed to import)
        sys.exit(f"error: --env-id: {args.env_id} cannot be made here ({type(e).__name__}: {e})".replace("\n", " "))
    if not continuous:
        wanted = "a gymnasium environment with continuous (Box) actions, such as HalfCheetah-v4"
        sys.exit(f"error: --env-id: {args.env_id}: this PPO needs {wanted}")
    check(args, "seed", lambda v: 0 <= v < 2**31, "in [0, 2**31)")  # numpy seeds stay below 2**32
    check(args, "checkpoint_interval", lambda v: 0 <= v < math.inf, "in [0, inf)")
    check(args, "measure_burnin eval_episodes clip_coef ent_coef vf_coef", lambda v: 0 <= v < math.inf, "in [0, inf)")
    check(args, "gamma gae_lambda", lambda v: 0 <= v <= 1, "in [0, 1]")
    check(args, "num_envs num_steps num_minibatches update_epochs", lambda v: 1 <= v < math.inf, "in [1, inf)")
    check(args, "learning_rate max_grad_norm target_kl", lambda v: 0 < v < math.inf, "in (0, inf)")
    batch = args.num_envs * args.num_steps  # one rollout
    check(args, "total_timesteps", lambda v: v >= batch, f"at least --num-envs x --num-steps ({batch})")
    minibatches = f"a divisor of the batch --num-envs x --num-steps ({batch}) that leaves 2 or more rows per minibatch"
    check(args, "num_minibatches", lambda v: batch % v == 0 and batch >= 2 * v, minibatches)
    model = check_run_flags(args, "ppo_continuous_action")
    if model:  # useless without its observation statistics (CleanRL #425)
        obs_rms = model.get("obs_rms")
        obs_dim = int(np.prod(gym.make(args.env_id).observation_space.shape))
        stats_ok = isinstance(obs_rms, dict) and "count" in obs_rms
        stats_ok = stats_ok and all(getattr(obs_rms.get(k), "shape", None) == (obs_dim,) for k in ("mean", "var"))
        if not stats_ok:
            sys.exit(f"error: --eval-model: {args.eval_model} has no obs statistics (obs_rms) for {obs_dim} observations")
    return model


def silence_v4_notices():
    """CleanRL's -v4 MuJoCo tasks are kept (its returns compare); silenced, and only these: gymnasium's advice to move
    to -v5, and MuJoCo's note on the v4 models' deprecated 'settotalmass' (printed, and logged to ./MUJOCO_LOG.TXT)."""

    def mujoco_warning(text):
        if "settotalmass" not in text:  # MuJoCo's other warnings print as MuJoCo prints them
            print(f"WARNING: {text}", file=sys.stderr)

    warnings.filterwarnings("ignore", message=r".*is out of date\. You should consider upgrading to version `v5`")
    mujoco.set_mju_user_warning(mujoco_warning)


def check(args, names, ok, allowed):  # one line naming the flag if ok(value) is false (NaN: always)
    for name in names.split():
        if getattr(args, name) is not None and not ok(getattr(args, name)):  # None: left out
            sys.exit(f"error: --{name.replace('_', '-')}: must be {allowed}, got {getattr(args, name)}")


def check_run_flags(args, agent):
    """What every file checks after its own flags: --resume or --eval-model (whose file is read once, here), CUDA."""
    if args.resume and args.eval_model:
        sys.exit("error: --resume: not with --eval-model (an evaluation goes on from no run)")
    model = None
    if args.eval_model:  # evaluation only: the file holds this pair's agent for --env-id
        try:
            model = torch.load(args.eval_model, map_location="cpu", weights_only=True)
            if model["agent"] != agent or model["env_id"] != args.env_id:
                raise ValueError(f"it holds a {model['agent']} agent for {model['env_id']}")
        except Exception as e:
            problem = f"{type(e).__name__}: {e}".replace("\n", " ")
            sys.exit(f"error: --eval-model: {args.eval_model} is no {agent} model for {args.env_id} ({problem})")
        args.total_timesteps, args.eval_episodes = 0, args.eval_episodes or 10
    if args.cuda and not torch.cuda.is_available():
        print("warning: --cuda: CUDA is not available, running on the CPU", file=sys.stderr)
        args.cuda = False
    # MuJoCo: without a display, the videos render offscreen through EGL
    if args.capture_video and sys.platform == "linux" and not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")
    return model


def resume(args):
    """main's side of --resume: the checkpoint, and its folder's metrics.csv cut back to it (later rows come again)."""
    saved = load_checkpoint(args)
    try:
        with open(os.path.join(args.resume, "metrics.csv"), "r+", newline="") as f:
            rows = f.readlines()  # the header, then one row per line, in the order of global_step
            kept = rows[:1] + [row for row in rows[1:] if int(row.split(",")[0]) <= saved["log"]["step"]]
            f.truncate(len("".join(kept)))
    except (OSError, ValueError) as e:
        sys.exit(f"error: --resume: {args.resume}: its metrics.csv cannot be cut back to the checkpoint ({e})")
    return saved


def load_checkpoint(args):
    """--resume: the folder's checkpoint.pt, of this script with these flags (but RESUMABLE's), or one line saying why."""
    try:
        with torch.serialization.safe_globals(NUMPY):
            path = os.path.join(args.resume, "checkpoint.pt")
            saved = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        if saved["script"] != pathlib.Path(__file__).stem:
            raise ValueError(f"it is {saved['script']}.py's")
        if saved.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"it is of format {saved.get('version', 1)}, written before this file's ({CHECKPOINT_VERSION})")
    except Exception as e:
        problem = f"{type(e).__name__}: {e}".replace("\n", " ")
        sys.exit(f"error: --resume: {args.resume} holds no checkpoint of this script to go on from ({problem})")
    for name, value in saved["args"].items():
        if name not in RESUMABLE and getattr(args, name, value) != value:
            flag = f"--{name.replace('_', '-')}"
            sys.exit(f"error: {flag}: the run resumed has {value}, not {getattr(args, name)} (only budgets, outputs change)")
    filmed = [a.get("capture_video") and not a.get("eval_episodes") for a in (saved["args"], vars(args))]
    if filmed[0] != filmed[1]:  # env 0 is wrapped otherwise where its training is filmed
        done = "filmed its training" if filmed[0] else "did not film its training"
        how = "--capture-video films training where --eval-episodes is 0"
        sys.exit(f"error: --capture-video: the run resumed {done}, a resume must do the same ({how})")
    if args.total_timesteps < saved["log"]["step"]:  # (it would end at once, its checkpoint gone)
        step = saved["log"]["step"]
        sys.exit(f"error: --total-timesteps: the run resumed is at step {step}, past {args.total_timesteps}")
    return saved


# Checkpoints: --resume goes on from checkpoint.pt as the unstopped run would have. The flags a resumed run may change:
RESUMABLE = ["total_timesteps", "resume", "checkpoint_interval", "exp_name", "output_dir", "track", "wandb_project_name"]
RESUMABLE += ["wandb_entity", "save_model", "eval_episodes", "capture_video", "measure_burnin", "log_interval"]
CHECKPOINT_VERSION = 3  # 1, 2 (refused): numpy arrays as tensors; logged values among the loop's
# numpy's arrays, scalars and dtypes (the envs' states), which torch.load(weights_only=True) reads when told: no code runs
NUMPY = [np._core.multiarray._reconstruct, np._core.multiarray.scalar, np.ndarray, np.dtype]
NUMPY += [type(np.dtype(kind)) for kind in "?bhilqBHILQefd"]  # its dtypes: bool, integers, floats


class Run:
    """The run folder (metrics.csv, TensorBoard, model.pt, checkpoint.pt, summary.json), progress, wandb, the status."""

    def __init__(self, args, saved=None, model=None):  # --resume's checkpoint, --eval-model's file
        self.args, self.saved, self.model = args, saved, model
        self.start = time.time()
        self.status = "finished"  # until the loop or the evaluation ends otherwise
        self.part = saved["log"] if saved else dict(step=0, episodes=[], resumes=-1, time=[0, 0.0], wall_s=0.0, warmup_s=0.0)
        self.episodes = [tuple(e) for e in self.part["episodes"]]
        self.resumes = self.part["resumes"] + 1
        self.updates = 0  # (PPO: iterations)
        # the clock's marks: where learning starts, where the burn-in ends (time, step), where the run ends
        self.learning_start = self.burnin_end = self.end = self.first_update_at = None
        # the values the rows log, their last (tensors kept where they are until a row reads them)
        # a checkpoint's logged tensors come back on the CPU: their means, numbers that mix with the device's
        logged = saved["logged"].items() if saved else []
        self.logged = {k: float(v.float().mean()) if isinstance(v, torch.Tensor) else v for k, v in logged}
        self.step_at = self.part["step"]  # the loop's last step
        self.tick = time.time()  # when it ended
        self.envs = self.learned = self.wandb = self.stopping = None
        self.evaluating = False  # (a signal stops the evaluation at once)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):  # Ctrl-C, kill, Slurm
            signal.signal(signum, self.ask_to_stop)

    def ask_to_stop(self, signum, frame):  # Ctrl-C, SIGTERM or SIGUSR1 (Slurm)
        """The loop stops after its step, checkpoint first; a second Ctrl-C, or one during the evaluation, at once."""
        again = self.stopping == "interrupted" and signum == signal.SIGINT
        self.stopping = self.stopping or ("interrupted" if signum == signal.SIGINT else "terminated")
        if again or self.evaluating:
            raise KeyboardInterrupt

    def open(self, run_dir, columns):
        """The run folder with its metrics.csv (these columns), TensorBoard, wandb (--track) and the progress bar."""
        self.run_dir, args = run_dir, self.args
        try:  # what can fail here is --track's wandb or the folder
            if args.track:
                import wandb

                name = os.path.basename(run_dir)
                self.wandb = wandb.init(
                    project=args.wandb_project_name, entity=args.wandb_entity, config=vars(args), name=name, save_code=True
                )
            os.makedirs(run_dir, exist_ok=True)  # (as in CleanRL: one second's runs share it)
        except (ImportError, OSError) as e:
            flag = "--track: needs wandb: pip install wandb" if isinstance(e, ImportError) else f"--output-dir: {e}"
            sys.exit(f"error: {flag}")
        columns = ["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s", *columns]
        self.csv = csv.DictWriter(open(os.path.join(run_dir, "metrics.csv"), "a", buffering=1, newline=""), columns)
        if not self.saved:  # (a resumed run's: resume() cut them back to its checkpoint)
            self.csv.writeheader()
        self.writer = SummaryWriter(run_dir, purge_step=self.part["step"] + 1)  # TensorBoard
        table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
        self.writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")
        self.bar = tqdm.tqdm(total=args.total_timesteps, initial=self.part["step"], disable=None, unit="step")
        return self

    @contextlib.contextmanager
    def loop(self, envs, learned, acting):
        """Around the training loop. Before it: --eval-model's weights into learned[acting]; --resume's checkpoint put
        back (the learned parts, the envs, the random streams), its loop values yielded (None otherwise). A second Ctrl-C
        ends the loop at once, a lost env worker as a failure; after it, the envs close."""
        self.envs, self.learned = envs, learned
        try:  # --eval-model's weights, in place (compiled functions read them)
            if self.model:
                learned[acting].load_state_dict(self.model["model"])
        except Exception as e:
            problem = f"{type(e).__name__}: {e}".replace("\n", " ")
            sys.exit(f"error: --eval-model: {self.args.eval_model} does not fit the {acting} ({problem})")
        if self.saved:
            load_states(learned, self.saved["learned"])
            # NEXT_STEP: next_done, the envs whose next step is a reset
            set_env_state(envs, self.saved["envs"], self.saved["next_done"])
            set_random_streams(self.saved["random"])
        self.tick = time.time()
        try:
            yield self.saved
        except KeyboardInterrupt:
            self.status = "interrupted"
        except (EOFError, ConnectionError) as e:  # a worker was killed or ran out of memory
            self.status = "failed"
            print(f"error: --async-envs: an env worker died ({type(e).__name__}), the run stops here", file=sys.stderr)
        # --async-envs: a step left pending (a second Ctrl-C) ends first; a dead worker's pipe fails the closing: then
        # the other workers are ended directly (they ignore SIGTERM)
        try:
            envs.close()
        except (EOFError, ConnectionError):
            for process in envs.unwrapped.processes:
                process.kill()
            envs.unwrapped.closed = True

    def log(self, values: dict):
        """Values for the rows of metrics.csv from now on (tensors stay where they are until a row reads them)."""
        self.logged.update(values)

    def step(self, global_step, updates=0, rows=0, values=None, **loop):
        """A step of the loop (PPO: an iteration) ends, global_step env steps done: its updates counted; a row (the logged
        values, `values`) each `rows` steps; a checkpoint (with `loop`) when due. True: the loop stops here."""
        self.count_update(global_step, updates)
        last, self.step_at = self.step_at, global_step
        if rows and global_step // rows > last // rows and self.row(global_step, {**self.logged, **(values or {})}):
            return True
        stop = self.checkpoint(global_step, self.learned, self.envs, **loop)
        self.tick = time.time()
        return stop

    def count_update(self, global_step, updates=1):
        """The step's updates: learning starts where the first such step began; the burn-in ends with the Nth update."""
        if updates and self.learning_start is None:
            self.learning_start, self.first_update_at = self.tick, time.time()
            if self.args.measure_burnin == 0:
                self.burnin_end = (self.tick, self.step_at)
        self.updates += updates
        if updates and self.burnin_end is None and self.updates >= self.args.measure_burnin:
            self.burnin_end = (time.time(), global_step)

    def row(self, global_step, metrics: dict):  # a metrics.csv row; True if a value is NaN or inf
        row = {**self.stats(global_step), **metrics}
        tensors = {k: v.detach().float().mean() for k, v in metrics.items() if isinstance(v, torch.Tensor)}
        if tensors:  # a tensor logs its mean, all in one transfer
            row.update(zip(tensors, torch.stack(list(tensors.values())).tolist()))
        self.csv.writerow(row)
        speed = "warming up" if row["sps"] is None else f"{row['sps']:.0f} steps/s"
        line = f"{speed}, return {'-' if row['episodic_return'] is None else round(row['episodic_return'], 1)}"
        self.bar.update(global_step - self.bar.n)
        self.bar.set_postfix_str(line)
        if self.bar.disable:  # off a terminal (Slurm, nohup, CI): a plain line instead
            print(f"step {global_step}/{self.args.total_timesteps}: {line}", file=sys.stderr, flush=True)
        charts = ["sps", "episodic_return", "episodic_length", "wall_time_s", "learning_rate", "epsilon"]
        logged = {("charts/" if k in charts else "losses/") + k: v for k, v in row.items() if v is not None}
        logged = {k.replace("charts/sps", "charts/SPS"): v for k, v in logged.items() if k != "losses/global_step"}
        for key, value in logged.items():  # CleanRL's keys: charts/SPS, ..., losses/...
            self.writer.add_scalar(key, value, global_step)
        if self.wandb:
            self.wandb.log(logged, step=global_step)
        bad = [f"{k} is {v}" for k, v in row.items() if isinstance(v, (float, np.floating)) and not math.isfinite(v)]
        if bad:
            print(f"error: the run diverged: {bad[0]} at step {global_step}", file=sys.stderr)
            self.status = "diverged"
        return bool(bad)

    def stats(self, global_step):  # for metrics.csv and summary.json: steps/s, the last 20 episodes
        part = self.so_far(global_step)
        last = np.mean(self.episodes[-20:], 0).tolist() if self.episodes else [None, None]
        stats = dict(global_step=global_step, sps=part["time"][0] / part["time"][1] if part["time"][0] else None)
        return dict(stats, episodic_return=last[0], episodic_length=last[1], wall_time_s=part["wall_s"])

    def checkpoint(self, global_step, learned, envs, **loop):
        """checkpoint.pt every --checkpoint-interval steps and before a signal stops the run; True: the loop stops."""
        if self.checkpoint_due(global_step):
            self.save_checkpoint(global_step, learned=states(learned), envs=env_state(envs), **loop)
        if self.stopping:
            self.status = self.stopping
        return self.stopping is not None

    def checkpoint_due(self, global_step):  # every --checkpoint-interval steps; before a stop
        interval = self.args.checkpoint_interval
        return interval > 0 and (self.stopping is not None or global_step // interval > self.part["step"] // interval)

    def save_checkpoint(self, global_step, **content):
        """checkpoint.pt: what main gives (states, envs, the loop's counters), the run so far and the random streams."""
        content.update(log=self.so_far(global_step), random=random_streams(), script=pathlib.Path(__file__).stem)
        content.update(logged=self.logged, version=CHECKPOINT_VERSION)
        self.save(content, "checkpoint.pt")
        self.part["step"] = global_step

    def so_far(self, global_step):
        """The run up to global_step as a checkpoint keeps it; steps and seconds after each part's burn-in (each compiles)."""
        steps, seconds = self.part["time"]
        warmup = self.part["warmup_s"]
        if self.burnin_end:
            warmup += self.burnin_end[0] - self.learning_start
        if self.burnin_end and global_step > self.burnin_end[1]:
            steps, seconds = steps + global_step - self.burnin_end[1], seconds + (self.end or time.time()) - self.burnin_end[0]
        part = dict(step=global_step, episodes=self.episodes, resumes=self.resumes, time=[steps, seconds], warmup_s=warmup)
        return dict(part, wall_s=self.part["wall_s"] + time.time() - self.start)

    def save(self, content, name):
        """Into the run folder, whole: written beside, then renamed (a kill mid-write leaves the last file as it was)."""
        if self.args.cuda:  # a graph's warm-up runs on a side stream: its writes land first
            torch.cuda.synchronize()
        path = os.path.join(self.run_dir, name)
        # a tensor without its graph (a loss kept for the log)
        content = tree_map_only(torch.Tensor, torch.Tensor.detach, dict(content, args=asdict(self.args)))
        torch.save(content, f"{path}.tmp")
        os.replace(f"{path}.tmp", path)

    def finish(self, act, model, fields=None, **state):
        """model.pt (`model`: what acting needs), the evaluation (`act`: observations to actions, deterministic),
        summary.json (with `fields`); what main returns: the status, and `state` for the tests."""
        self.end = time.time()  # steps/s ends here
        args, global_step, fields = self.args, self.step_at, fields or {}
        evals = []
        self.bar.close()
        if args.save_model and self.status != "diverged":  # what is needed to act, and whence
            self.save(dict(model, env_id=args.env_id), "model.pt")
        try:  # Ctrl-C or SIGTERM during the evaluation still writes the summary
            self.evaluating = args.eval_episodes and self.status == "finished"
            # a signal after the loop's last step (or before an --eval-model run's evaluation) stops the run here
            if self.stopping and self.status == "finished":
                raise KeyboardInterrupt
            if self.evaluating:
                with torch.no_grad():  # (act needs no autograd)
                    evals = evaluate(args, act, os.path.join(self.run_dir, "videos"))
        except KeyboardInterrupt:  # (ask_to_stop says which signal)
            self.status = self.stopping or "interrupted"
        self.evaluating = False
        if self.status == "finished":  # a finished run goes on no more: its checkpoint goes
            pathlib.Path(self.run_dir, "checkpoint.pt").unlink(missing_ok=True)
        self.writer.close()
        script = pathlib.Path(__file__).stem
        gpu = torch.cuda.get_device_name() if args.cuda else None
        summary = dict(script=script, algo=script.split("_")[0], device="cuda" if args.cuda else "cpu", gpu_name=gpu)
        summary.update(cpu_count=os.cpu_count(), torch_version=torch.__version__, world_size=1)
        summary.update(self.stats(global_step), episodes=len(self.episodes), args=asdict(args), resumes=self.resumes, **fields)
        summary["warmup_s"] = self.so_far(global_step)["warmup_s"] if self.burnin_end or self.resumes else None
        # when this process's first update ended (run.sh counts from the launch), and whether torch.compile found its
        # cache cold (graphs compiled anew) or warm (every graph from the cache): inductor's own counters
        cache = getattr(sys.modules.get("torch._dynamo.utils"), "counters", {}).get("inductor", {})
        compile_cache = dict(hits=cache.get("fxgraph_cache_hit", 0), misses=cache.get("fxgraph_cache_miss", 0))
        summary.update(first_update_at=self.first_update_at, compile_cache=compile_cache)
        self.status = summary["status"] = "evaluated" if evals and args.eval_model else self.status
        summary.update(eval_episodes=len(evals) or None, eval_return_mean=None, eval_return_std=None)
        if evals:
            summary.update(eval_return_mean=float(np.mean(evals)), eval_return_std=float(np.std(evals)))
            print(f"evaluation: {len(evals)} episodes, return {np.mean(evals):.1f} +- {np.std(evals):.1f}", file=sys.stderr)
        if summary["sps"] is None and summary["status"] == "finished":  # a short run is no error
            measured = f"{self.updates} updates, --measure-burnin {args.measure_burnin}"
            print(f"warning: --total-timesteps {args.total_timesteps}: steps/s not measured ({measured})", file=sys.stderr)
        pathlib.Path(self.run_dir, "summary.json").write_text(json.dumps(summary, indent=2))
        print(pathlib.Path(self.run_dir, "summary.json"))  # the last line printed
        return dict(status=self.status, args=args, run=self, **state)


def obs_statistics(rms):
    """NormalizeObservation's running statistics (env 0's: each env keeps its own), as checkpoints and model.pt keep them."""
    return {"mean": torch.tensor(rms.mean), "var": torch.tensor(rms.var), "count": float(rms.count)}


def explained_variance(values, returns, w):
    """1 - Var[returns - values] / Var[returns] over the valid rows, on the device. With no variance to explain: 0
    (sklearn's convention; CleanRL logs nan, which would read as diverged)."""
    n = w.sum().clamp(min=1.0)

    def var(x):  # the variance over the valid rows
        return (w * (x - (w * x).sum() / n) ** 2).sum() / n

    var_y = var(returns)
    return torch.where(var_y == 0, torch.zeros_like(var_y), 1 - var(returns - values) / var_y)


def states(parts):
    """What a checkpoint keeps of each learned part: a tensor, or the state_dict of a network, optimizer or buffer."""
    return {name: part.detach() if isinstance(part, torch.Tensor) else part.state_dict() for name, part in parts.items()}


def load_states(parts, kept):
    """The parts as states() kept them, put back in place: compiled and captured functions read these tensors."""
    for name, part in parts.items():
        if isinstance(part, torch.Tensor):
            with torch.no_grad():
                part.copy_(kept[name])
            continue
        # a tensor lr is the one the compiled and captured updates read: kept, with the saved value
        lrs = [group["lr"] for group in getattr(part, "param_groups", [])]
        part.load_state_dict(kept[name])
        for group, lr in zip(getattr(part, "param_groups", []), lrs):
            if isinstance(lr, torch.Tensor):
                group["lr"] = lr.fill_(float(group["lr"]))


def random_streams():
    """Python's, numpy's and torch's random streams (every GPU's too)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return dict(python=random.getstate(), numpy=np.random.get_state(legacy=False), torch=torch.get_rng_state(), cuda=cuda)


def set_random_streams(streams):
    random.setstate(streams["python"])
    np.random.set_state(streams["numpy"])
    torch.set_rng_state(streams["torch"])
    if streams["cuda"]:
        torch.cuda.set_rng_state_all(streams["cuda"])


def evaluate(args, act, video_dir):
    """--eval-episodes episodes of `act` (observations -> actions, numpy) on one env seeded apart from training, with
    training's wrappers but for the normalizations: `act` normalizes as training did; the returns are the raw rewards."""
    env = gym.make(args.env_id, render_mode="rgb_array" if args.capture_video else None)
    env = gym.wrappers.RecordVideo(env, video_dir, episode_trigger=lambda _: True) if args.capture_video else env
    env = gym.wrappers.RecordEpisodeStatistics(
        gym.wrappers.ClipAction(gym.wrappers.FlattenObservation(env)), buffer_length=args.eval_episodes
    )
    for episode in range(args.eval_episodes):
        # training's envs: seed .. seed + num_envs - 1
        obs, done = env.reset(seed=args.seed + 100_000 + episode)[0], False
        while not done:
            obs, _, terminated, truncated, _ = env.step(act(obs.reshape(1, -1))[0])
            done = terminated or truncated
    env.close()
    return [float(r) for r in env.return_queue]


@contextlib.contextmanager
def envs_ignore_signals():
    """Envs made inside (--async-envs workers too) leave Ctrl-C, SIGTERM and SIGUSR1 to this process, which saves them."""
    handlers = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


class Snapshot(gym.Wrapper):
    """Checkpoints: the env's whole state, kept and put back through the vector env's get_attr / set_attr("snapshot"),
    here or in an --async-envs worker: every layer's counters, statistics and random streams,
    MuJoCo: and the simulator's physics (mj_getState: pickling a MuJoCo env rebuilds it, and steps otherwise)."""

    # NEXT_STEP: put back on a reset row, the next step() is the reset the vector env would have made
    pending_reset = False

    def step(self, action):
        if not self.pending_reset:
            return self.env.step(action)
        self.pending_reset = False
        obs, info = self.env.reset()
        return obs, 0.0, False, False, info

    @property
    def snapshot(self):
        layers, env = [], self.env
        while isinstance(env, gym.Env):  # (RecordVideo too: layer_state keeps its counts)
            layers.append(layer_state(env))
            env = getattr(env, "env", None)
        physics, spec = env_physics(self.unwrapped), mujoco.mjtState.mjSTATE_INTEGRATION  # MuJoCo:
        if physics is not None:  # positions, velocities, warm start...: what the next steps use
            state = np.zeros(mujoco.mj_stateSize(physics[0], spec))
            mujoco.mj_getState(*physics, state, spec)
            physics = state
        return dict(layers=layers, physics=physics)

    @snapshot.setter
    def snapshot(self, state):
        env = self.env
        for layer in state["layers"]:
            set_layer_state(env, layer)
            env = getattr(env, "env", None)
        if state["physics"] is not None:  # MuJoCo:
            mujoco.mj_setState(*env_physics(self.unwrapped), state["physics"], mujoco.mjtState.mjSTATE_INTEGRATION)
        self.pending_reset = state["pending_reset"]  # NEXT_STEP:


def env_physics(env):  # a MuJoCo env's (model, data), None for another env
    return (env.model, env.data) if isinstance(getattr(env, "data", None), mujoco.MjData) else None


def layer_state(layer):
    """What a wrapper or an env keeps between steps: numbers, arrays, random streams, running statistics, queues."""
    # --capture-video's RecordVideo: the videos go on numbering, with no frames of the episode it stopped in
    if isinstance(layer, gym.wrappers.RecordVideo):
        return dict(episode_id=layer.episode_id, step_id=layer.step_id, recording=False, recorded_frames=[])
    state = {}
    for name, value in vars(layer).items():
        if isinstance(value, (bool, int, float, str, np.ndarray)):
            state[name] = value
        elif isinstance(value, np.generic):
            state[name] = value.item()
        elif isinstance(value, np.random.Generator):
            state[name] = dict(generator=value.bit_generator.state)
        elif isinstance(value, gym.wrappers.utils.RunningMeanStd):
            state[name] = dict(mean=value.mean, var=value.var, count=value.count)
        elif isinstance(value, collections.deque):
            state[name] = dict(queue=list(value), maxlen=value.maxlen)
    return state


def set_layer_state(layer, state):
    for name, value in state.items():
        if isinstance(value, dict) and "generator" in value:  # a numpy random stream
            generator = np.random.Generator(getattr(np.random, value["generator"]["bit_generator"])())
            generator.bit_generator.state = value["generator"]
            value = generator
        elif isinstance(value, dict) and "mean" in value:  # running statistics
            rms = getattr(layer, name)
            rms.mean, rms.var, rms.count = value["mean"], value["var"], value["count"]
            value = rms
        elif isinstance(value, dict) and "queue" in value:
            value = collections.deque(value["queue"], maxlen=value["maxlen"])
        setattr(layer, name, value)


def env_state(envs):
    """The vector env's wrappers, each env (get_attr reaches the workers too), the action space's random stream."""
    layers, env = [], envs
    while isinstance(env, gym.vector.VectorWrapper):
        layers.append(layer_state(env))
        env = env.env
    action_space = envs.single_action_space.np_random.bit_generator.state
    return dict(layers=layers, envs=list(env.get_attr("snapshot")), action_space=action_space)


def set_env_state(envs, state, pending_resets):  # NEXT_STEP: the envs whose next step is a reset
    """Put the state back on envs made and reset as the run made them."""
    env = envs
    for layer in state["layers"]:
        set_layer_state(env, layer)
        env = env.env
    envs.single_action_space.np_random.bit_generator.state = state["action_space"]
    # NEXT_STEP: each env's snapshot says whether its next step is a reset
    snapshots = [dict(s, pending_reset=bool(p)) for s, p in zip(state["envs"], pending_resets)]
    env.set_attr("snapshot", snapshots)


if __name__ == "__main__":
    state = main(tyro.cli(Args))
    sys.exit({"interrupted": 130, "terminated": 143, "diverged": 1, "failed": 1}.get(state["status"], 0))
