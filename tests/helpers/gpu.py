"""The logic of the GPU checks: which -m expressions select the gpu tests, and which host-device syncs a loop may make."""


def selects_gpu(markexpr):
    """Whether a -m expression asks for the gpu tests: `-m gpu` and `-m "gpu and not compile"` do; no -m,
    `-m "not gpu"` and `-m compile` do not."""
    words = markexpr.replace("(", " ").replace(")", " ").split()
    return "gpu" in words and "not gpu" not in " ".join(words)


def sync_problems(syncs, source, policy_calls, rows):
    """What is wrong with the host-device syncs a loop made after its burn-in, each (file, line number, line text).
    Allowed: on a line of the script that copies to the host with `.cpu()`, one per policy call (the action the env
    needs: the copy of the observation to the device sits on that line too, and must not add one); on a line that
    reads with `.tolist()`, one per metrics row (the logged values). Anything else is a problem, and so are more."""
    action = [w for w in syncs if w[0] == source and ".cpu()" in w[2]]
    logged = [w for w in syncs if w[0] == source and ".tolist()" in w[2]]
    problems = [
        f"a sync at {f}:{n}: {text}" for f, n, text in sorted({w for w in syncs if w not in action and w not in logged})
    ]
    if len(action) > policy_calls:
        problems.append(f"{len(action)} syncs on the action's lines for {policy_calls} policy calls")
    if len(logged) > rows:
        problems.append(f"{len(logged)} reads of the logged values for {rows} metrics rows")
    return problems
