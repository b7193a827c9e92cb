# PPO for continuous actions: CleanRL's ppo_continuous_action.py, brought up to gymnasium 1.x, numpy 2 and
# torch 2.11+. The eager baseline: the honest reference for the fast variant.
# One change of substance: gymnasium 1.x autoresets in NEXT_STEP mode, so the step after a done only resets the
# env (reward 0, action ignored). That row is masked out of the losses, and a truncated episode bootstraps from
# its true final observation (see compute_gae), where CleanRL's code would be off by one step.
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
import torch.optim as optim
import tqdm
import tyro
from torch.distributions.normal import Normal


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
    measure_burnin: int = 1
    """iterations (rollout + update) left out of the steps/s measurement; metrics.csv gets one row per iteration"""

    # Algorithm specific arguments
    env_id: str = "HalfCheetah-v4"
    """the id of the environment"""
    total_timesteps: int = 1000000
    """total timesteps of the experiments"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
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
    target_kl: Optional[float] = None
    """the target KL divergence threshold (checked once per epoch, as in CleanRL)"""


def make_env(env_id, idx, capture_video, video_dir, gamma):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, video_dir)
        else:
            env = gym.make(env_id)
        env = gym.wrappers.FlattenObservation(env)  # deal with dm_control's Dict observation space
        env = gym.wrappers.RecordEpisodeStatistics(env)  # before the normalizations: it records the true returns
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        clipped = gym.spaces.Box(-10.0, 10.0, env.observation_space.shape, np.float32)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10).astype(np.float32), clipped)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
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

    def get_action_and_value(self, x, action=None):
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        action_std = torch.exp(action_logstd)
        probs = Normal(action_mean, action_std)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def compute_gae(rewards, values, next_value, terminations, dones, valids, gamma, gae_lambda):
    """GAE over a NEXT_STEP rollout; all inputs are (num_steps, num_envs) but next_value, V(obs after the last step).

    Row t is the transition obs[t] -> obs[t+1]. When it ends an episode (dones[t]), obs[t+1] is the true final
    observation, so a truncation bootstraps from V(obs[t+1]) and only a termination stops the bootstrap. Row t+1 is
    then the reset step (valids[t+1] = 0): not a transition, so it gets no advantage and the chain is cut at dones[t].
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(num_steps)):
        nextvalues = next_value.reshape(-1) if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * nextvalues * (1.0 - terminations[t]) - values[t]
        lastgaelam = (delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam) * valids[t]
        advantages[t] = lastgaelam
    return advantages, advantages + values


def main(args: Args):
    check_args(args)
    batch_size = int(args.num_envs * args.num_steps)
    minibatch_size = int(batch_size // args.num_minibatches)
    num_iterations = args.total_timesteps // batch_size
    run_dir = os.path.join(args.output_dir, f"{args.env_id}__{os.path.basename(__file__)[:-3]}__{args.seed}__{int(time.time())}")

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if args.cuda else "cpu")  # check_args turned --cuda off where CUDA is missing

    # env setup. NEXT_STEP autoreset (gymnasium's default, chosen on purpose): the step that ends an episode returns
    # the true final observation; the next step only resets that env, and its row is masked out (valids).
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, args.capture_video and not args.eval_episodes, os.path.join(run_dir, "videos"), args.gamma)
         for i in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
    )
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    action_dim = int(np.prod(envs.single_action_space.shape))

    agent = Agent(obs_dim, action_dim).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs_rms = None  # the observation statistics the policy acts with: the file's, else training's at the end
    # (a policy of normalized observations is useless without their statistics, CleanRL #425)
    if args.eval_model:
        obs_rms = load_model(args.eval_model, "ppo_continuous_action", args.env_id, agent).get("obs_rms")
        if not isinstance(obs_rms, dict) or "count" not in obs_rms or any(getattr(obs_rms.get(k), "shape", None) != (obs_dim,) for k in ("mean", "var")):
            fail("--eval-model", f"{args.eval_model} has no observation statistics (obs_rms) for {obs_dim} observations")

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, args.num_envs, obs_dim)).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs, action_dim)).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    valids = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    log = RunLog(args, run_dir, device, "ppo", ["learning_rate", "value_loss", "policy_loss", "entropy", "old_approx_kl", "approx_kl",
                                         "clipfrac", "explained_variance"], unit="iterations")
    status, global_step = "finished", 0

    # TRY NOT TO MODIFY: start the game
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs).reshape(args.num_envs, -1).to(device)
    next_done = np.zeros(args.num_envs, dtype=bool)  # carried across iterations: the first row after a done is a reset
    try:
        for iteration in range(1, num_iterations + 1):
            log.update(global_step)  # the first iterations (compilation, graph capture) are left out of steps/s
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / num_iterations
                lrnow = frac * args.learning_rate
                optimizer.param_groups[0]["lr"] = lrnow

            for step in range(0, args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                valids[step] = torch.Tensor(~next_done).to(device)  # 0 on a NEXT_STEP reset row

                # ALGO LOGIC: action logic
                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
                next_done = np.logical_or(termination, truncation)
                rewards[step] = torch.tensor(reward).to(device).view(-1)
                terminations[step] = torch.Tensor(termination).to(device)
                dones[step] = torch.Tensor(next_done).to(device)
                next_obs = torch.Tensor(next_obs).reshape(args.num_envs, -1).to(device)

                for i in np.flatnonzero(infos.get("_episode", [])):
                    log.episode(infos["episode"]["r"][i], infos["episode"]["l"][i])

            # bootstrap value if not done (next_obs is the true final observation if the last step ended an episode)
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages, returns = compute_gae(rewards, values, next_value, terminations, dones, valids, args.gamma, args.gae_lambda)

            # flatten the batch
            b_obs = obs.reshape((-1, obs_dim))
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape((-1, action_dim))
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_valids = valids.reshape(-1)

            # Optimizing the policy and value network. Reset rows stay in the minibatches with weight 0 (w below).
            b_inds = np.arange(batch_size)
            clipfracs = []
            for epoch in range(args.update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, minibatch_size):
                    end = start + minibatch_size
                    mb_inds = b_inds[start:end]
                    w = b_valids[mb_inds]
                    wsum = w.sum().clamp(min=1.0)

                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # calculate approx_kl http://joschu.net/blog/kl-approx.html
                        old_approx_kl = (-logratio * w).sum() / wsum
                        approx_kl = (((ratio - 1) - logratio) * w).sum() / wsum
                        clipfracs += [((((ratio - 1.0).abs() > args.clip_coef).float() * w).sum() / wsum).item()]

                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:  # mean and (unbiased) std over the valid rows
                        mean = (mb_advantages * w).sum() / wsum
                        std = (((mb_advantages - mean) ** 2 * w).sum() / (wsum - 1).clamp(min=1.0)).sqrt()
                        mb_advantages = (mb_advantages - mean) / (std + 1e-8)

                    # Policy loss
                    pg_loss1 = -mb_advantages * ratio
                    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                    pg_loss = (torch.max(pg_loss1, pg_loss2) * w).sum() / wsum

                    # Value loss
                    newvalue = newvalue.view(-1)
                    if args.clip_vloss:
                        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                        v_clipped = b_values[mb_inds] + torch.clamp(
                            newvalue - b_values[mb_inds],
                            -args.clip_coef,
                            args.clip_coef,
                        )
                        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                        v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                        v_loss = 0.5 * (v_loss_max * w).sum() / wsum
                    else:
                        v_loss = 0.5 * (((newvalue - b_returns[mb_inds]) ** 2) * w).sum() / wsum

                    entropy_loss = (entropy * w).sum() / wsum
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()

                if args.target_kl is not None and approx_kl > args.target_kl:
                    break

            valid = b_valids.cpu().numpy() > 0
            y_pred, y_true = b_values.cpu().numpy()[valid], b_returns.cpu().numpy()[valid]
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

            log.row(global_step, learning_rate=optimizer.param_groups[0]["lr"], value_loss=v_loss.item(), policy_loss=pg_loss.item(),
                    entropy=entropy_loss.item(), old_approx_kl=old_approx_kl.item(), approx_kl=approx_kl.item(),
                    clipfrac=float(np.mean(clipfracs)), explained_variance=float(explained_var))
    except KeyboardInterrupt:
        status = "interrupted"
    if not args.eval_model:  # env 0's NormalizeObservation statistics (each env keeps its own; the default --num-envs is 1)
        rms = envs.envs[0].get_wrapper_attr("obs_rms")
        obs_rms = {"mean": torch.tensor(rms.mean), "var": torch.tensor(rms.var), "count": float(rms.count)}
    envs.close()
    # deterministic: the mean action, on observations normalized as in training, with its statistics frozen
    mean, std = obs_rms["mean"].numpy(), np.sqrt(obs_rms["var"].numpy() + 1e-8)
    normalize = lambda o: np.clip((o - mean) / std, -10, 10).astype(np.float32)
    act = lambda o: agent.actor_mean(torch.from_numpy(normalize(o)).to(device)).detach().cpu().numpy()
    log.finish(global_step, status, act, {"agent": "ppo_continuous_action", "model": agent.state_dict(), "obs_rms": obs_rms})


# Plumbing, the same in every script but for the checks: bad input, evaluation, saved models, metrics and summary.
def check_args(args: Args):
    if args.env_id not in gym.registry:
        fail("--env-id", f"unknown environment {args.env_id!r} (gymnasium ids such as HalfCheetah-v4, Pendulum-v1)")
    env = gym.make(args.env_id)
    env.close()  # only its spaces are wanted
    if not isinstance(env.action_space, gym.spaces.Box):
        fail("--env-id", f"{args.env_id} has a {type(env.action_space).__name__} action space; this PPO needs a continuous (Box) one")
    check(args, "num_envs num_steps num_minibatches update_epochs total_timesteps", lambda v: v >= 1, "at least 1")
    check(args, "measure_burnin eval_episodes", lambda v: v >= 0, "at least 0")
    check(args, "target_kl", lambda v: v is None or v > 0, "positive (or left out)")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches != 0:
        fail("--num-minibatches", f"{args.num_minibatches} does not divide the batch --num-envs x --num-steps = {batch_size}")
    if batch_size // args.num_minibatches < 2:
        fail("--num-minibatches", f"minibatches of {batch_size // args.num_minibatches} row; at least 2 are needed")
    for flag, wanted, package in [("--track", args.track, "wandb"), ("--capture-video", args.capture_video, "moviepy")]:
        if wanted and importlib.util.find_spec(package) is None:
            fail(flag, f"needs {package}, which is not installed (pip install {package})")
    if args.capture_video and sys.platform == "linux" and not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")  # no display: MuJoCo renders offscreen through EGL
    if args.eval_model:  # evaluation only: no training (0 iterations)
        args.total_timesteps, args.eval_episodes = 0, args.eval_episodes or 10
    elif args.total_timesteps < batch_size:
        fail("--total-timesteps", f"{args.total_timesteps} is less than one rollout (--num-envs x --num-steps = {batch_size}): no iteration would run")
    if args.cuda and not torch.cuda.is_available():
        print("warning: --cuda: CUDA is not available, running on the CPU", file=sys.stderr)
        args.cuda = False


def evaluate(args, act, video_dir):
    """--eval-episodes episodes of `act` (observations -> actions, numpy) on one env, seeded apart from training, with
    training's wrappers but for the normalizations: `act` normalizes as training did; the returns are the raw rewards."""
    env = gym.make(args.env_id, render_mode="rgb_array" if args.capture_video else None)
    if args.capture_video:
        env = gym.wrappers.RecordVideo(env, video_dir, episode_trigger=lambda _: True)
    env = gym.wrappers.ClipAction(gym.wrappers.FlattenObservation(env))
    returns = []
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=args.seed + 100_000 + episode)  # training's envs are seeded seed .. seed + num_envs - 1
        done, episode_return = False, 0.0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(act(obs.reshape(1, -1))[0])
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
