# DQN for discrete actions, the fast variant of dqn.py: the same algorithm, defaults and learning,
# rewritten for speed. --compile (torch.compile) and --cudagraphs (tensordict's CudaGraphModule) are independent;
# with neither it is the lean eager version. Each speed trick is marked "Speed:" where it is used.
import csv
import json
import math
import os
import pathlib
import random
import signal
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tqdm
import tyro
from tensordict.nn import CudaGraphModule
from torch.utils._pytree import tree_map_only
from torch.utils.tensorboard import SummaryWriter

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
    """if toggled, cuda will be used when available (the CPU otherwise, with a warning)"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases (needs `wandb`)"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances: of the evaluation episodes if any, else of the first env"""
    save_model: bool = False
    """whether to save the agent to `model.pt` in the run folder (at the end, also on Ctrl-C)"""
    eval_episodes: int = 0
    """episodes of the deterministic policy to play after training, on freshly seeded envs (0: none)"""
    eval_model: str | None = None
    """a saved `model.pt` to evaluate instead of training (--eval-episodes, 10 if not given)"""
    output_dir: str = "runs"
    """where the run folder (metrics.csv, summary.json, model.pt, videos) is written"""
    measure_burnin: int = 10
    """updates after learning starts that are left out of the steps/s measurement"""
    log_interval: int = 100
    """environment steps between two rows of metrics.csv"""
    compile: bool = False
    """if toggled, the update and the policy are compiled with torch.compile"""
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    """torch.compile's mode (needs --compile); reduce-overhead and max-autotune capture CUDA graphs (not with --cudagraphs)"""
    cudagraphs: bool = False
    """if toggled, the update and the policy are replayed as CUDA graphs (tensordict's CudaGraphModule; needs CUDA)"""

    # Algorithm specific arguments
    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    async_envs: bool = False
    """if toggled, each env steps in its own process (gymnasium's AsyncVectorEnv, shared memory), not all in this one"""
    buffer_size: int = 10000
    """the replay memory buffer size"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 1.0
    """the target network update rate"""
    target_network_frequency: int = 500
    """the timesteps it takes to update the target network"""
    batch_size: int = 128
    """the batch size of sample from the replay memory"""
    start_e: float = 1.0
    """the starting epsilon for exploration"""
    end_e: float = 0.05
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.5
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    learning_starts: int = 10000
    """timestep to start learning"""
    train_frequency: int = 10
    """the frequency of training"""


def check_args(args: Args):
    """Bad input ends the run here, before any work, with one line naming the flag (`check` is in the plumbing below).
    What this machine lacks falls back with a warning. The one place that changes `args`."""
    # gymnasium ids such as CartPole-v1, Acrobot-v1
    env = gym.make(args.env_id) if args.env_id in gym.registry else None
    flat_box = env is not None and isinstance(env.observation_space, gym.spaces.Box) and len(env.observation_space.shape) == 1
    if not flat_box or not isinstance(env.action_space, gym.spaces.Discrete) or env.action_space.start != 0:
        spaces = "an unknown environment" if env is None else (env.observation_space, env.action_space)
        sys.exit(f"error: --env-id: {args.env_id} is {spaces}; DQN needs a flat Box and Discrete actions from 0")
    check(args, "seed", lambda v: 0 <= v < 2**31, "in [0, 2**31)")  # numpy seeds stay below 2**32
    check(args, "learning_starts measure_burnin eval_episodes", lambda v: 0 <= v < math.inf, "in [0, inf)")
    check(args, "gamma start_e end_e", lambda v: 0 <= v <= 1, "in [0, 1]")
    check(args, "tau exploration_fraction", lambda v: 0 < v <= 1, "in (0, 1]")
    counts = "num_envs batch_size total_timesteps train_frequency target_network_frequency log_interval"
    check(args, counts, lambda v: 1 <= v < math.inf, "in [1, inf)")
    check(args, "learning_rate", lambda v: 0 < v < math.inf, "in (0, inf)")
    check(args, "buffer_size", lambda v: v >= args.batch_size, f"at least --batch-size ({args.batch_size})")
    if args.eval_model:  # evaluation only: no training
        load_model(args, "dqn")  # a bad file ends the run here, before any work
        args.total_timesteps, args.eval_episodes = 0, args.eval_episodes or 10
    check_fast_flags(args)  # (its warnings after every error above)


def check_fast_flags(args: Args):
    """The fast file's own flags: what cannot go together is refused; without CUDA, CUDA and its graphs fall back."""
    if args.compile_mode != "default" and not args.compile:
        sys.exit(f"error: --compile-mode {args.compile_mode}: needs --compile")
    if args.compile_mode in GRAPH_MODES and args.cudagraphs:
        sys.exit(f"error: --compile-mode {args.compile_mode}: has its own CUDA graphs, not with --cudagraphs")
    if args.cuda and not torch.cuda.is_available():
        print("warning: --cuda: CUDA is not available, running on the CPU", file=sys.stderr)
        args.cuda = False
    if not args.cuda and args.cudagraphs:
        print("warning: --cudagraphs: needs CUDA, running without CUDA graphs", file=sys.stderr)
        args.cudagraphs = False
    if not args.cuda and args.compile_mode in GRAPH_MODES:
        print(f"warning: --compile-mode {args.compile_mode}: needs CUDA, running without CUDA graphs", file=sys.stderr)
        args.compile_mode = GRAPH_MODES[args.compile_mode]


def make_env(env_id, seed, idx, capture_video, video_dir):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, video_dir)
        else:
            env = gym.make(env_id)
        env.action_space.seed(seed)
        return env

    return thunk


def evaluate(args, act, video_dir):
    """Plays --eval-episodes episodes of `act` (numpy observations -> actions) on one env seeded apart; their returns."""
    env = gym.make(args.env_id, render_mode="rgb_array" if args.capture_video else None)
    env = gym.wrappers.RecordVideo(env, video_dir, episode_trigger=lambda _: True) if args.capture_video else env
    env = gym.wrappers.RecordEpisodeStatistics(env, buffer_length=args.eval_episodes)
    for episode in range(args.eval_episodes):
        # training's envs: seed .. seed + num_envs - 1
        obs, done = env.reset(seed=args.seed + 100_000 + episode)[0], False
        while not done:
            obs, _, terminated, truncated, _ = env.step(act(obs.reshape(1, -1).astype(np.float32))[0])
            done = terminated or truncated
    env.close()
    return [float(r) for r in env.return_queue]


def load_model(args, agent, module=None):
    """--eval-model: the saved file, checked to hold this pair's agent for --env-id (check_args asks before any work,
    so a bad file leaves no run folder), loaded into `module` in place when one is given; the whole file."""
    try:
        saved = torch.load(args.eval_model, map_location="cpu", weights_only=True)
        if saved["agent"] != agent or saved["env_id"] != args.env_id:
            raise ValueError(f"it holds a {saved['agent']} agent for {saved['env_id']}")
        if module is not None:
            module.load_state_dict(saved["model"])
        return saved
    except Exception as e:
        problem = f"{type(e).__name__}: {e}".replace("\n", " ")
        sys.exit(f"error: --eval-model: {args.eval_model} is no {agent} model for {args.env_id} ({problem})")


class ReplayBuffer:
    """One preallocated tensor on the training device, a row per transition.
    Speed: a step is one copy, a sample one gather."""

    def __init__(self, size, obs_dim, device):
        self.size, self.obs_dim, self.pos, self.full = size, obs_dim, 0, False
        # columns, in the baseline's order: obs | action | next_obs | reward | termination
        self.storage = torch.zeros((size, 2 * obs_dim + 3), dtype=torch.float32, device=device)
        # rows filled, as sample() reads it
        self.count = torch.zeros((), dtype=torch.int64, device=device)

    def add(self, obs, next_obs, actions, rewards, terminations):
        # only a termination stops the bootstrap, never a truncation
        rows = np.concatenate([obs, actions[:, None], next_obs, rewards[:, None], terminations[:, None]], 1, dtype=np.float32)
        # Speed: no wait for the device
        rows = torch.from_numpy(rows).to(self.storage.device, non_blocking=True)
        n = len(obs)
        first = min(n, self.size - self.pos)
        self.storage[self.pos : self.pos + first] = rows[:first]
        if first < n:  # (an empty copy would still cost a call per step)
            self.storage[: n - first] = rows[first:]  # wrap around
        if not self.full:
            self.full = self.pos + n >= self.size
            # fill_ of a Python number: no sync
            self.count.fill_(self.size if self.full else self.pos + n)
        self.pos = (self.pos + n) % self.size

    def sample(self, batch_size):  # the columns by name, as views (actions as floats)
        # Speed: indices drawn on the device below the count held there: no host wait, and fit for the compiled /
        # graphed update
        idx = torch.randint(0, 2**62, (batch_size,), device=self.storage.device) % self.count
        batch, d = self.storage[idx], self.obs_dim
        return dict(
            obs=batch[:, :d],
            actions=batch[:, d],
            next_obs=batch[:, d + 1 : 2 * d + 1],
            rewards=batch[:, -2],
            dones=batch[:, -1],
        )


# ALGO LOGIC: initialize agent here:
class QNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, n_actions)
        )

    def forward(self, x):
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def due(first_step, num_envs, frequency):
    """How many env steps of first_step .. first_step + num_envs - 1 are multiples of `frequency`
    (CleanRL's `%`, for any num_envs)."""
    return (first_step + num_envs - 1) // frequency - (first_step - 1) // frequency


def compiled(fn, args: Args, **kwargs):
    """torch.compile in --compile-mode; in GRAPH_MODES a replay overwrites the last one's outputs: mark a new step,
    return clones."""
    fn = torch.compile(fn, mode=args.compile_mode, **kwargs)
    if args.compile_mode not in GRAPH_MODES:
        return fn

    def call(*inputs, **named_inputs):
        torch.compiler.cudagraph_mark_step_begin()
        return tree_map_only(torch.Tensor, torch.clone, fn(*inputs, **named_inputs))

    return call


def adam_settings(args: Args, device: torch.device) -> dict:
    # Speed: Adam in its fastest form for each mode (doc/tricks.md), one rule in every fast file. Under --compile,
    # the plain step: torch.compile makes it capturable itself where the parameters are on CUDA, and inductor fuses
    # it. Under CUDA graphs without compile, capturable (its step counters on the GPU, or a replay would not advance
    # them) and multi-tensor. In plain eager, fused: one kernel for all parameters.
    if args.compile:
        return {}
    if args.cudagraphs and device.type == "cuda":
        # CudaGraphModule's warm-up calls run the step uncaptured, on purpose: torch's warning about that (capturable
        # can impair performance) is not the user's to act on
        warnings.filterwarnings("ignore", message="This instance was constructed with capturable=True")
        return dict(capturable=True, foreach=True)
    return dict(fused=True)


def make_dqn(args: Args, obs_dim, n_actions, device):
    """Networks, optimizer, replay buffer and the (compiled / graphed) update and policy functions."""
    dqn = SimpleNamespace()
    dqn.q_network = q_network = QNetwork(obs_dim, n_actions).to(device)
    dqn.target_network = target_network = QNetwork(obs_dim, n_actions).to(device).requires_grad_(False)
    target_network.load_state_dict(q_network.state_dict())
    dqn.rb = rb = ReplayBuffer(args.buffer_size, obs_dim, device)
    # Speed: a 0-d tensor lr, so that a schedule's change in place reaches the compiled step without a recompile
    lr = torch.tensor(args.learning_rate, device=device)
    dqn.optimizer = optimizer = optim.Adam(q_network.parameters(), lr=lr, **adam_settings(args, device))
    online = dict(q_network.named_parameters())
    targets, params = list(target_network.parameters()), list(online.values())

    def td_loss(q_values, actions, td_target):
        old_val = q_values.gather(1, actions.long().unsqueeze(1)).squeeze(1)
        return F.mse_loss(td_target, old_val), old_val

    # Speed: the whole training step (sample, loss, gradients, Adam): one compiled call or one graph replay
    def update():
        b = rb.sample(args.batch_size)
        with torch.no_grad():
            target_max, _ = target_network(b["next_obs"]).max(dim=1)
            td_target = b["rewards"] + args.gamma * target_max * (1 - b["dones"])
        if args.compile:
            # Speed: gradients from torch.func.grad, as loss.backward() and zero_grad() would break the graph (the
            # compiled update: 450-500 -> ~260 us on a 2-core CPU, doc/tricks.md). It runs the network's own forward.
            def loss_of(params):
                return td_loss(torch.func.functional_call(q_network, params, (b["obs"],)), b["actions"], td_target)

            with torch.no_grad():
                grads, (loss, old_val) = torch.func.grad_and_value(loss_of, has_aux=True)(online)
            for name, p in online.items():
                p.grad = grads[name]
        else:  # eager autograd is the faster one without compile (~410 against ~660 us)
            loss, old_val = td_loss(q_network(b["obs"]), b["actions"], td_target)
            optimizer.zero_grad()
            loss.backward()
        optimizer.step()
        return dict(td_loss=loss.detach(), q_values=old_val.detach().mean())

    def policy(obs):
        # the greedy action, for acting and for evaluation (one observation repeated to num_envs rows)
        with torch.no_grad():
            return q_network(obs).argmax(dim=1)

    def update_target():
        # Speed: one in-place multi-tensor lerp (a copy for tau=1); no_grad, or it records history
        with torch.no_grad():
            torch._foreach_lerp_(targets, params, args.tau)

    dqn.update, dqn.policy, dqn.update_target = update, policy, update_target
    if args.compile:
        dqn.update = compiled(update, args)
        dqn.policy = compiled(policy, args)
    # Speed: each call replays a recorded CUDA graph: one launch instead of dozens of kernels
    if args.cudagraphs:
        # a compiled function wants one more eager call before capture
        warmup = 3 if args.compile else 2
        dqn.update = CudaGraphModule(dqn.update, warmup=warmup)
        dqn.policy = CudaGraphModule(dqn.policy, warmup=warmup)
    return dqn


def main(args: Args):
    check_args(args)
    log = RunLog(args, ["td_loss", "q_values", "epsilon"])

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if args.cuda else "cpu")
    # Speed: one thread: these layers are too small to gain from a second one, which costs
    if device.type == "cpu":
        # more to wake than it does (500k-step runs on 2 cores: ~+10% eager, ~+20% compiled)
        torch.set_num_threads(1)

    # env setup. SAME_STEP autoreset: an episode's last step returns the reset observation,
    # the true final one in infos["final_obs"]
    # The --async-envs workers inherit these: Ctrl-C is this process's, and SIGTERM (from Slurm, or from close()
    # stopping them) ends a worker at once, not through this process's handler
    sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
    sigterm = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    envs = (gym.vector.AsyncVectorEnv if args.async_envs else gym.vector.SyncVectorEnv)(
        [
            make_env(
                args.env_id,
                args.seed + i,
                i,
                args.capture_video and not args.eval_episodes,
                os.path.join(log.run_dir, "videos"),
            )
            for i in range(args.num_envs)
        ],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    signal.signal(signal.SIGINT, sigint)
    signal.signal(signal.SIGTERM, sigterm)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    obs_dim, n_actions = int(np.prod(envs.single_observation_space.shape)), int(envs.single_action_space.n)

    dqn = make_dqn(args, obs_dim, n_actions, device)
    if args.eval_model:  # in place, so that compiled and captured functions read the loaded weights
        load_model(args, "dqn", dqn.q_network)
    metrics, status, steps_done = {}, "finished", 0

    # TRY NOT TO MODIFY: start the game
    obs = envs.reset(seed=args.seed)[0].astype(np.float32)
    try:
        for global_step in range(0, args.total_timesteps, args.num_envs):
            # ALGO LOGIC: put action logic here
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            # Speed: the coin and the random actions stay on the host, as in CleanRL: only a greedy step uses the
            # device (one sync)
            if random.random() < epsilon:
                actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
            else:
                # the one sync
                actions = dqn.policy(torch.from_numpy(obs).to(device, non_blocking=True)).cpu().numpy()

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, rewards, terminations, truncations, infos = envs.step(actions)
            next_obs, steps_done = next_obs.astype(np.float32), global_step + args.num_envs
            for i in np.flatnonzero(infos.get("_episode", [])):
                log.episodes.append((infos["episode"]["r"][i], infos["episode"]["l"][i]))

            # TRY NOT TO MODIFY: save data to replay buffer; handle `final_obs`
            real_next_obs = next_obs.copy()
            for idx in np.flatnonzero(infos.get("_final_obs", [])):
                real_next_obs[idx] = infos["final_obs"][idx]
            dqn.rb.add(obs, real_next_obs, actions, rewards, terminations)

            # TRY NOT TO MODIFY: CRUCIAL step easy to overlook
            obs = next_obs

            # ALGO LOGIC: training.
            if global_step > args.learning_starts:
                for _ in range(due(global_step, args.num_envs, args.train_frequency)):
                    log.count_update(global_step)
                    metrics = dqn.update()

                # update target network
                if due(global_step, args.num_envs, args.target_network_frequency):
                    dqn.update_target()
            # Speed: the values are read (one sync) only on these steps
            if steps_done % args.log_interval < args.num_envs:
                # a value is NaN or infinite: stop here
                if log.row(steps_done, dict(metrics, epsilon=epsilon)):
                    status = "diverged"
                    break
    except KeyboardInterrupt:
        status = "interrupted"
    except (EOFError, ConnectionError) as e:
        # --async-envs: a worker died (killed, out of memory): keep what ran
        print(f"error: --async-envs: an env worker died ({type(e).__name__}), the run stops here", file=sys.stderr)
        status = "failed"
    # --async-envs: a step may be pending after Ctrl-C or SIGTERM, or a worker gone; stop the workers
    try:
        envs.close(terminate=status != "finished")
    except (EOFError, ConnectionError):
        # the dead worker's pipe, read while closing: end the others directly
        for process in envs.unwrapped.processes:
            process.terminate()
        envs.unwrapped.closed = True

    def act(obs):  # deterministic: the arg-max
        # The compiled / captured policy takes num_envs rows: the observation is repeated.
        obs = torch.from_numpy(obs.repeat(args.num_envs, 0)).to(device, non_blocking=True)
        return dqn.policy(obs)[:1].cpu().numpy()

    status = log.finish(steps_done, status, act, {"agent": "dqn", "model": dqn.q_network.state_dict()})
    # What the run ends with: the exit code reads the status; tests read the rest.
    return dict(status=status, args=args, device=device, envs=envs, log=log, dqn=dqn)


# Plumbing, the same text in every file: flag ranges, saved models, metrics, progress and summary.
def check(args, names, ok, allowed):  # one line naming the flag if ok(value) is false (NaN: always)
    for name in names.split():
        if getattr(args, name) is not None and not ok(getattr(args, name)):  # None: left out
            sys.exit(f"error: --{name.replace('_', '-')}: must be {allowed}, got {getattr(args, name)}")


class RunLog:  # the run folder (metrics.csv, TensorBoard, model.pt, summary.json), progress, wandb
    def __init__(self, args, columns):
        self.args, self.start, self.episodes = args, time.time(), []  # episodes: (return, length)
        self.updates, self.learning_start, self.burnin_end = 0, None, None  # end: (time, step)
        self.end, self.wandb, self.terminated = None, None, False
        self.run_dir = os.path.join(args.output_dir, f"{args.env_id}__{args.exp_name}__{args.seed}__{int(self.start)}")
        try:  # what can fail here is --track's wandb or the folder
            if args.track:
                import wandb

                name = os.path.basename(self.run_dir)
                self.wandb = wandb.init(
                    project=args.wandb_project_name, entity=args.wandb_entity, config=vars(args), name=name, save_code=True
                )
            os.makedirs(self.run_dir, exist_ok=True)  # as CleanRL: a second's runs share it
        except (ImportError, OSError) as e:
            flag = "--track: needs wandb: pip install wandb" if isinstance(e, ImportError) else f"--output-dir: {e}"
            sys.exit(f"error: {flag}")
        columns = ["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s", *columns]
        self.csv = csv.DictWriter(open(os.path.join(self.run_dir, "metrics.csv"), "w", buffering=1, newline=""), columns)
        self.csv.writeheader()
        self.writer = SummaryWriter(self.run_dir)  # TensorBoard: tensorboard --logdir runs
        table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
        self.writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")
        self.bar = tqdm.tqdm(total=args.total_timesteps, disable=None, unit="step")  # bar on ttys
        signal.signal(signal.SIGTERM, self.stop)  # Slurm's time limit, kill and timeout send it

    def stop(self, signum, frame):  # SIGTERM: the run stops between two steps, as with Ctrl-C
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a 2nd must not cut the summary
        self.terminated = True
        raise KeyboardInterrupt

    def count_update(self, global_step):  # before each update (PPO: iteration)
        self.learning_start = self.learning_start or time.time()
        self.updates += 1
        self.burnin_end = (time.time(), global_step) if self.updates == self.args.measure_burnin + 1 else self.burnin_end

    def stats(self, global_step):  # steps/s to the end of training, and the last 20 episodes
        now, last = time.time(), np.mean(self.episodes[-20:], 0).tolist() if self.episodes else [None, None]
        stats = dict(global_step=global_step, sps=None, episodic_return=last[0], episodic_length=last[1])
        if self.burnin_end and global_step > self.burnin_end[1]:
            stats["sps"] = (global_step - self.burnin_end[1]) / ((self.end or now) - self.burnin_end[0])
        return dict(stats, wall_time_s=now - self.start)

    def row(self, global_step, metrics: dict):  # a metrics.csv row; True if NaN or inf
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
        return bool(bad)

    def finish(self, global_step, status, act, model, **fields):  # model.pt, evaluation, summary
        self.end, args, evals = time.time(), self.args, []  # steps/s ends here
        self.bar.close()
        if args.save_model and status != "diverged":  # what is needed to act, and whence
            torch.save({**model, "env_id": args.env_id, "args": asdict(args)}, os.path.join(self.run_dir, "model.pt"))
        try:  # Ctrl-C during the evaluation still writes the summary
            if args.eval_episodes and status == "finished":
                evals = evaluate(args, act, os.path.join(self.run_dir, "videos"))
        except KeyboardInterrupt:
            status = "interrupted"
        status = "terminated" if status == "interrupted" and self.terminated else status
        self.writer.close()
        script, gpu = pathlib.Path(__file__).stem, torch.cuda.get_device_name() if args.cuda else None
        summary = dict(script=script, algo=script.split("_")[0], device="cuda" if args.cuda else "cpu", gpu_name=gpu)
        summary.update(
            cpu_count=os.cpu_count(), torch_version=torch.__version__, world_size=int(os.environ.get("WORLD_SIZE", 1))
        )
        summary.update(self.stats(global_step), episodes=len(self.episodes), args=asdict(args), **fields)
        summary["warmup_s"] = self.burnin_end[0] - self.learning_start if self.burnin_end else None
        summary["status"] = "evaluated" if evals and args.eval_model else status
        summary.update(eval_episodes=len(evals) or None, eval_return_mean=None, eval_return_std=None)
        if evals:
            summary.update(eval_return_mean=float(np.mean(evals)), eval_return_std=float(np.std(evals)))
            print(f"evaluation: {len(evals)} episodes, return {np.mean(evals):.1f} +- {np.std(evals):.1f}", file=sys.stderr)
        if summary["sps"] is None and summary["status"] == "finished":  # a short run is no error
            measured = f"{self.updates} updates, --measure-burnin {args.measure_burnin}"
            print(f"warning: --total-timesteps {args.total_timesteps}: steps/s not measured ({measured})", file=sys.stderr)
        pathlib.Path(self.run_dir, "summary.json").write_text(json.dumps(summary, indent=2))
        print(pathlib.Path(self.run_dir, "summary.json"))  # the last line printed
        return summary["status"]


if __name__ == "__main__":
    run = main(tyro.cli(Args))
    sys.exit({"interrupted": 130, "terminated": 143, "diverged": 1, "failed": 1}.get(run["status"], 0))
