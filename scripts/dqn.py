# DQN for discrete actions: CleanRL's dqn.py, brought up to gymnasium 1.x, numpy 2 and torch 2.11+.
# The eager baseline: the reference for the fast variant.
import os
import random
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro


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
    checkpoint_interval: int = 100_000  # Run:
    """env steps between two checkpoints (checkpoint.pt in the run folder; also on Ctrl-C, SIGTERM, SIGUSR1; 0: none)"""
    resume: str | None = None  # Run:
    """a run folder to go on from, at its checkpoint.pt: the same flags, --total-timesteps may grow"""
    measure_burnin: int = 10  # Run:
    """updates after learning starts that are left out of the steps/s measurement"""
    log_interval: int = 100  # Run:
    """environment steps between two rows of metrics.csv"""

    # Algorithm specific arguments
    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 500000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments (an update every --train-frequency env steps, whatever their number)"""
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


def make_env(env_id, seed, idx, capture_video, video_dir):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, video_dir)
        else:
            env = gym.make(env_id)
        env.action_space.seed(seed)
        env = Snapshot(env)  # Run: outermost, so that checkpoints reach every layer
        return env

    return thunk


class ReplayBuffer:
    """A plain replay buffer in numpy, in place of the library buffer CleanRL imports."""

    def __init__(self, size, obs_dim, device):
        self.size = size
        self.device = device
        self.pos = 0
        self.full = False
        self.observations = np.zeros((size, obs_dim), dtype=np.float32)
        self.next_observations = np.zeros((size, obs_dim), dtype=np.float32)
        self.actions = np.zeros((size, 1), dtype=np.int64)
        self.rewards = np.zeros((size,), dtype=np.float32)
        self.dones = np.zeros((size,), dtype=np.float32)

    def add(self, obs, next_obs, actions, rewards, terminations):
        rows = (self.pos + np.arange(len(obs))) % self.size  # one row per environment
        self.observations[rows] = obs
        self.next_observations[rows] = next_obs
        self.actions[rows, 0] = actions
        self.rewards[rows] = rewards
        self.dones[rows] = terminations  # only a termination stops the bootstrap
        self.full = self.full or self.pos + len(obs) >= self.size  # before pos moves on
        self.pos = (self.pos + len(obs)) % self.size

    def sample(self, batch_size):
        idx = np.random.randint(0, self.size if self.full else self.pos, size=batch_size)
        columns = (self.observations, self.actions, self.next_observations, self.rewards, self.dones)
        return [torch.as_tensor(column[idx], device=self.device) for column in columns]

    def state_dict(self):  # Run: for checkpoints, the rows filled so far
        n = self.size if self.full else self.pos
        columns = dict(observations=self.observations, next_observations=self.next_observations, actions=self.actions)
        columns.update(rewards=self.rewards, dones=self.dones)
        return dict(pos=self.pos, full=self.full, **{key: torch.from_numpy(value[:n]) for key, value in columns.items()})

    def load_state_dict(self, state):  # Run:
        self.pos, self.full = state["pos"], state["full"]
        for key in ["observations", "next_observations", "actions", "rewards", "dones"]:
            getattr(self, key)[: len(state[key])] = state[key].numpy()


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


def main(args: Args):
    # the run's folder, named as in CleanRL (--capture-video's videos go there)
    run_dir = f"{args.output_dir}/{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_dir = args.resume or run_dir  # Run: --resume: the resumed run's
    run = start_run(args, run_dir, "td_loss q_values epsilon")  # Run: flags checked, metrics

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup. SAME_STEP autoreset: an episode's last step returns the reset observation, the final one in infos
    capture_video = args.capture_video
    capture_video = capture_video and not args.eval_episodes  # Run: the evaluation is filmed
    with envs_ignore_signals():  # Run: Ctrl-C and SIGTERM reach this process alone
        envs = (gym.vector.AsyncVectorEnv if args.async_envs else gym.vector.SyncVectorEnv)(
            [make_env(args.env_id, args.seed + i, i, capture_video, f"{run_dir}/videos") for i in range(args.num_envs)],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    n_actions = int(envs.single_action_space.n)

    q_network = QNetwork(obs_dim, n_actions).to(device)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(obs_dim, n_actions).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(args.buffer_size, obs_dim, device)
    steps = range(0, args.total_timesteps, args.num_envs)

    # TRY NOT TO MODIFY: start the game
    obs = envs.reset(seed=args.seed)[0].astype(np.float32)
    learned = dict(  # Run: what a checkpoint keeps
        q_network=q_network, target_network=target_network, optimizer=optimizer, rb=rb
    )
    # --eval-model: the network's weights; --resume: the learned parts, the envs and the random streams as the
    # checkpoint has them, and the loop's values below. A second Ctrl-C or a dead env worker ends the loop.
    with run.loop(envs, learned, "q_network") as saved:  # Run:
        if saved:  # Run: the loop's values, from the checkpoint
            obs, steps = saved["obs"], steps[saved["log"]["step"] // args.num_envs :]
        for global_step in steps:
            updates = 0  # Run: the step's updates, counted for steps/s
            # ALGO LOGIC: put action logic here
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            if random.random() < epsilon:
                actions = np.array([envs.single_action_space.sample() for _ in range(envs.num_envs)])
            else:
                with torch.no_grad():
                    q_values = q_network(torch.Tensor(obs).to(device))
                actions = torch.argmax(q_values, dim=1).cpu().numpy()

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, rewards, terminations, truncations, infos = envs.step(actions)
            next_obs = next_obs.astype(np.float32)
            for i in np.flatnonzero(infos.get("_episode", [])):  # the finished episodes
                run.episodes.append((infos["episode"]["r"][i], infos["episode"]["l"][i]))  # Run:
                # Cut: print(f"global_step={global_step}, episodic_return={infos['episode']['r'][i]}")

            # TRY NOT TO MODIFY: save data to replay buffer; handle `final_obs`
            real_next_obs = next_obs.copy()
            for idx in np.flatnonzero(infos.get("_final_obs", [])):
                real_next_obs[idx] = infos["final_obs"][idx]
            rb.add(obs, real_next_obs, actions, rewards, terminations)

            # TRY NOT TO MODIFY: CRUCIAL step easy to overlook
            obs = next_obs

            # ALGO LOGIC: training.
            if global_step > args.learning_starts:
                updates = due(global_step, args.num_envs, args.train_frequency)
                for _ in range(updates):
                    observations, b_actions, next_observations, b_rewards, dones = rb.sample(args.batch_size)
                    with torch.no_grad():
                        target_max, _ = target_network(next_observations).max(dim=1)
                        td_target = b_rewards.flatten() + args.gamma * target_max * (1 - dones.flatten())
                    old_val = q_network(observations).gather(1, b_actions).squeeze(1)
                    loss = F.mse_loss(td_target, old_val)

                    optimizer.zero_grad()  # optimize the model
                    loss.backward()
                    optimizer.step()
                    run.log(dict(td_loss=loss, q_values=old_val))  # Run: the values the rows log

                # update target network
                if due(global_step, args.num_envs, args.target_network_frequency):
                    for target_network_param, q_network_param in zip(target_network.parameters(), q_network.parameters()):
                        target_network_param.data.copy_(
                            args.tau * q_network_param.data + (1.0 - args.tau) * target_network_param.data
                        )
            # The step's updates counted for steps/s; a row of metrics.csv every --log-interval steps (the values are
            # read then, a sync); a checkpoint every --checkpoint-interval; Ctrl-C, SIGTERM or SIGUSR1 stop the run here,
            # after one.
            if run.step(  # Run:
                global_step + args.num_envs, updates, rows=args.log_interval, values=dict(epsilon=epsilon), obs=obs
            ):
                break

    # the evaluation's policy, deterministic: the arg-max; model.pt: the network
    return run.finish(  # Run: summary.json, and what the tests read
        lambda obs: torch.argmax(q_network(torch.Tensor(obs).to(device)), dim=1).cpu().numpy(),
        {"agent": "dqn", "model": q_network.state_dict()},
        device=device,
        envs=envs,
        **learned,
    )
    # Cut: envs.close()


# Appendix: what runs the run (flag checks, evaluation, saved models, env snapshots, the run folder, metrics, checkpoints).
# Each definition that several files share is the same text in each; nothing above depends on the order below.

import collections
import contextlib
import csv
import json
import math
import pathlib
import signal
import sys
from dataclasses import asdict

import tqdm
from torch.utils._pytree import tree_map_only
from torch.utils.tensorboard import SummaryWriter


def start_run(args, run_dir, columns):
    """Before any work, the flags checked and --resume's checkpoint read; then the run folder, with these metrics."""
    model = check_args(args)
    saved = resume(args) if args.resume else None
    return Run(args, saved, model).open(run_dir, columns.split())


def check_args(args: Args):
    """Bad input ends the run here, before any work, with one line naming the flag (`check` is below).
    What this machine lacks falls back with a warning. The one place that changes `args`."""
    # gymnasium ids such as CartPole-v1, Acrobot-v1
    env = gym.make(args.env_id) if args.env_id in gym.registry else None
    flat_box = env is not None and isinstance(env.observation_space, gym.spaces.Box) and len(env.observation_space.shape) == 1
    if not flat_box or not isinstance(env.action_space, gym.spaces.Discrete) or env.action_space.start != 0:
        spaces = "an unknown environment" if env is None else (env.observation_space, env.action_space)
        sys.exit(f"error: --env-id: {args.env_id} is {spaces}; DQN needs a flat Box and Discrete actions from 0")
    check(args, "seed", lambda v: 0 <= v < 2**31, "in [0, 2**31)")  # numpy seeds stay below 2**32
    check(args, "checkpoint_interval", lambda v: 0 <= v < math.inf, "in [0, inf)")
    check(args, "learning_starts measure_burnin eval_episodes", lambda v: 0 <= v < math.inf, "in [0, inf)")
    check(args, "gamma start_e end_e", lambda v: 0 <= v <= 1, "in [0, 1]")
    check(args, "tau exploration_fraction", lambda v: 0 < v <= 1, "in (0, 1]")
    counts = "num_envs batch_size total_timesteps train_frequency target_network_frequency log_interval"
    check(args, counts, lambda v: 1 <= v < math.inf, "in [1, inf)")
    check(args, "learning_rate", lambda v: 0 < v < math.inf, "in (0, inf)")
    check(args, "buffer_size", lambda v: v >= args.batch_size, f"at least --batch-size ({args.batch_size})")
    return check_run_flags(args, "dqn")


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
    here or in an --async-envs worker: every layer's counters, statistics and random streams."""

    @property
    def snapshot(self):
        layers, env = [], self.env
        while isinstance(env, gym.Env):  # (RecordVideo too: layer_state keeps its counts)
            layers.append(layer_state(env))
            env = getattr(env, "env", None)
        return dict(layers=layers)

    @snapshot.setter
    def snapshot(self, state):
        env = self.env
        for layer in state["layers"]:
            set_layer_state(env, layer)
            env = getattr(env, "env", None)


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


def set_env_state(envs, state):
    """Put the state back on envs made and reset as the run made them."""
    env = envs
    for layer in state["layers"]:
        set_layer_state(env, layer)
        env = env.env
    envs.single_action_space.np_random.bit_generator.state = state["action_space"]
    env.set_attr("snapshot", state["envs"])


if __name__ == "__main__":
    state = main(tyro.cli(Args))
    sys.exit({"interrupted": 130, "terminated": 143, "diverged": 1, "failed": 1}.get(state["status"], 0))
