# PPO on Atari with envpool: CleanRL's ppo_atari_envpool.py, brought up to envpool 1.x (gymnasium's 5-tuple,
# NEXT_STEP autoreset), numpy 2 and torch 2.11+. The eager baseline: the honest reference for the fast variant.
import csv
import json
import math
import os
import pathlib
import random
import signal
import sys
import time
from dataclasses import asdict, dataclass

import envpool
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tqdm
import tyro
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter


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
    save_model: bool = False
    """whether to save the agent to `model.pt` in the run folder (at the end, also on Ctrl-C)"""
    eval_episodes: int = 0
    """episodes of the deterministic policy to play after training, on freshly seeded envs (0: none)"""
    eval_model: str | None = None
    """a saved `model.pt` to evaluate instead of training (--eval-episodes, 10 if not given)"""
    output_dir: str = "runs"
    """where the run folder (metrics.csv, summary.json, model.pt) is written"""
    measure_burnin: int = 5
    """iterations (rollout + update) left out of the steps/s measurement"""
    log_interval: int = 1
    """iterations between two rows of metrics.csv"""

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
    async_envs: bool = False
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


def check_args(args: Args):
    """Bad input ends the run here, before any work, with one line naming the flag (`check` is in the plumbing below).
    What this machine lacks falls back with a warning. The one place that changes `args`."""
    if args.env_id not in envpool.list_all_envs() or type(envpool.make_spec(args.env_id)).__name__ != "AtariEnvSpec":
        sys.exit(f"error: --env-id: {args.env_id} is no envpool Atari game (such as Breakout-v5, Pong-v5)")
    check(args, "seed", lambda v: 0 <= v < 2**31, "in [0, 2**31)")  # numpy seeds stay below 2**32
    non_negative = "measure_burnin eval_episodes clip_coef ent_coef vf_coef envpool_threads"
    check(args, non_negative, lambda v: 0 <= v < math.inf, "in [0, inf)")
    check(args, "gamma gae_lambda", lambda v: 0 <= v <= 1, "in [0, 1]")
    counts = "num_envs num_steps num_minibatches update_epochs log_interval"
    check(args, counts, lambda v: 1 <= v < math.inf, "in [1, inf)")
    check(args, "learning_rate max_grad_norm target_kl", lambda v: 0 < v < math.inf, "in (0, inf)")
    batch = args.num_envs * args.num_steps
    # one rollout
    check(args, "total_timesteps", lambda v: v >= batch, f"at least --num-envs x --num-steps ({batch})")
    if batch % args.num_minibatches:
        sys.exit(
            f"error: --num-minibatches: must divide the batch --num-envs x --num-steps = {batch}, got {args.num_minibatches}"
        )
    if args.async_envs:  # (run.sh lines shared with the gymnasium scripts fail in one line here)
        sys.exit(
            "error: --async-envs: envpool steps the envs in threads of its own already; set how many with --envpool-threads"
        )
    if args.eval_model:  # evaluation only: no training (0 iterations)
        load_model(args, "ppo_atari")  # a bad file ends the run here, before any work
        args.total_timesteps, args.eval_episodes = 0, args.eval_episodes or 10
    if args.cuda and not torch.cuda.is_available():
        print("warning: --cuda: CUDA is not available, running on the CPU", file=sys.stderr)
        args.cuda = False


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
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def compute_gae(rewards, values, next_value, terms, dones, valid, gamma, gae_lambda):
    """GAE over a rollout of shape (num_steps, num_envs), NEXT_STEP autoreset.

    Row t holds obs[t], the action taken, and what step t returned: rewards[t], terms[t] (a life loss counts, as in
    CleanRL) and dones[t] = term | trunc. The row after a done is envpool's reset step (valid = 0): the action was
    ignored, so it is no transition; its advantage is 0 and no trace crosses it. obs[t+1] is the true next observation,
    so a truncation bootstraps from values[t+1] and a termination does not bootstrap."""
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(num_steps)):
        nextvalues = next_value if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * nextvalues * (1.0 - terms[t]) - values[t]
        advantages[t] = lastgaelam = (delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam) * valid[t]
    returns = advantages + values
    return advantages, returns


def main(args: Args):
    check_args(args)
    batch_size = int(args.num_envs * args.num_steps)
    minibatch_size = int(batch_size // args.num_minibatches)
    num_iterations = args.total_timesteps // batch_size
    log = RunLog(
        args,
        [
            "learning_rate",
            "value_loss",
            "policy_loss",
            "entropy",
            "old_approx_kl",
            "approx_kl",
            "clipfrac",
            "explained_variance",
        ],
    )

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if args.cuda else "cpu")

    # env setup: envpool 1.x returns gymnasium's 5-tuple and autoresets NEXT_STEP (the step after a done is a reset)
    envs = envpool.make(
        args.env_id,
        env_type="gymnasium",
        num_envs=args.num_envs,
        episodic_life=True,
        reward_clip=True,
        seed=args.seed,
        num_threads=args.envpool_threads,
    )
    obs_shape = envs.single_observation_space.shape
    tracker = EpisodeTracker(args.num_envs)

    agent = Agent(envs.single_action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    if args.eval_model:
        load_model(args, "ppo_atari", agent)

    # ALGO LOGIC: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs)).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terms = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    valid = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    status, global_step = "finished", 0

    # TRY NOT TO MODIFY: start the game
    next_obs, _ = envs.reset()
    next_obs = torch.Tensor(next_obs).to(device)
    next_done = np.zeros(args.num_envs, dtype=bool)
    try:
        for iteration in range(1, num_iterations + 1):
            log.count_update(global_step)
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / num_iterations
                lrnow = frac * args.learning_rate
                optimizer.param_groups[0]["lr"] = lrnow

            for step in range(0, args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                # the step after a done is envpool's reset step, no transition
                step_valid = ~next_done
                valid[step] = torch.tensor(step_valid, dtype=torch.float32).to(device)

                # ALGO LOGIC: action logic
                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs, reward, terminations, truncations, info = envs.step(action.cpu().numpy())
                next_done = np.logical_or(terminations, truncations)
                rewards[step] = torch.tensor(reward).to(device).view(-1)
                terms[step] = torch.tensor(terminations, dtype=torch.float32).to(device)
                dones[step] = torch.tensor(next_done, dtype=torch.float32).to(device)
                next_obs = torch.Tensor(next_obs).to(device)
                log.episodes += tracker.step(info, truncations, step_valid)

            # bootstrap value if not done
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages, returns = compute_gae(
                    rewards, values, next_value, terms, dones, valid, args.gamma, args.gae_lambda
                )

            # flatten the batch
            b_obs = obs.reshape((-1,) + obs_shape)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_valid = valid.reshape(-1)

            # Optimizing the policy and value network. The reset rows weigh 0 in every mean (w * x).sum() / w.sum().
            b_inds = np.arange(batch_size)
            clipfracs = []
            for epoch in range(args.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, minibatch_size):
                    end = start + minibatch_size
                    mb_inds = b_inds[start:end]
                    w = b_valid[mb_inds]
                    n = w.sum().clamp(min=1.0)

                    def wmean(x):  # the mean over the valid rows
                        return (w * x).sum() / n

                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # calculate approx_kl http://joschu.net/blog/kl-approx.html
                        old_approx_kl = wmean(-logratio)
                        approx_kl = wmean((ratio - 1) - logratio)
                        clipfracs += [wmean(((ratio - 1.0).abs() > args.clip_coef).float()).item()]

                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:  # mean and (unbiased) std over the valid rows
                        mean = wmean(mb_advantages)
                        std = ((w * (mb_advantages - mean) ** 2).sum() / (n - 1).clamp(min=1.0)).sqrt()
                        mb_advantages = (mb_advantages - mean) / (std + 1e-8)

                    # Policy loss
                    pg_loss1 = -mb_advantages * ratio
                    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                    pg_loss = wmean(torch.max(pg_loss1, pg_loss2))

                    # Value loss
                    newvalue = newvalue.view(-1)
                    if args.clip_vloss:
                        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                        v_clipped = b_values[mb_inds] + torch.clamp(
                            newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                        )
                        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                        v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                        v_loss = 0.5 * wmean(v_loss_max)
                    else:
                        v_loss = 0.5 * wmean((newvalue - b_returns[mb_inds]) ** 2)

                    entropy_loss = wmean(entropy)
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()

                if args.target_kl is not None and approx_kl > args.target_kl:
                    break

            if iteration % args.log_interval == 0 or iteration == num_iterations:
                valid_rows = b_valid.cpu().numpy() > 0  # the explained variance of the valid rows
                y_pred = b_values.cpu().numpy()[valid_rows]
                y_true = b_returns.cpu().numpy()[valid_rows]
                var_y = np.var(y_true)
                # no variance to explain: 0 (sklearn's convention; CleanRL logs nan, which would read as diverged)
                explained_var = 0.0 if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
                metrics = dict(
                    learning_rate=optimizer.param_groups[0]["lr"],
                    value_loss=v_loss,
                    policy_loss=pg_loss,
                    entropy=entropy_loss,
                    old_approx_kl=old_approx_kl,
                    approx_kl=approx_kl,
                    clipfrac=np.mean(clipfracs),
                    explained_variance=explained_var,
                )
                if log.row(global_step, metrics):  # a value is NaN or infinite: stop here
                    status = "diverged"
                    break
    except KeyboardInterrupt:
        status = "interrupted"
    envs.close()

    def act(obs):  # deterministic: the arg-max
        return agent.actor(agent.network(torch.Tensor(obs).to(device) / 255.0)).argmax(-1).cpu().numpy()

    status = log.finish(global_step, status, act, {"agent": "ppo_atari", "model": agent.state_dict()})
    # What the run ends with: the exit code reads the status; tests read the rest.
    storage = dict(obs=obs, actions=actions, logprobs=logprobs, rewards=rewards, terms=terms, dones=dones, valid=valid)
    storage.update(values=values)
    state = dict(status=status, args=args, device=device, envs=envs, log=log, agent=agent, optimizer=optimizer)
    state.update(storage=storage)
    return state


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
