# PPO on Atari with envpool: CleanRL's ppo_atari_envpool.py, brought up to envpool 1.x (gymnasium's 5-tuple,
# NEXT_STEP autoreset), numpy 2 and torch 2.11+. The eager baseline: the honest reference for the fast variant.
import csv
import json
import os
import platform
import random
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Optional

import envpool
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tqdm
import tyro
from torch.distributions.categorical import Categorical


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
    """not available: envpool's Atari environments cannot render videos (the flag only gives an error)"""
    save_model: bool = False
    """whether to save the agent to `model.pt` in the run folder (at the end, also on Ctrl-C)"""
    eval_episodes: int = 0
    """episodes of the deterministic policy to play after training, on freshly seeded envs (0: none)"""
    eval_model: Optional[str] = None
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
    target_kl: Optional[float] = None
    """the target KL divergence threshold"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def fail(flag: str, message: str):
    """Bad input: one line naming the flag, a non-zero exit, before any work starts."""
    sys.exit(f"error: {flag}: {message}")


def check_args(args: Args):
    if args.env_id not in envpool.list_all_envs():
        fail("--env-id", f"unknown envpool environment {args.env_id!r} (Atari ids such as Breakout-v5, Pong-v5)")
    if type(envpool.make_spec(args.env_id)).__name__ != "AtariEnvSpec":
        fail("--env-id", f"{args.env_id} is not an envpool Atari game; this script needs one such as Breakout-v5")
    for flag, value in [("--num-envs", args.num_envs), ("--num-steps", args.num_steps), ("--num-minibatches", args.num_minibatches),
                        ("--update-epochs", args.update_epochs), ("--total-timesteps", args.total_timesteps),
                        ("--log-interval", args.log_interval)]:
        if value < 1:
            fail(flag, f"must be at least 1, got {value}")
    args.batch_size = int(args.num_envs * args.num_steps)
    if args.batch_size % args.num_minibatches != 0:
        fail("--num-minibatches", f"must divide the batch --num-envs x --num-steps = {args.batch_size}, got {args.num_minibatches}")
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    for flag, value in [("--measure-burnin", args.measure_burnin), ("--eval-episodes", args.eval_episodes)]:
        if value < 0:
            fail(flag, f"must be at least 0, got {value}")
    if args.eval_model:  # evaluation only: no training (0 iterations)
        args.total_timesteps, args.eval_episodes = 0, args.eval_episodes or 10
    elif args.total_timesteps < args.batch_size:
        fail("--total-timesteps", f"must be at least one rollout (--num-envs x --num-steps = {args.batch_size}), got {args.total_timesteps}")
    args.num_iterations = args.total_timesteps // args.batch_size
    # a short run is a valid smoke test (CleanRL's tests run them)
    if args.measure_burnin >= args.num_iterations and not args.eval_model:
        print(f"warning: --total-timesteps {args.total_timesteps} ends inside --measure-burnin ({args.measure_burnin} iterations):"
              " steps/s is not measured", file=sys.stderr)
    if args.capture_video:
        fail("--capture-video", "envpool's Atari environments cannot render videos")
    if args.track:
        try:
            import wandb  # noqa: F401
        except ImportError:
            fail("--track", "needs wandb, which is not installed (pip install wandb)")


def evaluate(args, act):
    """--eval-episodes full games of `act` (observations -> actions, numpy) on one env made as training's, seeded apart.
    The scores are full-game scores, as in training (EpisodeTracker)."""
    env = envpool.make(args.env_id, env_type="gymnasium", num_envs=1, episodic_life=True, reward_clip=True,
                       seed=args.seed + 100_000)  # training's envs are seeded seed .. seed + num_envs - 1
    tracker, returns = EpisodeTracker(1), []
    obs, _ = env.reset()
    done = np.zeros(1, dtype=bool)
    while len(returns) < args.eval_episodes:
        valid = ~done  # the step after a done is envpool's reset step: its action is ignored
        obs, _, terminations, truncations, info = env.step(act(obs))
        done = np.logical_or(terminations, truncations)
        returns += [float(score) for score, _ in tracker.step(info, truncations, valid)]
    env.close()
    return returns


def load_model(path, agent, env_id, module):
    """Load a model.pt of this pair into `module`, in place; any other file fails with one line naming --eval-model."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
        found = (saved["agent"], saved["env_id"])
    except Exception as e:
        fail("--eval-model", f"{path} is not a saved model ({type(e).__name__}: {' '.join(str(e).split())})")
    if found[0] != agent:
        fail("--eval-model", f"{path} holds a {found[0]} agent, not a {agent} one")
    if found[1] != env_id:
        fail("--eval-model", f"{path} was trained on {found[1]}: pass --env-id {found[1]}")
    try:
        module.load_state_dict(saved["model"])
    except Exception as e:
        fail("--eval-model", f"{path}: {' '.join(str(e).split())}")
    return saved


class RunLog:
    """metrics.csv rows, the progress bar, and summary.json at the end (kept apart from the algorithm)."""

    def __init__(self, args, run_dir, device, columns):
        self.args, self.run_dir, self.device = args, run_dir, device
        os.makedirs(run_dir, exist_ok=True)
        self.file = open(os.path.join(run_dir, "metrics.csv"), "w", newline="")
        self.columns = ["global_step", "sps", "episodic_return", "episodic_length", "wall_time_s", *columns]
        self.writer = csv.writer(self.file)
        self.writer.writerow(self.columns)
        self.returns, self.lengths = deque(maxlen=20), deque(maxlen=20)
        self.episodes = 0
        self.start = time.time()
        self.measure_start = None  # (time, global_step) at the end of the burn-in
        self.end = None  # when training ended: steps/s leaves out saving and evaluation
        self.warmup_s = None
        self.bar = tqdm.tqdm(total=args.total_timesteps, disable=not sys.stderr.isatty(), unit="step", smoothing=0.05)
        self.wandb = None
        if args.track:
            import wandb

            self.wandb = wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, config=vars(args),
                                    name=os.path.basename(run_dir), save_code=True)

    def episode(self, ret, length):
        self.returns.append(float(ret))
        self.lengths.append(int(length))
        self.episodes += 1

    def start_measure(self, global_step, learning_start_time):
        self.measure_start = (time.time(), global_step)
        self.warmup_s = self.measure_start[0] - learning_start_time

    def sps(self, global_step):
        if self.measure_start is None or global_step <= self.measure_start[1]:
            return None
        return (global_step - self.measure_start[1]) / ((self.end or time.time()) - self.measure_start[0])

    def row(self, global_step, **losses):
        ret = float(np.mean(self.returns)) if self.returns else None
        length = float(np.mean(self.lengths)) if self.lengths else None
        sps = self.sps(global_step)
        values = {"global_step": global_step, "sps": sps, "episodic_return": ret, "episodic_length": length,
                  "wall_time_s": time.time() - self.start, **losses}
        self.writer.writerow(["" if values.get(c) is None else values[c] for c in self.columns])
        self.file.flush()
        self.bar.n = global_step
        self.bar.set_postfix(sps=f"{sps:.0f}" if sps else "-", ret=f"{ret:.1f}" if ret is not None else "-", refresh=False)
        self.bar.refresh()
        if self.wandb is not None:
            self.wandb.log({k: v for k, v in values.items() if v is not None}, step=global_step)

    def close(self, global_step, status, script, algo, compile=False, cudagraphs=False, evals=None):
        self.bar.close()
        self.file.close()
        device = self.device
        summary = {
            "script": script, "algo": algo, "env_id": self.args.env_id, "seed": self.args.seed,
            "compile": compile, "cudagraphs": cudagraphs, "device": str(device),
            "gpu_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "cpu_count": os.cpu_count(), "torch_version": torch.__version__, "global_step": global_step,
            "sps": self.sps(global_step), "wall_time_s": time.time() - self.start, "warmup_s": self.warmup_s,
            "episodic_return": float(np.mean(self.returns)) if self.returns else None, "episodes": self.episodes,
            "status": status, "args": asdict(self.args), "python_version": platform.python_version(),
            "eval_return_mean": float(np.mean(evals)) if evals else None,
            "eval_return_std": float(np.std(evals)) if evals else None, "eval_episodes": len(evals) if evals else None,
        }
        path = os.path.join(self.run_dir, "summary.json")
        with open(path, "w") as f:
            json.dump(summary, f, indent=2)
        if self.wandb is not None:
            self.wandb.finish()
        return path


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
    script = os.path.basename(__file__)[: -len(".py")]
    run_name = f"{args.env_id}__{script}__{args.seed}__{int(time.time())}"
    run_dir = os.path.join(args.output_dir, run_name)

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    if args.cuda and not torch.cuda.is_available():
        print("warning: --cuda: CUDA is not available, running on the CPU", file=sys.stderr)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup: envpool 1.x returns gymnasium's 5-tuple and autoresets NEXT_STEP (the step after a done is a reset)
    envs = envpool.make(
        args.env_id,
        env_type="gymnasium",
        num_envs=args.num_envs,
        episodic_life=True,
        reward_clip=True,
        seed=args.seed,
    )
    obs_shape = envs.single_observation_space.shape
    tracker = EpisodeTracker(args.num_envs)

    agent = Agent(envs.single_action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    if args.eval_model:
        load_model(args.eval_model, "ppo_atari", args.env_id, agent)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs)).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terms = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    valid = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    log = RunLog(args, run_dir, device, ["learning_rate", "value_loss", "policy_loss", "entropy", "old_approx_kl",
                                         "approx_kl", "clipfrac", "explained_variance"])
    status, global_step = "finished", 0

    # TRY NOT TO MODIFY: start the game
    start_time = time.time()
    next_obs, _ = envs.reset()
    next_obs = torch.Tensor(next_obs).to(device)
    next_done = np.zeros(args.num_envs, dtype=bool)
    try:
        for iteration in range(1, args.num_iterations + 1):
            if iteration - 1 == args.measure_burnin:
                log.start_measure(global_step, start_time)
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                lrnow = frac * args.learning_rate
                optimizer.param_groups[0]["lr"] = lrnow

            for step in range(0, args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                step_valid = ~next_done  # the step after a done is envpool's reset step, no transition
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
                for score, length in tracker.step(info, truncations, step_valid):
                    log.episode(score, length)

            # bootstrap value if not done
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages, returns = compute_gae(rewards, values, next_value, terms, dones, valid, args.gamma, args.gae_lambda)

            # flatten the batch
            b_obs = obs.reshape((-1,) + obs_shape)
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_valid = valid.reshape(-1)

            # Optimizing the policy and value network. The reset rows weigh 0 in every mean (w * x).sum() / w.sum().
            b_inds = np.arange(args.batch_size)
            clipfracs = []
            for epoch in range(args.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, args.batch_size, args.minibatch_size):
                    end = start + args.minibatch_size
                    mb_inds = b_inds[start:end]
                    w = b_valid[mb_inds]
                    n = w.sum().clamp(min=1.0)
                    wmean = lambda x: (w * x).sum() / n  # noqa: E731

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
                        v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
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

            if iteration % args.log_interval == 0 or iteration == args.num_iterations:
                keep = b_valid.cpu().numpy() > 0
                y_pred, y_true = b_values.cpu().numpy()[keep], b_returns.cpu().numpy()[keep]
                var_y = np.var(y_true)
                explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
                log.row(global_step, learning_rate=optimizer.param_groups[0]["lr"], value_loss=v_loss.item(),
                        policy_loss=pg_loss.item(), entropy=entropy_loss.item(), old_approx_kl=old_approx_kl.item(),
                        approx_kl=approx_kl.item(), clipfrac=float(np.mean(clipfracs)), explained_variance=float(explained_var))
    except KeyboardInterrupt:
        status = "interrupted"
    log.end = time.time()
    envs.close()
    if args.save_model:  # what is needed to act, and where it comes from
        torch.save({"agent": "ppo_atari", "env_id": args.env_id, "args": asdict(args), "model": agent.state_dict()},
                   os.path.join(run_dir, "model.pt"))
    evals = None
    if args.eval_episodes and status != "interrupted":  # the deterministic policy: the arg-max action
        try:  # Ctrl-C during the evaluation still writes the summary
            act = lambda o: agent.actor(agent.network(torch.Tensor(o).to(device) / 255.0)).argmax(-1).cpu().numpy()  # noqa: E731
            with torch.no_grad():
                evals = evaluate(args, act)
            status = "evaluated" if args.eval_model else status
        except KeyboardInterrupt:
            status = "interrupted"
    path = log.close(global_step, status, script, "ppo", evals=evals)
    print(path)
    if status == "interrupted":
        sys.exit(130)


if __name__ == "__main__":
    main(tyro.cli(Args))
