"""tools/cut.py, the project's command that writes the file a copier takes: loaded here as a module, for the tests
that check its rules and the stripped files' sizes; and what a stripped file must not hold (`leftovers`)."""

import ast
import io
import re
import tokenize

from helpers.scripts import ROOT, load_tool

cut = load_tool(ROOT / "tools" / "cut.py")

# words for what only the appendix writes or reads: a stripped file's comments and docstrings name none of them
OUTPUTS = re.compile(
    r"metrics\.csv|summary\.json|model\.pt|checkpoint|tensorboard|wandb|--eval-model|--eval-episodes|--resume"
    r"|--save-model|the evaluation|for evaluation|evaluation's",
    re.IGNORECASE,
)
FILLING = {"update", "append", "extend", "add", "insert", "setdefault"}  # a call that fills its receiver, reads nothing


def leftovers(text):
    """What the cut left behind in a stripped file's text, one line each: a name a function fills and never reads, a
    bundle member (a SimpleNamespace keyword) never read, a comment or docstring naming an output the file does not
    write."""
    tree = ast.parse(text)
    problems = []
    for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))]:
        stored = {
            t.id
            for n in ast.walk(function)
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        filled = set()
        for n in ast.walk(function):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in FILLING:
                if isinstance(n.func.value, ast.Name):
                    filled.add(id(n.func.value))
            if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                filled.add(id(n.target))
        reads = {
            n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in filled
        }
        for name in sorted(stored - reads):
            problems.append(f"line {function.lineno}: {getattr(function, 'name', 'lambda')} stores {name} and never reads it")
    members = [k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if _namespace(n) and k.arg]
    read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}
    problems += [f"a bundle member never read: {m}" for m in members if m not in read]
    words = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    words += [n.value.value for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)]
    problems += [f"words for what the file does not do: {w.strip()[:100]}" for w in words if OUTPUTS.search(str(w))]
    return problems


def _namespace(call):
    return isinstance(call.func, ast.Name) and call.func.id == "SimpleNamespace"
