"""The baselines' training steps as their files write them. CleanRL keeps the step that learns inline in main(), so the
parity tests take it from the file itself: the block of main() that learns, compiled from the file's own text (with
its own line numbers, so that a failure points into the baseline), run on a test's networks and batch. A change in the
baseline changes what the parity tests run; nothing here is a copy of it."""

import ast

from helpers.scripts import SCRIPTS


def main_block(script, kind, header):
    """The one statement of main() of this kind (ast.If, ast.For) whose test or target reads `header`, compiled."""
    path = SCRIPTS / f"{script}.py"
    main = next(n for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef) and n.name == "main")
    found = [
        node
        for node in ast.walk(main)
        if isinstance(node, kind) and ast.unparse(node.test if kind is ast.If else node.target) == header
    ]
    assert len(found) == 1, f"{script}.py: {len(found)} {kind.__name__} statements on {header!r} in main(), not one"
    return compile(ast.Module(body=found, type_ignores=[]), str(path), "exec")


def training_block(script):
    """SAC's, TD3's and DQN's learning step: main()'s `if global_step > args.learning_starts:` block."""
    return main_block(script, ast.If, "global_step > args.learning_starts")


def minibatch_loop(script):
    """PPO's minibatch step: main()'s `for start in range(0, batch_size, minibatch_size):` loop."""
    return main_block(script, ast.For, "start")


def run(code, module, **names):
    """Run a block in the namespace main() would give it: the module's globals, then these locals; returns them all
    (what the block computed, by the names the baseline gives them)."""
    scope = dict(vars(module), **names)
    exec(code, scope)
    return scope
