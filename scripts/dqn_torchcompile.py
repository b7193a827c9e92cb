# DQN for discrete actions, the fast variant of dqn.py: the same algorithm and defaults, rewritten for speed (each
# trick is named where it is used). `--compile` runs the update and the policy through torch.compile;
# `--cudagraphs` captures them in CUDA graphs with tensordict's CudaGraphModule.
import argparse
import importlib.util
import json
import os
import platform
import random
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tqdm
import tyro
from tensordict.nn import CudaGraphModule


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
    wandb_entity: Optional[str] = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances: of the evaluation episodes if any, else of the first env"""
    save_model: bool = False
    """whether to save the agent to `model.pt` in the run folder (at the end, also on Ctrl-C)"""
    eval_episodes: int = 0
    """episodes of the deterministic policy to play after training, on freshly seeded envs (0: none)"""
    eval_model: Optional[str] = None
    """a saved `model.pt` to evaluate instead of training (--eval-episodes, 10 if not given)"""
    output_dir: str = "runs"
    """where the run folder (metrics.csv, summary.json, model.pt, videos) is written"""
    measure_burnin: int = 10
    """updates after learning starts that are left out of the steps/s measurement"""
    log_interval: int = 100
    """environment steps between two rows of metrics.csv"""
    compile: bool = False
    """if toggled, the update and the policy are compiled with torch.compile"""
    cudagraphs: bool = False
    """if toggled, the update and the policy are captured in CUDA graphs (ignored, with a warning, without CUDA)"""

    # Algorithm specific arguments
    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
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


class ReplayBuffer:
    """The replay buffer on the training device: one preallocated tensor, a row per transition.
    Speed: a step costs one host-to-device copy, a sample is one gather on the device (no numpy, no copies back)."""

    def __init__(self, size, obs_dim, device):
        self.size, self.obs_dim, self.pos, self.full = size, obs_dim, 0, False
        # columns: obs | next_obs | action | reward | termination
        self.storage = torch.zeros((size, 2 * obs_dim + 3), dtype=torch.float32, device=device)
        self.count = torch.zeros((), dtype=torch.int64, device=device)  # rows filled, as sample() reads it

    def add(self, obs, next_obs, actions, rewards, terminations):
        # only a termination stops the bootstrap, never a truncation
        rows = np.concatenate([obs, next_obs, actions[:, None], rewards[:, None], terminations[:, None]], 1, dtype=np.float32)
        # Speed: a copy that does not wait for the device (torch.as_tensor(x, device=...) would block).
        rows, n = torch.from_numpy(rows).to(self.storage.device, non_blocking=True), len(obs)
        first = min(n, self.size - self.pos)
        self.storage[self.pos : self.pos + first] = rows[:first]
        if first < n:
            self.storage[: n - first] = rows[first:]  # wrap around
        if not self.full:
            self.full = self.pos + n >= self.size
            self.count.fill_(self.size if self.full else self.pos + n)  # fill_ of a Python number: no sync
        self.pos = (self.pos + n) % self.size

    def sample(self, batch_size):
        # Speed: indices drawn on the device, below the row count held there: sampling never waits for the host,
        # and it can sit inside the compiled / graphed update (the modulo's bias is below 1e-14).
        idx = torch.randint(0, 2**62, (batch_size,), device=self.storage.device) % self.count
        return self.storage[idx]

    @staticmethod
    def split(batch, obs_dim):
        """Rows -> (obs, actions, next_obs, rewards, terminations), as views (actions as floats)."""
        return batch[:, :obs_dim], batch[:, 2 * obs_dim], batch[:, obs_dim : 2 * obs_dim], batch[:, -2], batch[:, -1]


# ALGO LOGIC: initialize agent here:
class QNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.network = nn.Sequential(nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, n_actions))

    def forward(self, x):
        return self.network(x)


def q_values(params, x):
    """QNetwork's forward, written on its parameter list. Speed: no nn.Module calls (six per forward, which cost
    more than the three matmuls of an acting step on a CPU: a greedy step took 29 us, now 21 us)."""
    w1, b1, w2, b2, w3, b3 = params
    return F.linear(F.relu(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)), w3, b3)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def due(first_step, num_envs, frequency):
    """How many of the env steps first_step .. first_step + num_envs - 1 are multiples of `frequency`
    (CleanRL's `global_step % frequency == 0`, for any number of envs)."""
    return (first_step + num_envs - 1) // frequency - (first_step - 1) // frequency


def make_dqn(args: Args, obs_dim, n_actions, device):
    """Networks, optimizer, replay buffer and the (compiled / graphed) update and policy functions."""
    dqn = argparse.Namespace(obs_dim=obs_dim, n_actions=n_actions)
    dqn.q_network = q_network = QNetwork(obs_dim, n_actions).to(device)
    dqn.target_network = target_network = QNetwork(obs_dim, n_actions).to(device)
    target_network.load_state_dict(q_network.state_dict())
    target_network.requires_grad_(False)
    dqn.rb = rb = ReplayBuffer(args.buffer_size, obs_dim, device)
    # Speed: Adam in its fastest form for each mode (doc/tricks.md): fused (one kernel) in plain eager; capturable
    # multi-tensor under CUDA graphs without compile; under compile, written out inside the update's one graph.
    adam = {} if args.compile else dict(capturable=True, foreach=True) if args.cudagraphs and device.type == "cuda" else dict(fused=True)
    dqn.optimizer = optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, **adam)
    online, targets = list(q_network.parameters()), list(target_network.parameters())

    def update():
        # Speed: the whole training step (sample, loss, backward, optimizer step) is one function, so that it is one
        # compiled call, or one CUDA graph replay.
        observations, actions, next_observations, rewards, dones = ReplayBuffer.split(rb.sample(args.batch_size), obs_dim)
        with torch.no_grad():
            target_max, _ = q_values(targets, next_observations).max(dim=1)
            td_target = rewards + args.gamma * target_max * (1 - dones)
        old_val = q_values(online, observations).gather(1, actions.long().unsqueeze(1)).squeeze(1)
        loss = F.mse_loss(td_target, old_val)

        # optimize the model
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach(), old_val.detach().mean()

    def td_loss(params, observations, actions, td_target):
        old_val = q_values(params, observations).gather(1, actions.long().unsqueeze(1)).squeeze(1)
        return F.mse_loss(td_target, old_val), old_val

    def update_in_one_graph():
        # Speed: what update() computes, as one graph for torch.compile: loss.backward(), zero_grad() and
        # optimizer.step() each break the graph (five compiled pieces with Python between them), so the gradients come
        # from torch.func.grad (which ignores the outer no_grad) and Adam's step is written out on the optimizer's own
        # state. On a 2-core CPU the compiled update went from 450-500 to 220-320 us (doc/tricks.md).
        with torch.no_grad():
            observations, actions, next_observations, rewards, dones = ReplayBuffer.split(rb.sample(args.batch_size), obs_dim)
            target_max, _ = q_values(targets, next_observations).max(dim=1)
            td_target = rewards + args.gamma * target_max * (1 - dones)
            grads, old_val = torch.func.grad(td_loss, has_aux=True)(online, observations, actions, td_target)
            (beta1, beta2), lr, eps = optimizer.defaults["betas"], optimizer.defaults["lr"], optimizer.defaults["eps"]
            for p, g in zip(online, grads):  # torch.optim.Adam's step (no weight decay, no amsgrad)
                state = optimizer.state[p]
                state["step"] += 1
                state["exp_avg"].lerp_(g, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                bias1, bias2 = 1 - beta1 ** state["step"], 1 - beta2 ** state["step"]
                p.sub_(lr / bias1 * state["exp_avg"] / (state["exp_avg_sq"].sqrt() / bias2.sqrt() + eps))
            return F.mse_loss(td_target, old_val), old_val.mean()

    def policy(obs):
        # The greedy action, for acting and for evaluation: one compiled / captured function serves both.
        with torch.no_grad():
            return q_values(online, obs).argmax(dim=1)

    def update_target():
        # Speed: one in-place multi-tensor op (a copy for CleanRL's tau=1), under no_grad: with autograd on, in-place
        # ops on the targets would record history and leak memory.
        with torch.no_grad():
            if args.tau == 1.0:
                torch._foreach_copy_(targets, online)
            else:
                torch._foreach_lerp_(targets, online, args.tau)

    dqn.update, dqn.policy, dqn.update_target = update, policy, update_target
    if args.compile:
        for p in online:  # Adam's state, made as torch.optim.Adam makes it, for the written-out step
            optimizer.state[p] = dict(step=torch.zeros((), device=device), exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
        dqn.update = torch.compile(update_in_one_graph)
        dqn.policy = torch.compile(policy)
    if args.cudagraphs:
        # Speed: each call replays a recorded CUDA graph: one launch instead of dozens of kernels.
        warmup = 3 if args.compile else 2  # a compiled function wants one more eager call before capture
        dqn.update = CudaGraphModule(dqn.update, warmup=warmup)
        dqn.policy = CudaGraphModule(dqn.policy, warmup=warmup)
    return dqn


def main(args: Args):
    check_args(args)
    run_dir = os.path.join(args.output_dir, f"{args.env_id}__{os.path.basename(__file__)[:-3]}__{args.seed}__{int(time.time())}")

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if args.cuda else "cpu")  # check_args turned --cuda off where CUDA is missing
    if device.type == "cpu":  # Speed: one thread: these layers are too small to gain from a second one, which costs
        torch.set_num_threads(1)  # more to wake than it does (500k-step runs on 2 cores: ~+10% eager, ~+20% compiled)

    # env setup. SAME_STEP autoreset: the step that ends an episode returns the reset observation and puts the
    # true final one in infos["final_obs"], which is what a truncated transition must bootstrap from.
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, args.seed + i, i, args.capture_video and not args.eval_episodes, os.path.join(run_dir, "videos"))
         for i in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    obs_dim, n_actions = int(np.prod(envs.single_observation_space.shape)), int(envs.single_action_space.n)

    dqn = make_dqn(args, obs_dim, n_actions, device)
    if args.eval_model:  # in place, so that compiled and captured functions read the loaded weights
        load_model(args.eval_model, "dqn", args.env_id, dqn.q_network)
    log = RunLog(args, run_dir, device, "dqn", ["td_loss", "q_values", "epsilon"])
    losses, status, steps_done = {}, "finished", 0

    # TRY NOT TO MODIFY: start the game
    obs, _ = envs.reset(seed=args.seed)
    obs = obs.astype(np.float32)
    try:
        for global_step in range(0, args.total_timesteps, args.num_envs):
            # ALGO LOGIC: put action logic here
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            # Speed: the coin and the random actions stay on the host, as in CleanRL: an exploring step costs no device
            # work and no transfer, a greedy one a single sync (the action).
            if random.random() < epsilon:
                actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
            else:
                actions = dqn.policy(torch.from_numpy(obs).to(device, non_blocking=True)).cpu().numpy()  # the one sync

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, rewards, terminations, truncations, infos = envs.step(actions)
            next_obs, steps_done = next_obs.astype(np.float32), global_step + args.num_envs
            for i in np.flatnonzero(infos.get("_episode", [])):
                log.episode(infos["episode"]["r"][i], infos["episode"]["l"][i])

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
                    log.update(global_step)
                    loss, old_val_mean = dqn.update()

                # update target network
                if due(global_step, args.num_envs, args.target_network_frequency):
                    dqn.update_target()
            if steps_done % args.log_interval < args.num_envs:  # Speed: one sync per log interval, both values in one transfer
                if log.updates:
                    losses = dict(zip(["td_loss", "q_values"], torch.stack([loss, old_val_mean]).tolist()))
                log.row(steps_done, **losses, epsilon=epsilon)
    except KeyboardInterrupt:
        status = "interrupted"
    envs.close()
    # deterministic: the arg-max. The compiled / captured policy takes num_envs rows: the observation is repeated.
    act = lambda o: dqn.policy(torch.from_numpy(o.repeat(args.num_envs, 0)).to(device, non_blocking=True))[:1].cpu().numpy()
    log.finish(steps_done, status, act, {"agent": "dqn", "model": dqn.q_network.state_dict()})


# Plumbing, the same in every script but for the checks: bad input, evaluation, saved models, metrics and summary.
def check_args(args: Args):
    if args.env_id not in gym.registry:
        fail("--env-id", f"unknown environment {args.env_id!r} (gymnasium ids such as CartPole-v1, Acrobot-v1)")
    env = gym.make(args.env_id)
    if not isinstance(env.action_space, gym.spaces.Discrete) or env.action_space.start != 0:
        fail("--env-id", f"{args.env_id} has a {env.action_space} action space; DQN needs a Discrete one starting at 0")
    if not isinstance(env.observation_space, gym.spaces.Box) or len(env.observation_space.shape) != 1:
        fail("--env-id", f"{args.env_id} has a {env.observation_space} observation space; DQN needs a flat Box one")
    env.close()
    check(args, "num_envs batch_size total_timesteps train_frequency target_network_frequency log_interval", lambda v: v >= 1, "at least 1")
    check(args, "learning_starts measure_burnin eval_episodes", lambda v: v >= 0, "at least 0")
    check(args, "start_e end_e", lambda v: 0 <= v <= 1, "in [0, 1]")
    check(args, "tau", lambda v: 0 < v <= 1, "in (0, 1]")
    check(args, "exploration_fraction", lambda v: v > 0, "in (0, inf)")
    if args.buffer_size < args.batch_size:
        fail("--buffer-size", f"{args.buffer_size} is smaller than --batch-size {args.batch_size}")
    for flag, wanted, package in [("--track", args.track, "wandb"), ("--capture-video", args.capture_video, "moviepy")]:
        if wanted and importlib.util.find_spec(package) is None:
            fail(flag, f"needs {package}, which is not installed (pip install {package})")
    if args.eval_model:  # evaluation only: no training
        args.total_timesteps, args.buffer_size, args.eval_episodes = 0, args.batch_size, args.eval_episodes or 10
    if args.cuda and not torch.cuda.is_available():
        print("warning: --cuda: CUDA is not available, running on the CPU", file=sys.stderr)
        args.cuda = False
    if args.cudagraphs and not args.cuda:
        print("warning: --cudagraphs: needs CUDA, running without CUDA graphs", file=sys.stderr)
        args.cudagraphs = False


def evaluate(args, act, video_dir):
    """--eval-episodes episodes of `act` (observations -> actions, numpy) on one env, seeded apart from training."""
    env = gym.make(args.env_id, render_mode="rgb_array" if args.capture_video else None)
    if args.capture_video:
        env = gym.wrappers.RecordVideo(env, video_dir, episode_trigger=lambda _: True)
    returns = []
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=args.seed + 100_000 + episode)  # training's envs are seeded seed .. seed + num_envs - 1
        done, episode_return = False, 0.0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs.reshape(1, -1).astype(np.float32))[0])
            done, episode_return = terminated or truncated, episode_return + float(reward)
        returns.append(episode_return)
    env.close()
    return returns


def fail(flag: str, message: str):
    """Bad input: one line naming the flag, a non-zero exit, before any work starts."""
    sys.exit(f"error: {flag}: {message}")


def check(args, names: str, ok, allowed: str):
    """Each named field must pass `ok`, else the run fails naming its flag."""
    for name in names.split():
        if not ok(getattr(args, name)):
            fail("--" + name.replace("_", "-"), f"must be {allowed}, got {getattr(args, name)}")


def load_model(path, agent, env_id, module):
    """Load a model.pt of this pair into `module`, in place; any other file fails with one line naming --eval-model."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if (saved["agent"], saved["env_id"]) == (agent, env_id):
            module.load_state_dict(saved["model"])
            return saved
        problem = f"holds a {saved['agent']} agent, not a {agent} one" if saved["agent"] != agent else \
            f"was trained on {saved['env_id']}: pass --env-id {saved['env_id']}"
    except Exception as e:
        problem = f"is not a saved model of this agent ({type(e).__name__}: {' '.join(str(e).split())})"
    fail("--eval-model", f"{path} {problem}")


class RunLog:
    """metrics.csv, the progress bar, wandb (--track), and at the end model.pt and summary.json: apart from the algorithm."""

    def __init__(self, args, run_dir, device, algo, columns, unit="updates"):
        os.makedirs(run_dir, exist_ok=True)
        self.args, self.run_dir, self.device, self.algo, self.unit, self.updates = args, run_dir, device, algo, unit, 0
        self.returns, self.lengths, self.episodes = deque(maxlen=20), deque(maxlen=20), 0  # the last 20 episodes
        self.start, self.learning_start, self.measure_start, self.end = time.time(), None, None, None
        self.columns = ["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s", *columns]
        self.csv = open(os.path.join(run_dir, "metrics.csv"), "w")
        print(*self.columns, sep=",", file=self.csv)
        self.bar = tqdm.tqdm(total=args.total_timesteps, disable=not sys.stderr.isatty(), unit="step", smoothing=0.05)
        self.wandb = args.track and __import__("wandb").init(project=args.wandb_project_name, entity=args.wandb_entity,
                                                             config=vars(args), name=os.path.basename(run_dir), save_code=True)

    def episode(self, ret, length):
        self.returns.append(float(ret))
        self.lengths.append(int(length))
        self.episodes += 1

    def update(self, global_step):
        """Called before each update: the first --measure-burnin (compilation, graph capture) are left out of steps/s."""
        self.learning_start = self.learning_start or time.time()
        if self.updates == self.args.measure_burnin:
            self.measure_start = (time.time(), global_step)
        self.updates += 1

    def values(self, global_step):
        """What a metrics.csv row and summary.json share; steps/s from the end of the burn-in to now or to self.end."""
        t0, step0 = self.measure_start or (None, global_step)
        mean = lambda values: float(np.mean(values)) if values else None
        return dict(global_step=global_step, sps=(global_step - step0) / ((self.end or time.time()) - t0) if global_step > step0 else None,
                    episodic_return=mean(self.returns), episodic_length=mean(self.lengths), wall_time_s=time.time() - self.start)

    def row(self, global_step, **losses):
        values = {**self.values(global_step), **losses}
        print(*["" if values.get(c) is None else values[c] for c in self.columns], sep=",", file=self.csv, flush=True)
        self.bar.n, ret = global_step, values["episodic_return"]
        self.bar.set_postfix(sps=f"{values['sps'] or 0:.0f}", ret="-" if ret is None else f"{ret:.1f}")
        if self.wandb:
            self.wandb.log({k: v for k, v in values.items() if v is not None}, step=global_step)

    def finish(self, global_step, status, act, model):
        """After training or Ctrl-C: save `model` (--save-model), evaluate `act` (--eval-episodes), write summary.json."""
        self.end, args, evals = time.time(), self.args, []  # steps/s leaves out saving and evaluation
        self.bar.close()
        self.csv.close()
        if args.save_model:  # what is needed to act, and where it comes from
            torch.save({**model, "env_id": args.env_id, "args": asdict(args)}, os.path.join(self.run_dir, "model.pt"))
        if args.eval_episodes and status != "interrupted":
            try:  # Ctrl-C during the evaluation still writes the summary
                evals = evaluate(args, act, os.path.join(self.run_dir, "videos"))
                status = "evaluated" if args.eval_model else status
            except KeyboardInterrupt:
                status = "interrupted"
        summary = dict(
            script=os.path.basename(__file__)[:-3], algo=self.algo, env_id=args.env_id, seed=args.seed, compile=getattr(args, "compile", False),
            cudagraphs=getattr(args, "cudagraphs", False), device=str(self.device), cpu_count=os.cpu_count(), torch_version=torch.__version__,
            gpu_name=torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else None, **self.values(global_step),
            warmup_s=self.measure_start and self.measure_start[0] - self.learning_start, episodes=self.episodes, status=status,
            args=asdict(args), python_version=platform.python_version(), eval_return_mean=float(np.mean(evals)) if evals else None,
            eval_return_std=float(np.std(evals)) if evals else None, eval_episodes=len(evals) or None)
        if summary["sps"] is None and status == "finished":  # a short run (CleanRL's tests run them) is no error
            print(f"warning: --total-timesteps {args.total_timesteps} ends " + (f"inside --measure-burnin ({args.measure_burnin} {self.unit}):"
                  if self.updates else f"before --learning-starts {args.learning_starts}: nothing is learned and") + " steps/s is not measured", file=sys.stderr)
        with open(os.path.join(self.run_dir, "summary.json"), "w") as f:
            json.dump(summary, f, indent=2)
        if self.wandb:
            self.wandb.finish()
        print(f.name)
        if status == "interrupted":
            sys.exit(130)


if __name__ == "__main__":
    main(tyro.cli(Args))
