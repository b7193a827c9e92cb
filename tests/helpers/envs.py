"""A hand-made environment whose episodes end where a test knows they do, for the tests of what a replay buffer stores
on a truncation and on a termination."""

import gymnasium as gym
import numpy as np


class Counter(gym.Env):
    """obs = [episode id, t], reward t; episodes alternate: truncated at t=3, terminated at t=4."""

    observation_space = gym.spaces.Box(-100, 100, (2,), np.float32)

    def __init__(self, action_space):
        self.action_space = action_space

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.episode = getattr(self, "episode", -1) + 1
        self.t = 0
        return np.array([self.episode, 0], np.float32), {}

    def step(self, action):
        self.t += 1
        terminated = self.episode % 2 == 1 and self.t == 4
        truncated = self.episode % 2 == 0 and self.t == 3
        return np.array([self.episode, self.t], np.float32), float(self.t), terminated, truncated, {}


# The first transitions of one Counter env, as a replay buffer must store them: (obs, next_obs, reward, terminated).
COUNTER_TRANSITIONS = [
    ((0, 0), (0, 1), 1, False),
    ((0, 1), (0, 2), 2, False),
    ((0, 2), (0, 3), 3, False),  # truncated: true final obs, bootstraps
    ((1, 0), (1, 1), 1, False),
    ((1, 1), (1, 2), 2, False),
    ((1, 2), (1, 3), 3, False),
    ((1, 3), (1, 4), 4, True),  # terminated
    ((2, 0), (2, 1), 1, False),
]


def run_on_counter(module, action_space, tmp_path, **args):
    """A script's own main() on Counter (with these actions), on the CPU: 14 steps, a metrics row every 7, updates
    from step 12 on (a batch of 4 out of 50 rows)."""
    args = module.Args(
        env_id="Counter-v0",
        total_timesteps=14,
        learning_starts=12,
        batch_size=4,
        buffer_size=50,
        measure_burnin=0,
        log_interval=7,
        output_dir=str(tmp_path),
        cuda=False,
        **args,
    )
    gym.register(args.env_id, entry_point=lambda **kw: Counter(action_space))
    try:
        module.main(args)
    finally:
        gym.registry.pop(args.env_id)


def record_adds(monkeypatch, buffer_cls):
    """Watch buffer_cls.add as the loop calls it: returns a list that fills with (buffer, obs, next_obs, rewards,
    terminations), copies of what each call was given."""
    added, add = [], buffer_cls.add

    def recording_add(self, obs, next_obs, actions, rewards, terminations):
        added.append((self, obs.copy(), next_obs.copy(), np.array(rewards, copy=True), np.array(terminations, copy=True)))
        return add(self, obs, next_obs, actions, rewards, terminations)

    monkeypatch.setattr(buffer_cls, "add", recording_add)
    return added


def first_env_transitions(added):
    """The transitions of the first env among what record_adds saw, as COUNTER_TRANSITIONS writes them."""
    return [(tuple(o[0]), tuple(n[0]), float(r[0]), bool(d[0])) for _, o, n, r, d in added]


class Target(gym.Env):
    """A task PPO learns in a few thousand steps: observe a target in [-3, 3], act on it, reward -(action - target)^2;
    16 steps an episode. A random policy (N(0, 1)) scores about -64 an episode, a perfect one 0. Registered as
    `helpers.envs:Target-v0` (gymnasium's module:id form, so that env runners in their own processes import it too)."""

    observation_space = gym.spaces.Box(-3, 3, (1,), np.float32)
    action_space = gym.spaces.Box(-5, 5, (1,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.target = self.np_random.uniform(-3, 3, (1,)).astype(np.float32)
        return self.target, {}

    def step(self, action):
        reward = -float(np.sum((action - self.target) ** 2))
        self.t += 1
        self.target = self.np_random.uniform(-3, 3, (1,)).astype(np.float32)
        return self.target, reward, False, self.t == 16, {}


gym.register("Target-v0", entry_point=Target)
