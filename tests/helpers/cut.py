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
    """What the cut left behind in a stripped file's text, one line each: a name a function fills and never reads, or
    stores and overwrites before any read can see the value (`updates = 0` before `if ...: updates = ...`), a
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
        problems += [
            f"line {line}: {getattr(function, 'name', 'lambda')} stores {name} and overwrites it before any read"
            for line, name in overwritten(function)
            if name in reads
        ]
    members = [k.arg for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords if _namespace(n) and k.arg]
    read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)}
    problems += [f"a bundle member never read: {m}" for m in members if m not in read]
    words = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    words += [n.value.value for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)]
    problems += [f"words for what the file does not do: {w.strip()[:100]}" for w in words if OUTPUTS.search(str(w))]
    return problems


def _namespace(call):
    return isinstance(call.func, ast.Name) and call.func.id == "SimpleNamespace"


LOOPS = (ast.For, ast.AsyncFor, ast.While)


def overwritten(function):
    """(line, name) of each plain assignment (`name = ...`) of a function whose value no read can see: every path from it
    meets another assignment of the name, or the function's end, first. Conservative: a name a nested function reads,
    or a `try` or a header that names it, counts as read; a loop's body may run again from its top, or not at all."""
    if isinstance(function, ast.Lambda):
        return []
    found = []
    nested = [n for n in ast.walk(function) if isinstance(n, (ast.FunctionDef, ast.Lambda)) and n is not function]
    closures = set().union(*[_loads(n) for n in nested])  # what a nested function reads may be read at any call

    def assigned(statement):  # the names a plain assignment stores, its value not reading them
        if isinstance(statement, ast.Assign) and all(isinstance(t, ast.Name) for t in statement.targets):
            return {t.id for t in statement.targets} - _loads(statement.value)
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            return {statement.target.id} - _loads(statement.value)
        return set()

    def fate(statements, name):
        """What meets the name first along these statements: "read", "killed" (assigned again) or "open" (neither)."""
        for s in statements:
            if name in assigned(s):
                return "killed"
            if isinstance(s, (ast.If, ast.With, ast.AsyncWith, *LOOPS)):
                headers = [getattr(s, "test", None), getattr(s, "iter", None)]
                headers += [item.context_expr for item in getattr(s, "items", [])]
                if any(name in _loads(h) for h in headers):
                    return "read"
                body, orelse = fate(s.body, name), fate(getattr(s, "orelse", []), name)
                if "read" in (body, orelse):
                    return "read"
                if isinstance(s, ast.If) and body == orelse == "killed":  # both branches assign it
                    return "killed"
                if isinstance(s, (ast.With, ast.AsyncWith)) and body == "killed":
                    return "killed"
            elif name in _loads(s):
                return "read"
            elif isinstance(s, ast.Try) and name in {n.id for n in ast.walk(s) if isinstance(n, ast.Name)}:
                return "read"  # (a store in a try may or may not happen: taken as read)
            elif isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
                return "read"
        return "open"

    def visit(statements, frames):  # frames: (statement list, index, the body entered) from the function down
        for k, s in enumerate(statements):
            for name in assigned(s) - closures:
                after = fate(statements[k + 1 :], name)
                for outer, i, entered in reversed(frames):
                    if after != "open":
                        break
                    node = outer[i]
                    if isinstance(node, LOOPS) and entered is node.body:  # its body again from the top
                        if name in _loads(getattr(node, "test", None)) or fate(node.body, name) == "read":
                            after = "read"
                            break
                    after = fate(outer[i + 1 :], name)
                if after != "read":
                    found.append((s.lineno, name))
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):  # (their own scope)
                for body in cut.bodies(s):
                    visit(body, frames + [(statements, k, body)])

    visit(function.body, [])
    return found


def _loads(node):
    """The names an expression or statement reads."""
    return set() if node is None else {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
