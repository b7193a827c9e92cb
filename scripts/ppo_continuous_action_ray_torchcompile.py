# PPO for continuous actions with Ray env runners: ppo_continuous_action_torchcompile.py, whose envs step here in
# --env-runners Ray actors (RLlib's env runners), on this machine's cores or a Ray cluster's. Each runner steps its share
# of the envs through a whole rollout with a CPU copy of the agent, and meets the learner only at the rollout's end, so
# a slow env holds back its runner's envs only, not every env at every step. Everything else is the core file's text;
# each line of this idea is marked "Runners:". As in the core file:
# --compile (torch.compile) and --cudagraphs (tensordict's CudaGraphModule) are independent; with neither it is the
# lean eager version. Each speed trick is marked "Speed:" where it is used.
# As in the baseline: gymnasium 1.x autoresets in NEXT_STEP mode, so the step after a done only resets the
# env (reward 0, action ignored). That row is masked out of the losses, and a truncated episode bootstraps from
# its true final observation (see compute_gae); CleanRL's loop was written for the older same-step autoreset.
import gc
import math
import os
import random
import signal
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
    # Runners: the env runners, and the Ray cluster they run on
    env_runners: int = 1
    """Ray actors that step num_envs / env_runners envs each through whole rollouts, not in lock-step"""
    env_runner_cpus: float = 1.0
    """the CPUs Ray reserves for each env runner (below 1: several runners share a core, for envs that wait)"""
    ray_address: str | None = None
    """the Ray cluster the env runners join (`auto` or host:port); by default a local Ray on 127.0.0.1, started and stopped"""
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


class EnvRunner:
    """Runners: one of --env-runners Ray actors, as RLlib's env runners. It owns num_envs / env_runners of the envs
    (made and seeded as the core file makes them) and a CPU copy of the agent, and steps its envs through a whole
    rollout with the weights the learner sent: it meets the learner only at the rollout's end, never in lock-step."""

    def __init__(self, args: Args, index: int, video_dir: str):
        import ray

        silence_v4_notices()
        n = args.num_envs // args.env_runners
        self.first = index * n  # its envs: first .. first + n - 1 of the learner's
        self.envs = gym.vector.SyncVectorEnv(
            [
                make_env(args.env_id, self.first + i, args.capture_video and not args.eval_episodes, video_dir, args.gamma)
                for i in range(n)
            ],
            autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
        )
        obs_dim = int(np.prod(self.envs.single_observation_space.shape))
        action_dim = int(np.prod(self.envs.single_action_space.shape))
        self.agent = Agent(obs_dim, action_dim)
        torch.manual_seed(args.seed + 1 + index)  # each runner's own action noise
        # the learner's host rows, for this runner's share of the envs
        self.stage = dict(
            obs=np.zeros((args.num_steps, n, obs_dim), np.float32),
            actions=np.zeros((args.num_steps, n, action_dim), np.float32),
            rewards=np.zeros((args.num_steps, n), np.float32),
            terminations=np.zeros((args.num_steps, n), np.float32),
            dones=np.zeros((args.num_steps, n), np.float32),
            valids=np.zeros((args.num_steps, n), np.float32),
        )
        # SyncVectorEnv seeds env i with seed + i: the learner's seeds
        self.seed = args.seed + self.first
        self.next_obs = self.envs.reset(seed=self.seed)[0].reshape(n, -1).astype(np.float32)
        # carried across rollouts: the first row after a done is a reset
        self.next_done = np.zeros(n, dtype=bool)
        # where it runs, and whether Ray restarted it (its process or node died)
        context = ray.get_runtime_context()
        self.node = context.get_node_id()
        # ray 2.60 warns of its own deprecated actor_id, used inside
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.restarted = context.was_current_actor_reconstructed

    def sample(self, weights, statistics):
        """One rollout with the learner's weights: the core file's rollout loop, on this runner's envs. `statistics`:
        its envs' normalization statistics after the last rollout, put back if Ray restarted this runner (its new envs
        start from none)."""
        restarted = self.restarted
        # then a reset, so that even the first observation is normalized with them
        if restarted and statistics:
            self.envs.set_attr("obs_rms", statistics["obs_rms"])
            self.envs.set_attr("return_rms", statistics["return_rms"])
            self.next_obs = self.envs.reset(seed=self.seed)[0].reshape(len(self.next_obs), -1).astype(np.float32)
        self.restarted = False
        self.agent.load_state_dict(weights)
        stage = self.stage
        episodes = []
        for step in range(len(stage["obs"])):
            stage["obs"][step] = self.next_obs
            stage["valids"][step] = ~self.next_done  # 0 on a NEXT_STEP reset row

            # ALGO LOGIC: action logic (the log-probs and values are computed by the learner, batched)
            with torch.no_grad():
                action = self.agent.get_action(torch.from_numpy(self.next_obs)).numpy()
            stage["actions"][step] = action

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, reward, termination, truncation, infos = self.envs.step(action)
            self.next_done = np.logical_or(termination, truncation)
            stage["rewards"][step] = reward
            stage["terminations"][step] = termination
            stage["dones"][step] = self.next_done
            self.next_obs = next_obs.reshape(len(next_obs), -1).astype(np.float32)
            for i in np.flatnonzero(infos.get("_episode", [])):  # Run: the finished episodes
                episodes.append((infos["episode"]["r"][i], infos["episode"]["l"][i]))
        statistics = dict(obs_rms=self.envs.get_attr("obs_rms"), return_rms=self.envs.get_attr("return_rms"))
        out = dict(stage, next_obs=self.next_obs, episodes=episodes, statistics=statistics)
        return dict(out, node=self.node, restarted=restarted)

    def get_state(self):
        """Runners: what a checkpoint keeps of this runner: its envs' state, where they are, its action noise."""
        return dict(envs=env_state(self.envs), next_obs=self.next_obs, next_done=self.next_done, noise=torch.get_rng_state())

    def set_state(self, state):
        """Runners: --resume: this runner goes on where the checkpoint has it."""
        set_env_state(self.envs, state["envs"], pending_resets=state["next_done"])
        # (copies: Ray hands arrays over read-only)
        self.next_obs, self.next_done = np.array(state["next_obs"]), np.array(state["next_done"])
        torch.set_rng_state(state["noise"])


class Runners:
    """Runners: the learner's side of --env-runners. Joins Ray (--ray-address, else a local Ray on 127.0.0.1), spreads
    the runners over its nodes, broadcasts the weights and gathers the rollouts in env order. Ray restarts a runner
    whose process or node died and asks it for its rollout again (max_restarts, max_task_retries)."""

    def __init__(self, args: Args):
        # read when ray is imported: else Ray advertises the machine's network address
        if args.ray_address is None:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        import ray  # imported only here, so that --help and the checks run without ray

        self.ray = ray
        self.args = args
        self.restarts = []  # (runner, node it came back on, node it was on) of each restart
        try:
            # the embedded default: no setup, loopback only, no dashboard
            if args.ray_address is None:
                # Ray starts its processes with SIGINT blocked, so that Ctrl-C stops the learner alone; SIGTERM and
                # SIGUSR1 too here: sent to all of the run's processes (Slurm's time limit, or its warning without B:),
                # they reach the learner alone, which stops with its checkpoint, runners included, then ends them
                # (ray.shutdown: SIGKILL after a few seconds)
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGUSR1})
                try:
                    ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False, logging_level="ERROR")
                finally:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGUSR1})
            else:
                ray.init(address=args.ray_address, logging_level="ERROR")
        # no cluster there, another Ray's version, a local Ray that did not start
        except Exception as e:
            where = f"--ray-address: {args.ray_address}" if args.ray_address else "--env-runners: the local Ray"
            sys.exit(f"error: {where}: {type(e).__name__}: {e}".replace("\n", " "))
        # Checked at the start, since Ray would otherwise wait for the CPUs forever: the cluster's free CPUs, and the
        # runners each node can hold (a runner lives on one node); in Ray's units of 1/10,000 CPU, as it counts them
        # (in floats, 10 runners x 0.2 CPU would need more than 2 CPUs)
        per = round(args.env_runner_cpus * 10_000)
        free, need = round(ray.available_resources().get("CPU", 0.0) * 10_000), args.env_runners * per
        fit = sum(round(node["Resources"].get("CPU", 0) * 10_000) // per for node in ray.nodes() if node["Alive"])
        if need > free or fit < args.env_runners:
            ray.shutdown()
            sys.exit(
                f"error: --env-runners: {args.env_runners} runners x --env-runner-cpus {args.env_runner_cpus} need"
                f" {need / 10_000:g} CPUs, the Ray cluster has {free / 10_000:g} free (its nodes hold {fit} such runners)"
            )

    def start(self, run):
        # a runner whose process or node dies comes back (100 times at most: a runner that crashes at every start
        # ends the run) and its rollout is asked for again
        options = dict(num_cpus=self.args.env_runner_cpus, max_restarts=100, max_task_retries=-1, scheduling_strategy="SPREAD")
        runner = self.ray.remote(EnvRunner).options(**options)
        video_dir = os.path.join(run.run_dir, "videos")
        self.actors = [runner.remote(self.args, i, video_dir) for i in range(self.args.env_runners)]
        self.run = run  # (whether the run was asked to stop)
        # each runner's node, as its last rollout reported it
        self.nodes = [None] * len(self.actors)
        self.all_nodes = []  # every node a runner ran on
        self.statistics = [None] * len(self.actors)

    def sample(self, agent, stage):
        """Every runner's rollout with the agent's weights, into the rows of `stage` in env order. Returns the
        observation after the last step, the finished episodes in env order, and env 0's statistics."""
        # one broadcast per iteration
        weights = self.ray.put({k: v.cpu() for k, v in agent.state_dict().items()})
        results = self.answers([actor.sample.remote(weights, s) for actor, s in zip(self.actors, self.statistics)])
        n = self.args.num_envs // len(self.actors)
        for i, result in enumerate(results):
            if result["restarted"]:
                print(
                    f"warning: --env-runners: runner {i} was restarted by Ray (its process or node was lost)", file=sys.stderr
                )
                self.restarts.append(dict(runner=i, node=result["node"], was_on=self.nodes[i]))
            self.nodes[i], self.statistics[i] = result["node"], result["statistics"]
            if result["node"] not in self.all_nodes:
                self.all_nodes.append(result["node"])
            for k in stage:
                stage[k][:, i * n : (i + 1) * n] = result[k]
        next_obs = np.concatenate([result["next_obs"] for result in results])
        episodes = [episode for result in results for episode in result["episodes"]]
        return next_obs, episodes, results[0]["statistics"]["obs_rms"][0]

    def state(self):  # for the checkpoint: every runner's, in runner order
        return self.answers([actor.get_state.remote() for actor in self.actors])

    def set_state(self, states):  # --resume: each runner as the checkpoint has it
        self.answers([actor.set_state.remote(state) for actor, state in zip(self.actors, states)])

    def answers(self, calls):
        """What the runners return for calls, in order; ConnectionError if a runner failed. Never a silent wait: a line
        each minute while some are missing. Once the run was asked to stop, 10 s at most: a cluster that got the
        signal too (Slurm's time limit) is gone, and Ray would wait for it a minute, then end the process."""
        waited = 0  # seconds
        waited_stopping = 0  # seconds since the run was asked to stop
        pending = calls
        while pending:
            pending = self.ray.wait(pending, num_returns=len(pending), timeout=1)[1]
            waited += 1
            waited_stopping += bool(self.run.stopping)
            if pending and waited_stopping >= 10:
                raise ConnectionError(f"runners {[calls.index(call) for call in pending]} not back 10 s after the stop")
            if pending and waited % 60 == 0:
                print(
                    f"warning: --env-runners: runners {[calls.index(call) for call in pending]} not back after {waited} s"
                    " (slow envs, or Ray restarting them: it waits for free CPUs)",
                    file=sys.stderr,
                )
        try:
            return self.ray.get(calls)
        except self.ray.exceptions.RayError as e:
            if not self.run.stopping:  # a runner's error: its traceback, then the run stops
                print(e, file=sys.stderr)
            raise ConnectionError("an env runner failed") from e

    def summary(self):  # for summary.json
        return dict(runner_nodes=self.nodes, nodes_used=self.all_nodes, runner_restarts=self.restarts)

    def close(self):
        self.ray.shutdown()


def main(args: Args):
    speed_flags(args)  # before any work: the speed flags as this machine can run them
    # Runners: start_run's steps, with Ray joined before --resume cuts the resumed run's metrics.csv back and before the
    # run folder is made (too few CPUs: both left as they were)
    model = check_args(args)  # Run: (Runners: start_run's steps, below)
    runners = Runners(args)
    saved = resume(args) if args.resume else None  # Run:
    columns = "learning_rate value_loss policy_loss entropy old_approx_kl approx_kl clipfrac explained_variance"
    # the run's folder, named as in CleanRL (--capture-video's videos go there)
    run_dir = f"{args.output_dir}/{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_dir = args.resume or run_dir  # Run: --resume: the resumed run's
    run = Run(args, saved, model).open(run_dir, columns.split())  # Run: (Runners: as start_run)
    batch_size = int(args.num_envs * args.num_steps)
    minibatch_size = int(batch_size // args.num_minibatches)
    num_iterations = args.total_timesteps // batch_size

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # Runners: the envs are theirs (NEXT_STEP autoreset, as in the core file); one made here gives the spaces
    runners.start(run)  # Run: (its videos go to the run's folder)
    probe = make_env(args.env_id, -1, False, None, args.gamma)()
    obs_dim, action_dim = int(np.prod(probe.observation_space.shape)), int(np.prod(probe.action_space.shape))
    probe.close()

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

    # Runners: each runner starts the game in its envs (seeded as the core file seeds them) and carries on from there
    # the observation statistics the policy acts with (useless without them, CleanRL #425): the file's, else training's
    obs_rms = run.model["obs_rms"] if args.eval_model else None  # Run:
    # --eval-model: the agent's weights; --resume: the learned parts and the random streams as the checkpoint has them
    # (Runners: and the runners' envs), and the loop's values below. A second Ctrl-C or a lost runner ends the loop.
    # Runners: envs None (the runners have them)
    with run.loop(None, dict(agent=agent, optimizer=ppo.optimizer), "agent") as saved:  # Run:
        if saved:  # Run: the loop's values, from the checkpoint
            runners.set_state(saved["runners"])  # Runners: their envs, and their action noise
            obs_rms = saved["obs_rms"]  # Runners: (next_obs and next_done are the runners')
            global_step, iterations = saved["log"]["step"], iterations[saved["iteration"] :]
        for iteration in iterations:
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / num_iterations
                # fill_, not copy_: a float copy_ blocks on CUDA
                ppo.optimizer.param_groups[0]["lr"].fill_(frac * args.learning_rate)

            # Runners: each runner's rollout with these weights, gathered in env order into the host rows
            next_obs, episodes, rms = runners.sample(agent, stage)
            run.episodes += episodes
            global_step += args.num_envs * args.num_steps

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

            # env 0's NormalizeObservation statistics (each env keeps its own; Runners: runner 0's, from its rollout)
            obs_rms = obs_statistics(rms)  # Run: for the checkpoint and model.pt
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
                # Runners: each runner's envs, where they are, and its action noise, asked for when a checkpoint is
                # saved (next_obs and next_done are theirs)
                runners=runners.state,
                iteration=iteration,
                obs_rms=obs_rms,
            ):
                break

    # the evaluation's policy, deterministic: the mean action, on observations normalized as in training (frozen)
    def act(obs):  # Run:
        normalized = (obs - obs_rms["mean"].numpy()) / np.sqrt(obs_rms["var"].numpy() + 1e-8)
        normalized = np.clip(normalized, -10, 10).astype(np.float32)
        return agent.actor_mean(torch.from_numpy(normalized).to(device)).cpu().numpy()

    state = run.finish(  # Run: summary.json, and what the tests read (Runners: they end after it)
        act,
        {"agent": "ppo_continuous_action", "model": agent.state_dict(), "obs_rms": obs_rms},
        runners.summary(),  # Runners: the runners, their nodes and restarts, into summary.json
        device=device,
        envs=None,  # Runners: (the runners had them)
        agent=agent,
        ppo=ppo,
        storage=storage,
        obs_rms=obs_rms,
        runners=runners,  # Runners:
    )
    runners.close()  # Runners: a local Ray stops; a cluster's ends this run's runners
    return state  # Runners:


# Appendix: what runs the run (flag checks, evaluation, saved models, env snapshots, the run folder, metrics, checkpoints).
# Each definition that several files share is the same text in each; nothing above depends on the order below.

import collections
import contextlib
import csv
import importlib.util
import json
import pathlib
import socket
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
    # Runners: what they need, but the cluster's CPUs (Runners checks those on joining it)
    check_runners(args)
    model = check_run_flags(args, "ppo_continuous_action")
    if model:  # useless without its observation statistics (CleanRL #425)
        obs_rms = model.get("obs_rms")
        obs_dim = int(np.prod(gym.make(args.env_id).observation_space.shape))
        stats_ok = isinstance(obs_rms, dict) and "count" in obs_rms
        stats_ok = stats_ok and all(getattr(obs_rms.get(k), "shape", None) == (obs_dim,) for k in ("mean", "var"))
        if not stats_ok:
            sys.exit(f"error: --eval-model: {args.eval_model} has no obs statistics (obs_rms) for {obs_dim} observations")
    return model


def check_runners(args: Args):
    """Runners: --env-runners, --env-runner-cpus and --ray-address, checked in one line each and with a bounded wait."""
    check(args, "env_runners", lambda v: 1 <= v < math.inf, "in [1, inf)")
    check(args, "env_runner_cpus", lambda v: 0.0001 <= v < math.inf, "in [0.0001, inf) (Ray's unit)")
    if args.num_envs % args.env_runners:
        sys.exit(f"error: --env-runners: must divide --num-envs ({args.num_envs}) into equal shares, got {args.env_runners}")
    if args.async_envs:
        sys.exit("error: --async-envs: not in this file (the --env-runners Ray actors step the envs, each its share)")
    if importlib.util.find_spec("ray") is None:
        sys.exit(
            "error: --env-runners: needs ray: pip install -r requirements/requirements-ray.txt (or pip install 'ray==2.60.0')"
        )
    # a host:port that does not answer: said now, not after Ray's retries
    if args.ray_address not in (None, "auto"):
        host, _, port = args.ray_address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=10).close()
        except (OSError, ValueError) as e:
            sys.exit(f"error: --ray-address: {args.ray_address} cannot be reached as host:port ({e})")


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
RESUMABLE += ["ray_address", "env_runner_cpus"]  # Runners: where they run
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
            if envs is not None:  # Runners: (envs None: the runners' are put back by main)
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
            if envs is not None:  # Runners: (envs None: a lost runner)
                print(f"error: --async-envs: an env worker died ({type(e).__name__}), the run stops here", file=sys.stderr)
            elif self.stopping:  # Runners: stopping with its Ray cluster, the run stops as asked
                self.status = self.stopping
                # Runners: the last checkpoint, where the run resumes
                kept = "there is none to resume"
                if os.path.exists(os.path.join(self.run_dir, "checkpoint.pt")):
                    kept = f"--resume goes on from step {self.part['step']}"
                print(f"warning: --env-runners: {e}: no checkpoint at this step, {kept}", file=sys.stderr)
            else:  # Runners: (the runner's error is printed above)
                print(f"error: --env-runners: {e}, the run stops here", file=sys.stderr)
        if envs is None:  # Runners: (the runners close their envs)
            return
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
        # Runners: their envs (the loop value `runners` asks them, here, when a checkpoint is saved)
        if self.checkpoint_due(global_step) and envs is None:
            self.save_checkpoint(global_step, learned=states(learned), **dict(loop, runners=loop["runners"]()))
        elif self.checkpoint_due(global_step):  # Runners:
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


def explained_variance(values, returns, w):
    """1 - Var[returns - values] / Var[returns] over the valid rows, on the device. With no variance to explain: 0
    (sklearn's convention; CleanRL logs nan, which would read as diverged)."""
    n = w.sum().clamp(min=1.0)

    def var(x):  # the variance over the valid rows
        return (w * (x - (w * x).sum() / n) ** 2).sum() / n

    var_y = var(returns)
    return torch.where(var_y == 0, torch.zeros_like(var_y), 1 - var(returns - values) / var_y)


def obs_statistics(rms):
    """NormalizeObservation's running statistics (env 0's: each env keeps its own), as checkpoints and model.pt keep them."""
    return {"mean": torch.tensor(rms.mean), "var": torch.tensor(rms.var), "count": float(rms.count)}


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
