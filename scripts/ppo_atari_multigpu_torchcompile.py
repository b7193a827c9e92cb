# PPO on Atari with envpool, data-parallel under torchrun: ppo_atari_torchcompile.py, with CleanRL's
# ppo_atari_multigpu.py's idea. Each rank (a process per GPU, or per share of a CPU) runs its own --num-envs envs and
# its own minibatches; after each minibatch's backward the ranks average their gradients in one flat all_reduce, so
# every rank takes the same optimizer step and holds the same parameters. Rank 0 alone writes the run folder.
#   torchrun --standalone --nproc-per-node 2 scripts/ppo_atari_multigpu_torchcompile.py
# Everything else is the core file's text; each line of this idea is marked "DDP:".
# As in the core file: --compile (torch.compile) and --cudagraphs (tensordict's CudaGraphModule) are independent; with
# neither it is the lean eager version. Each speed trick is marked "Speed:" where it is used.
import ctypes
import gc
import os  # Run: (--exp-name's default)
import random
import sys
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Literal

import envpool
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
import tyro
from tensordict.nn import CudaGraphModule
from torch.distributions.categorical import Categorical
from torch.utils._pytree import tree_map_only

# compile modes that capture CUDA graphs, and their stand-ins without CUDA
GRAPH_MODES = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]  # Run:
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
    save_model: bool = False  # Run:
    """whether to save the agent to `model.pt` in the run folder (at the end, also on Ctrl-C)"""
    eval_episodes: int = 0  # Run:
    """episodes of the deterministic policy to play after training, on freshly seeded envs (0: none)"""
    eval_model: str | None = None  # Run:
    """a saved `model.pt` to evaluate instead of training (--eval-episodes, 10 if not given)"""
    output_dir: str = "runs"  # Run:
    """where the run folder (metrics.csv, summary.json, model.pt) is written"""
    checkpoint_interval: int = 100_000  # Run:
    """env steps between two checkpoints (checkpoint.pt in the run folder; also on Ctrl-C, SIGTERM, SIGUSR1; 0: none)"""
    resume: str | None = None  # Run:
    """a run folder to go on from, at its checkpoint.pt: the same flags, --total-timesteps may grow"""
    measure_burnin: int = 5  # Run:
    """iterations (rollout + update) left out of the steps/s measurement"""
    log_interval: int = 1  # Run:
    """iterations between two rows of metrics.csv"""
    compile: bool = False
    """if toggled, the policy, GAE and the update are compiled with torch.compile"""
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    """torch.compile's mode (needs --compile); reduce-overhead and max-autotune capture CUDA graphs (not with --cudagraphs)"""
    cudagraphs: bool = False
    """if toggled, the policy and the update functions replay as CUDA graphs (tensordict's CudaGraphModule; needs CUDA)"""
    # DDP: the backend of the ranks' all_reduce
    dist_backend: Literal["nccl", "gloo"] | None = None
    """torchrun's all_reduce backend for the gradients (default: nccl with CUDA, else gloo; gloo not with --cudagraphs)"""

    # Algorithm specific arguments
    env_id: str = "Breakout-v5"
    """the id of the environment (an envpool Atari id)"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
    """the number of parallel game environments"""
    envpool_threads: int = 0
    """the threads that step the envs (envpool's num_threads; 0: envpool's choice, one per env up to the core count)"""
    async_envs: bool = False  # Run:
    """the gymnasium scripts' flag, refused here: envpool already steps the envs in threads of its own (--envpool-threads)"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""


class EpisodeTracker:
    """Full-game scores, CleanRL's recipe for envpool: with episodic life, `term` marks every life loss and the reward
    is clipped, so sum the raw `info["reward"]` until game over (`info["terminated"]`) or truncation.

    The length counts the steps the agent acted in (the NEXT_STEP reset steps after a life loss are not counted),
    which equals envpool's `info["elapsed_step"]` at game over."""

    def __init__(self, num_envs):
        self.episode_returns = np.zeros(num_envs, dtype=np.float64)
        self.episode_lengths = np.zeros(num_envs, dtype=np.int64)

    def step(self, info, truncations, valid):
        """Add one step of the pool; returns [(score, length)] for the games that ended on it."""
        self.episode_returns += info["reward"]
        self.episode_lengths += valid
        game_over = info["terminated"].astype(bool) | truncations
        finished = [(self.episode_returns[i], self.episode_lengths[i]) for i in np.flatnonzero(game_over)]
        self.episode_returns[game_over] = 0
        self.episode_lengths[game_over] = 0
        return finished


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_value(self, x):
        # Speed: x arrives as uint8, converted on the device
        return self.critic(self.network(x.float() / 255.0))

    def get_action_and_value(self, x, action=None):
        # Speed: x arrives as uint8, converted on the device
        hidden = self.network(x.float() / 255.0)
        logits = self.actor(hidden)
        # Speed: argument checks would sync with the GPU
        probs = Categorical(logits=logits, validate_args=False)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def compute_gae(rewards, values, next_value, terms, dones, valid, gamma: float, gae_lambda: float):
    """GAE over a rollout of shape (num_steps, num_envs), NEXT_STEP autoreset; the same result as ppo_atari.py's loop.

    Row t holds obs[t], the action taken, and what step t returned: rewards[t], terms[t] (a life loss counts, as in
    CleanRL) and dones[t] = term | trunc. The row after a done is envpool's reset step (valid = 0): the action was
    ignored, so it is no transition; its advantage is 0 and no trace crosses it. obs[t+1] is the true next observation,
    so a truncation bootstraps from values[t+1] and a termination does not bootstrap.

    Speed: no loop over time (which torch.compile would unroll): A[t] = delta[t] + g*l*(1-done[t])*A[t+1] solved as
    A[t] = sum_{k>=t} (g*l)^(k-t) [no done in t..k-1] delta[k], one masked (num_steps x num_steps) contraction per env:
    at Atari's 128 steps a few small matrices (PPO continuous's 2048 steps take a parallel scan instead)."""
    num_steps = rewards.shape[0]
    next_values = torch.cat([values[1:], next_value.reshape(1, -1)])
    deltas = rewards + gamma * next_values * (1.0 - terms) - values
    steps = torch.arange(num_steps, device=rewards.device, dtype=rewards.dtype)
    gap = steps[None, :] - steps[:, None]  # k - t
    discount = torch.where(gap >= 0, torch.pow(gamma * gae_lambda, gap.clamp(min=0)), torch.zeros_like(gap))
    # dones before step k; equal for t and k iff no done in t..k-1
    episode = torch.cumsum(dones, 0) - dones
    same = (episode[None, :, :] == episode[:, None, :]).to(rewards.dtype)
    advantages = (discount[:, :, None] * same * deltas[None, :, :]).sum(1) * valid
    returns = advantages + values
    return advantages, returns


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


def malloc_keep_heap():
    """Speed: on a CPU, glibc's malloc keeps the update's large buffers (a minibatch as floats is 29 MB) instead of giving
    them back to the OS after each minibatch and faulting them in again page by page: it never trims the
    heap's top (M_TRIM_THRESHOLD, -1) and serves blocks up to 32 MB from the heap, not mmap (M_MMAP_THRESHOLD, -3)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 2**31 - 1)
        libc.mallopt(-3, 32 << 20)
    except (OSError, AttributeError):  # no glibc (macOS, musl): the allocator as it is
        pass


def make_ppo(args: Args, agent, device):
    """The optimizer and the three hot functions: policy (one rollout step), gae (after the rollout), update (one
    minibatch), compiled and/or graph-captured as asked."""
    # DDP: the ranks that average their gradients
    world_size = dist.get_world_size() if dist.is_initialized() else 1
    # Speed: the lr is a 0-d tensor updated in place (no recompile, no new capture)
    lr = torch.tensor(args.learning_rate, device=device)
    optimizer = optim.Adam(agent.parameters(), lr=lr, eps=1e-5, **adam_settings(args.compile, args.cudagraphs, device))

    def policy(obs):
        # the trained agent itself (the latest weights) without autograd, to compile and capture alone
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(obs)
            return action, logprob, value.flatten()

    def gae(next_obs, rewards, values, terms, dones, valid):
        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
        return compute_gae(rewards, values, next_value, terms, dones, valid, args.gamma, args.gae_lambda)

    def update(obs, actions, logprobs, advantages, returns, values, valid, idx):
        """One minibatch step. The reset rows weigh 0 in every mean (w * x).sum() / w.sum(); shapes stay fixed."""
        # Speed: the minibatch is gathered inside the (compiled) update from indices drawn on the device.
        obs = obs[idx]
        actions = actions[idx]
        logprobs = logprobs[idx]
        advantages = advantages[idx]
        returns = returns[idx]
        values = values[idx]
        w = valid[idx]  # reset rows stay, with weight 0
        optimizer.zero_grad()
        n = w.sum().clamp(min=1.0)
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(obs, actions)
        logratio = newlogprob - logprobs
        ratio = logratio.exp()

        with torch.no_grad():
            # calculate approx_kl http://joschu.net/blog/kl-approx.html
            approx_kl = (w * ((ratio - 1) - logratio)).sum() / n

        if args.norm_adv:  # mean and (unbiased) std over the valid rows
            mean = (w * advantages).sum() / n
            std = ((w * (advantages - mean) ** 2).sum() / (n - 1).clamp(min=1.0)).sqrt()
            advantages = (advantages - mean) / (std + 1e-8)

        # Policy loss
        pg_loss1 = -advantages * ratio
        pg_loss2 = -advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
        pg_loss = (w * torch.max(pg_loss1, pg_loss2)).sum() / n

        # Value loss
        newvalue = newvalue.view(-1)
        if args.clip_vloss:
            v_loss_unclipped = (newvalue - returns) ** 2
            v_clipped = values + torch.clamp(newvalue - values, -args.clip_coef, args.clip_coef)
            v_loss_clipped = (v_clipped - returns) ** 2
            v_loss = 0.5 * (w * torch.max(v_loss_unclipped, v_loss_clipped)).sum() / n
        else:
            v_loss = 0.5 * (w * (newvalue - returns) ** 2).sum() / n

        entropy_loss = (w * entropy).sum() / n
        loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

        loss.backward()
        if world_size > 1:
            # DDP: the ranks' gradients, and approx_kl for --target-kl, averaged in one flat all_reduce: a sum of
            # world_size-th parts (gloo has no mean)
            grads = [p.grad for p in agent.parameters()]
            flat = torch.cat([g.flatten() for g in grads] + [approx_kl.view(1)]) / world_size
            dist.all_reduce(flat)
            averaged = [part.view_as(g) for part, g in zip(flat[:-1].split([g.numel() for g in grads]), grads)]
            torch._foreach_copy_(grads, averaged)
            approx_kl = flat[-1]
        nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
        optimizer.step()
        # Speed: the statistics stay on the device, read once per logged iteration
        return dict(  # Run: the logged values
            value_loss=v_loss.detach(),
            policy_loss=pg_loss.detach(),
            entropy=entropy_loss.detach(),
            old_approx_kl=(w * -logratio.detach()).sum() / n,
            approx_kl=approx_kl,
            clipfrac=(w * ((ratio.detach() - 1.0).abs() > args.clip_coef).float()).sum() / n,
        )
        # Cut: return dict(approx_kl=approx_kl)

    if args.compile:  # Speed: torch.compile fuses the small ops of each function
        policy = compiled(policy, args.compile_mode)
        gae = compiled(gae, args.compile_mode, fullgraph=True)
        update = compiled(update, args.compile_mode)
    if args.cudagraphs:  # Speed: CUDA graphs replay each function's kernels with one launch
        policy = graphed(policy, args.compile)
        gae = graphed(gae, args.compile)
        update = graphed(update, args.compile)
    return SimpleNamespace(optimizer=optimizer, policy=policy, gae=gae, update=update)


def main(args: Args):
    speed_flags(args)  # before any work: the speed flags as this machine can run them
    # DDP: torchrun sets them: this process's rank among world_size
    rank = int(os.environ.get("RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    # DDP: rank 0 alone writes the run folder; the others check the flags, read the checkpoint, and log nothing
    if rank == 0:  # Run:
        run = start_run(  # Run: flags checked, the run folder, metrics
            args,
            args.resume or f"{args.output_dir}/{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}",
            "learning_rate value_loss policy_loss entropy old_approx_kl approx_kl clipfrac explained_variance",
        )
    else:
        model = check_args(args)  # DDP: the flags checked and the files read as rank 0 does
        run = QuietRun(args, load_checkpoint(args) if args.resume else None, model)
    batch_size = int(args.num_envs * args.num_steps)
    minibatch_size = int(batch_size // args.num_minibatches)
    # DDP: every rank's steps count
    num_iterations = args.total_timesteps // (batch_size * world_size)

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cpu")
    # DDP: this rank's GPU (gloo's ranks may share them, nccl's may not: check_args), made current
    if args.cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        torch.cuda.set_device(device)  # the current device, which CUDA graphs capture on

    # env setup: envpool 1.x returns gymnasium's 5-tuple and autoresets NEXT_STEP (the step after a done is a reset)
    envs = envpool.make(
        args.env_id,
        env_type="gymnasium",
        num_envs=args.num_envs,
        episodic_life=True,
        reward_clip=True,
        seed=args.seed + rank * args.num_envs,  # DDP: each rank its own envs' seeds
        num_threads=args.envpool_threads,
    )
    obs_shape = envs.single_observation_space.shape
    # DDP: a process per GPU (or share of the CPU), each with its own envs and minibatches
    if world_size > 1:
        dist.init_process_group(args.dist_backend, device_id=device if args.cuda else None)
    tracker = EpisodeTracker(args.num_envs)

    agent = Agent(envs.single_action_space.n).to(device)
    if device.type == "cpu":
        # Speed: on a CPU, convolution weights in channels-last layout, which oneDNN's convolutions prefer
        agent = agent.to(memory_format=torch.channels_last)
        malloc_keep_heap()  # Speed: the update's large buffers stay in the heap
    ppo = make_ppo(args, agent, device)
    # DDP: the same initial parameters on every rank (made from --seed), then each rank its own draws
    if world_size > 1:
        torch.manual_seed(args.seed + rank)

    # ALGO LOGIC: Storage setup. Speed: preallocated once, observations as uint8 (4x less to move); the envs' values go
    # into `host` through its numpy views (`stage`), then to the device (`storage`) once per rollout
    host = dict(
        rewards=torch.zeros((args.num_steps, args.num_envs)),
        terms=torch.zeros((args.num_steps, args.num_envs)),
        dones=torch.zeros((args.num_steps, args.num_envs)),
        valid=torch.zeros((args.num_steps, args.num_envs)),
    )
    stage = {k: v.numpy() for k, v in host.items()}
    storage = dict(
        obs=torch.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=torch.uint8, device=device),
        actions=torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device),
        logprobs=torch.zeros((args.num_steps, args.num_envs), device=device),
        values=torch.zeros((args.num_steps, args.num_envs), device=device),
    )
    storage.update({k: torch.zeros(v.shape, device=device) for k, v in host.items()})

    global_step = 0
    iterations = range(1, num_iterations + 1)

    # TRY NOT TO MODIFY: start the game
    next_obs, _ = envs.reset()
    next_obs = torch.from_numpy(next_obs).to(device, non_blocking=True)
    next_done = np.zeros(args.num_envs, dtype=bool)
    # --eval-model: the agent's weights; --resume: the learned parts and the random streams as the checkpoint has them,
    # and the loop's values below (envpool's envs restart). A second Ctrl-C ends the loop.
    with run.loop(envs, dict(agent=agent, optimizer=ppo.optimizer), "agent") as saved:  # Run:
        if saved:  # Run: the loop's values, from the checkpoint
            global_step, iterations = saved["log"]["step"], iterations[saved["iteration"] :]
            set_random_streams(saved["ranks"][rank])  # DDP: each rank's own
        for iteration in iterations:
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / num_iterations
                # in place, no sync, no recompile
                ppo.optimizer.param_groups[0]["lr"].fill_(frac * args.learning_rate)

            for step in range(0, args.num_steps):
                global_step += args.num_envs * world_size  # DDP: every rank's steps
                storage["obs"][step] = next_obs
                # the step after a done is envpool's reset step, no transition
                step_valid = ~next_done
                stage["valid"][step] = step_valid

                # ALGO LOGIC: action logic
                action, logprob, value = ppo.policy(next_obs)
                storage["values"][step] = value
                storage["actions"][step] = action
                storage["logprobs"][step] = logprob

                # TRY NOT TO MODIFY: execute the game and log data. The action's copy to the host is the loop's one sync.
                next_obs, reward, terminations, truncations, info = envs.step(action.cpu().numpy())
                next_done = np.logical_or(terminations, truncations)
                stage["rewards"][step] = reward
                stage["terms"][step] = terminations
                stage["dones"][step] = next_done
                next_obs = torch.from_numpy(next_obs).to(device, non_blocking=True)
                finished = tracker.step(info, truncations, step_valid)  # full-game scores
                run.episodes += finished  # Run:
                # Cut: for r, l in finished: print(f"global_step={global_step}, episodic_return={r}, episodic_length={l}")

            for k in host:
                storage[k].copy_(host[k], non_blocking=True)
            # bootstrap value if not done; Speed: GAE on the device, no Python loop over steps
            advantages, returns = ppo.gae(
                next_obs, storage["rewards"], storage["values"], storage["terms"], storage["dones"], storage["valid"]
            )

            # flatten the batch
            batch = dict(
                obs=storage["obs"].reshape((-1,) + obs_shape),
                actions=storage["actions"].reshape(-1),
                logprobs=storage["logprobs"].reshape(-1),
                advantages=advantages.reshape(-1),
                returns=returns.reshape(-1),
                values=storage["values"].reshape(-1),
                valid=storage["valid"].reshape(-1),
            )

            clipfrac_sum = torch.zeros((), device=device)  # Run: logged
            # Optimizing the policy and value network. The reset rows weigh 0 in every mean (w * x).sum() / w.sum().
            for epoch in range(args.update_epochs):
                b_inds = torch.randperm(batch_size, device=device)  # Speed: shuffled on the device
                for start in range(0, batch_size, minibatch_size):
                    mb_inds = b_inds[start : start + minibatch_size]
                    out = ppo.update(**batch, idx=mb_inds)
                    clipfrac_sum += out["clipfrac"]  # Run:

                # a sync per epoch, only with --target-kl
                if args.target_kl is not None and out["approx_kl"] > args.target_kl:
                    break

            # DDP: every rank stops at the end of the same iteration if any was asked to (never inside an all_reduce):
            # a signal only asks (Run.ask_to_stop), the stop is decided here, once per iteration, with one all_reduce
            # of whether each rank was asked by Ctrl-C or by SIGTERM; one asked later waits for the next iteration
            run.stopping = run.asked
            if world_size > 1:
                asked = torch.tensor([float(run.asked == s) for s in ("interrupted", "terminated")], device=device)
                dist.all_reduce(asked, op=dist.ReduceOp.MAX)
                run.stopping = "terminated" if asked[1] else "interrupted" if asked[0] else None
            # DDP: every rank's random streams, gathered when a checkpoint is due, for rank 0's
            ranks = None
            if run.checkpoint_due(global_step):
                ranks = [random_streams()] * world_size
                if world_size > 1:
                    dist.all_gather_object(ranks, random_streams())
            # The iteration counted for steps/s; a row of metrics.csv every --log-interval iterations (Speed: the values
            # read then, in one transfer); a checkpoint every --checkpoint-interval steps; Ctrl-C, SIGTERM or SIGUSR1
            # stop the run here, after one (DDP: rank 0 writes it, with every rank's random streams).
            if run.step(  # Run:
                global_step,
                1,
                rows=args.log_interval * batch_size * world_size,  # DDP: every rank's steps
                values=dict(
                    out,
                    clipfrac=clipfrac_sum / ((epoch + 1) * args.num_minibatches),
                    learning_rate=ppo.optimizer.param_groups[0]["lr"],
                    explained_variance=explained_variance(batch["values"], batch["returns"], batch["valid"]),
                ),
                iteration=iteration,
                ranks=ranks,  # DDP:
            ):
                break

    # DDP: the other ranks end as rank 0 ended; rank 0 alone writes the run folder (a stop asked after the loop's last
    # iteration: before the evaluation)
    run.stopping = run.stopping or run.asked
    state = dict(status=run.status, args=args, run=run)
    if world_size > 1:  # DDP: the process group ends with the loop
        dist.destroy_process_group()
    if rank > 0:  # DDP:
        return state
    # the evaluation's policy, deterministic: the arg-max action; model.pt: the agent
    return run.finish(  # Run: summary.json, and what the tests read
        lambda obs: agent.actor(agent.network(torch.from_numpy(obs).to(device) / 255.0)).argmax(-1).cpu().numpy(),
        {"agent": "ppo_atari", "model": agent.state_dict()},
        device=device,
        envs=envs,
        agent=agent,
        ppo=ppo,
        storage=storage,
        stage=stage,
    )
    # Cut: envs.close()


# Appendix: what runs the run (flag checks, evaluation, saved models, env snapshots, the run folder, metrics, checkpoints).
# Each definition that several files share is the same text in each; nothing above depends on the order below.

import contextlib
import csv
import json
import math
import pathlib
import signal
import time
from dataclasses import asdict

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
    if args.env_id not in envpool.list_all_envs() or type(envpool.make_spec(args.env_id)).__name__ != "AtariEnvSpec":
        sys.exit(f"error: --env-id: {args.env_id} is no envpool Atari game (such as Breakout-v5, Pong-v5)")
    check(args, "seed", lambda v: 0 <= v < 2**31, "in [0, 2**31)")  # numpy seeds stay below 2**32
    check(args, "checkpoint_interval", lambda v: 0 <= v < math.inf, "in [0, inf)")
    non_negative = "measure_burnin eval_episodes clip_coef ent_coef vf_coef envpool_threads"
    check(args, non_negative, lambda v: 0 <= v < math.inf, "in [0, inf)")
    check(args, "gamma gae_lambda", lambda v: 0 <= v <= 1, "in [0, 1]")
    counts = "num_envs num_steps num_minibatches update_epochs log_interval"
    check(args, counts, lambda v: 1 <= v < math.inf, "in [1, inf)")
    check(args, "learning_rate max_grad_norm target_kl", lambda v: 0 < v < math.inf, "in (0, inf)")
    world_size = int(os.environ.get("WORLD_SIZE", 1))  # DDP: torchrun sets it, the number of ranks
    batch = args.num_envs * args.num_steps
    rollouts = batch * world_size  # DDP: one rollout of every rank
    check(args, "total_timesteps", lambda v: v >= rollouts, f"at least --num-envs x --num-steps x ranks ({rollouts})")
    check(args, "num_minibatches", lambda v: batch % v == 0, f"a divisor of the batch --num-envs x --num-steps ({batch})")
    if args.async_envs:  # the gymnasium scripts' flag (run.sh shares their command lines)
        sys.exit("error: --async-envs: envpool steps its envs in threads of its own (how many: --envpool-threads)")
    if world_size > 1:  # DDP: what torchrun's data parallelism needs
        if args.eval_model:
            sys.exit("error: --eval-model: an evaluation runs in one process, not under torchrun")
        cuda = args.cuda and torch.cuda.is_available()
        if args.dist_backend is None:  # the default: nccl with CUDA, else gloo
            args.dist_backend = "nccl" if cuda else "gloo"
        if not dist.is_backend_available(args.dist_backend) or args.dist_backend == "nccl" and not cuda:
            reason = "without --cuda" if torch.cuda.is_available() else "no CUDA"
            sys.exit(f"error: --dist-backend: {args.dist_backend} is not available here ({reason})")
        gpus = torch.cuda.device_count() if cuda else 0
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", 1))  # the ranks on this machine
        if args.dist_backend == "nccl" and local_ranks > gpus:
            sys.exit(
                f"error: --dist-backend nccl: needs a GPU per rank, {local_ranks} ranks here for {gpus} GPUs (gloo shares)"
            )
        if args.dist_backend == "gloo" and args.cudagraphs and cuda:
            sys.exit("error: --cudagraphs: not with --dist-backend gloo, whose all_reduce goes through the host (no capture)")
    return check_run_flags(args, "ppo_atari")


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
    # DDP: the checkpoint holds each rank's own random streams
    ranks, world_size = len(saved["ranks"]), int(os.environ.get("WORLD_SIZE", 1))
    if ranks != world_size:
        sys.exit(f"error: --resume: the run resumed ran on {ranks} ranks, not {world_size} (torchrun --nproc-per-node)")
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
        self.asked = None  # DDP: a signal's stop, which the ranks agree on (several ranks)
        self.evaluating = False  # (a signal stops the evaluation at once)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):  # Ctrl-C, kill, Slurm
            signal.signal(signum, self.ask_to_stop)

    def ask_to_stop(self, signum, frame):  # Ctrl-C, SIGTERM or SIGUSR1 (Slurm)
        """The loop stops after its step, checkpoint first; a second Ctrl-C, or one during the evaluation, at once."""
        # DDP: asked, and the loop stops where every rank agrees (main, once per iteration)
        again = self.asked == "interrupted" and signum == signal.SIGINT
        self.asked = self.asked or ("interrupted" if signum == signal.SIGINT else "terminated")
        if again or self.evaluating:
            self.stopping = self.stopping or self.asked  # DDP:
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
            set_env_state(envs, self.saved["envs"])
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
        world_size = int(os.environ.get("WORLD_SIZE", 1))  # DDP: torchrun's ranks
        summary.update(cpu_count=os.cpu_count(), torch_version=torch.__version__, world_size=world_size)
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


class QuietRun(Run):
    """DDP: the run of every rank but rank 0, which alone writes the run folder: no rows, no summary; a signal stops
    the rank as it stops rank 0."""

    def count_update(self, global_step, updates=1):  # DDP: rank 0 measures
        return None

    def row(self, global_step, metrics):  # DDP: rank 0 writes the rows
        return False

    def checkpoint(self, global_step, learned, envs, **loop):  # DDP: rank 0 writes it
        if self.checkpoint_due(global_step):
            self.part["step"] = global_step
        if self.stopping:
            self.status = self.stopping
        return self.stopping is not None


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


def evaluate(args, act, video_dir=None):  # envpool renders no video
    """--eval-episodes full games of `act` (observations -> actions, numpy) on one env made as training's, seeded apart;
    their full-game scores, as in training (EpisodeTracker)."""
    env = envpool.make(
        args.env_id, env_type="gymnasium", num_envs=1, episodic_life=True, reward_clip=True, seed=args.seed + 100_000
    )  # training's envs are seeded seed .. seed + num_envs - 1
    tracker = EpisodeTracker(1)
    returns = []
    obs, _ = env.reset()
    done = np.zeros(1, dtype=bool)
    while len(returns) < args.eval_episodes:
        valid = ~done  # the step after a done is envpool's reset step: its action is ignored
        obs, _, terminations, truncations, info = env.step(act(obs))
        done = np.logical_or(terminations, truncations)
        returns += [float(score) for score, _ in tracker.step(info, truncations, valid)]
    env.close()
    return returns


def env_state(envs):
    """envpool's envs cannot be saved: a checkpoint holds none of their state."""
    return None


def set_env_state(envs, state):
    """A resumed run's envpool envs start new episodes (the rest of the run goes on exactly)."""
    print("warning: --resume: envpool's envs cannot be saved: they start new episodes", file=sys.stderr)


if __name__ == "__main__":
    state = main(tyro.cli(Args))
    sys.exit({"interrupted": 130, "terminated": 143, "diverged": 1, "failed": 1}.get(state["status"], 0))
