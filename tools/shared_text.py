"""The one text of each definition the scripts share, written into them by tools/shared.py (its
docstring says how). Edit a text here, then run `python tools/shared.py`; never import this file: the
scripts stand alone. Each text follows a line `# === NAME: STEM`, STEM the file whose copy it is exactly (and the hash
of the text last written, which the writer keeps: an edit of a copy by hand is refused, not lost)."""

# === __main__: dqn  written: e7e495866b118a5d
if __name__ == "__main__":
    state = main(tyro.cli(Args))
    sys.exit({"interrupted": 130, "terminated": 143, "diverged": 1, "failed": 1}.get(state["status"], 0))


# === start_run: dqn  written: 31a10f57c17cd88f
def start_run(args, run_dir, columns):
    """Before any work, the flags checked and --resume's checkpoint read; then the run folder, with these metrics."""
    model = check_args(args)
    saved = resume(args) if args.resume else None
    return Run(args, saved, model).open(run_dir, columns.split())


# === check: dqn  written: b9485f484b12ec13
def check(args, names, ok, allowed):  # one line naming the flag if ok(value) is false (NaN: always)
    for name in names.split():
        if getattr(args, name) is not None and not ok(getattr(args, name)):  # None: left out
            sys.exit(f"error: --{name.replace('_', '-')}: must be {allowed}, got {getattr(args, name)}")


# === check_run_flags: dqn  written: 41302c52f8ae50ce
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


# === resume: dqn  written: a73c3ba546d6d073
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


# === load_checkpoint: dqn  written: be2750f3cf6d03c4
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


# === RESUMABLE: dqn  written: 8168c6ba5a150ed4
RESUMABLE = ["total_timesteps", "resume", "checkpoint_interval", "exp_name", "output_dir", "track", "wandb_project_name"]
RESUMABLE += ["wandb_entity", "save_model", "eval_episodes", "capture_video", "measure_burnin", "log_interval"]


# === CHECKPOINT_VERSION: dqn  written: 42fd33631428dd9d
CHECKPOINT_VERSION = 3  # 1, 2 (refused): numpy arrays as tensors; logged values among the loop's


# === NUMPY: dqn  written: 04055af47f13b735
NUMPY = [np._core.multiarray._reconstruct, np._core.multiarray.scalar, np.ndarray, np.dtype]
NUMPY += [type(np.dtype(kind)) for kind in "?bhilqBHILQefd"]  # its dtypes: bool, integers, floats


# === Run: dqn  written: fe9f877e07b4e7d2
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


# === states: dqn  written: 7b7b47ceb66685c7
def states(parts):
    """What a checkpoint keeps of each learned part: a tensor, or the state_dict of a network, optimizer or buffer."""
    return {name: part.detach() if isinstance(part, torch.Tensor) else part.state_dict() for name, part in parts.items()}


# === load_states: dqn  written: 8e03be3b9153f3cc
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


# === random_streams: dqn  written: 080c1b27fdf06d31
def random_streams():
    """Python's, numpy's and torch's random streams (every GPU's too)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return dict(python=random.getstate(), numpy=np.random.get_state(legacy=False), torch=torch.get_rng_state(), cuda=cuda)


# === set_random_streams: dqn  written: 9935daaab6173e81
def set_random_streams(streams):
    random.setstate(streams["python"])
    np.random.set_state(streams["numpy"])
    torch.set_rng_state(streams["torch"])
    if streams["cuda"]:
        torch.cuda.set_rng_state_all(streams["cuda"])


# === silence_v4_notices: ppo_continuous_action  written: 5ebf5598f131eb68
def silence_v4_notices():
    """CleanRL's -v4 MuJoCo tasks are kept (its returns compare); silenced, and only these: gymnasium's advice to move
    to -v5, and MuJoCo's note on the v4 models' deprecated 'settotalmass' (printed, and logged to ./MUJOCO_LOG.TXT)."""

    def mujoco_warning(text):
        if "settotalmass" not in text:  # MuJoCo's other warnings print as MuJoCo prints them
            print(f"WARNING: {text}", file=sys.stderr)

    warnings.filterwarnings("ignore", message=r".*is out of date\. You should consider upgrading to version `v5`")
    mujoco.set_mju_user_warning(mujoco_warning)


# === bf16_matmuls: sac_continuous_action_torchcompile  written: 2758acafad58bcb9
def bf16_matmuls(cuda):
    """Whether the device multiplies bf16 matrices natively (a device without it would emulate them, slower than fp32;
    torch.cuda counts emulation as support unless told not to)."""
    if cuda:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


# === obs_statistics: ppo_continuous_action  written: db52df31c54390b2
def obs_statistics(rms):
    """NormalizeObservation's running statistics (env 0's: each env keeps its own), as checkpoints and model.pt keep them."""
    return {"mean": torch.tensor(rms.mean), "var": torch.tensor(rms.var), "count": float(rms.count)}


# === explained_variance: ppo_atari  written: 3776d62b48284fa9
def explained_variance(values, returns, w):
    """1 - Var[returns - values] / Var[returns] over the valid rows, on the device. With no variance to explain: 0
    (sklearn's convention; CleanRL logs nan, which would read as diverged)."""
    n = w.sum().clamp(min=1.0)

    def var(x):  # the variance over the valid rows
        return (w * (x - (w * x).sum() / n) ** 2).sum() / n

    var_y = var(returns)
    return torch.where(var_y == 0, torch.zeros_like(var_y), 1 - var(returns - values) / var_y)


# === envs_ignore_signals: dqn  written: b18c4358834d586e
@contextlib.contextmanager
def envs_ignore_signals():
    """Envs made inside (--async-envs workers too) leave Ctrl-C, SIGTERM and SIGUSR1 to this process, which saves them."""
    handlers = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


# === Snapshot: dqn  written: 93a9054f839314a0
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


# === layer_state: dqn  written: aba372c32856d82b
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


# === set_layer_state: dqn  written: 7b1a67815af90fc0
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


# === env_state: dqn  written: 80ccfd34537d30e8
def env_state(envs):
    """The vector env's wrappers, each env (get_attr reaches the workers too), the action space's random stream."""
    layers, env = [], envs
    while isinstance(env, gym.vector.VectorWrapper):
        layers.append(layer_state(env))
        env = env.env
    action_space = envs.single_action_space.np_random.bit_generator.state
    return dict(layers=layers, envs=list(env.get_attr("snapshot")), action_space=action_space)


# === set_env_state: dqn  written: 85367f8bdffd8aa6
def set_env_state(envs, state):
    """Put the state back on envs made and reset as the run made them."""
    env = envs
    for layer in state["layers"]:
        set_layer_state(env, layer)
        env = env.env
    envs.single_action_space.np_random.bit_generator.state = state["action_space"]
    env.set_attr("snapshot", state["envs"])


# === env_physics: ppo_continuous_action  written: dd27a461a7f5b606
def env_physics(env):  # a MuJoCo env's (model, data), None for another env
    return (env.model, env.data) if isinstance(getattr(env, "data", None), mujoco.MjData) else None


# === env_state: ppo_atari  written: c474aa7f8cdc3a06
def env_state(envs):
    """envpool's envs cannot be saved: a checkpoint holds none of their state."""
    return None


# === set_env_state: ppo_atari  written: 5a431126a2ea08ee
def set_env_state(envs, state):
    """A resumed run's envpool envs start new episodes (the rest of the run goes on exactly)."""
    print("warning: --resume: envpool's envs cannot be saved: they start new episodes", file=sys.stderr)


# === evaluate: dqn  written: 6f5da99a90181941
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


# === evaluate: ppo_atari  written: 6cc312c63dc0a83e
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


# === evaluate: ppo_continuous_action  written: 3f5bec25f4ea5aaf
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


# === GRAPH_MODES: dqn_torchcompile  written: 7dbc2374acc0f2fc
GRAPH_MODES = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}


# === compiled: dqn_torchcompile  written: f6011d1ffd0bc499
def compiled(fn, mode: str, **kwargs):
    """torch.compile in `mode` (--compile-mode); in GRAPH_MODES, whose replays overwrite their outputs, clones of them."""
    fn = torch.compile(fn, mode=mode, **kwargs)
    if mode not in GRAPH_MODES:
        return fn

    def call(*inputs, **named_inputs):
        torch.compiler.cudagraph_mark_step_begin()
        return tree_map_only(torch.Tensor, torch.clone, fn(*inputs, **named_inputs))

    return call


# === graphed: dqn_torchcompile  written: 1234ebca86b139e1
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


# === adam_settings: dqn_torchcompile  written: 4be5356ed9e07b95
def adam_settings(compile: bool, cudagraphs: bool, device: torch.device) -> dict:
    # Speed: Adam plain under --compile (inductor fuses it), capturable under CUDA graphs, fused in eager
    if compile:
        return {}
    if cudagraphs and device.type == "cuda":
        # CudaGraphModule's warm-up calls run the step uncaptured on purpose: torch's warning about it is not for the user
        warnings.filterwarnings("ignore", message="This instance was constructed with capturable=True")
        return dict(capturable=True, foreach=True)
    return dict(fused=True)


# === layer_init: ppo_atari  written: 50db606933593729
def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


# === malloc_keep_heap: ppo_atari_multigpu_torchcompile  written: 3ac5e713c6450d2a
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


# === EpisodeTracker: ppo_atari  written: 7a1bb94d72ae000c
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


# === speed_flags: dqn_torchcompile  written: ad1034bf288be71b
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


# === speed_flags: sac_continuous_action_torchcompile  written: bbd35f730484635c
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
    if args.precision == "bf16" and not bf16_matmuls(cuda):
        where = "GPU" if cuda else "CPU (it needs AVX512-BF16 or AMX)"
        sys.exit(f"error: --precision bf16: this {where} has no native bf16 matmuls: emulated, they are slower than fp32")
    if args.compile and not cuda:  # (the builder says why)
        print("warning: --compile: this file runs eager on a CPU, where compiling does not pay", file=sys.stderr)
    if args.compile_mode in GRAPH_MODES and not cuda:
        print(f"warning: --compile-mode {args.compile_mode}: needs CUDA, running without CUDA graphs", file=sys.stderr)
        args.compile_mode = GRAPH_MODES[args.compile_mode]
