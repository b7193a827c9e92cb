"""The size table of doc/sizes.md, measured: each script's lines, its part 1's and its stripped file's (cut.py), beside
its counterparts in CleanRL and LeanRL, whole and less their logging; then the statements of each script's `main` that
the stripped file goes without (marked `Run:`).

    python tools/sizes.py --cleanrl ../cleanrl --leanrl ../LeanRL           # rewrites both in doc/sizes.md
    python tools/sizes.py --cleanrl ../cleanrl --leanrl ../LeanRL --check   # says whether they are the ones there

Every length is in lines as ruff formats the file at CleanRL's 127 columns. An anchor "less its logging" is its file
with what only logs taken out, by one rule for all: the statements that call the logger (`writer.`, `wandb.`, `print`,
`pbar.set_description`), the `if args.track:` block, then, over and over until nothing changes, every statement that
assigns a name nothing reads any more (`start_time`, `clipfracs`, `old_approx_kl`, `avg_returns`, ...), every block
left empty, and the imports left unused. Our stripped files keep their one print of each finished episode's return.
"""

import argparse
import ast
import collections
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import cut  # noqa: E402 (tools/cut.py, beside this file)

# each script: its counterpart in CleanRL (vwxyzjn/cleanrl) and in LeanRL (pytorch-labs/LeanRL), and a note on it
ANCHORS = {
    "ppo_atari": ("ppo_atari_envpool.py", "ppo_atari_envpool.py"),
    "ppo_atari_torchcompile": (None, "ppo_atari_envpool_torchcompile.py"),
    "ppo_atari_multigpu_torchcompile": ("ppo_atari_multigpu.py", None),
    "ppo_continuous_action": ("ppo_continuous_action.py", "ppo_continuous_action.py"),
    "ppo_continuous_action_torchcompile": (None, "ppo_continuous_action_torchcompile.py"),
    "ppo_continuous_action_ray_torchcompile": (None, None),
    "sac_continuous_action": ("sac_continuous_action.py", "sac_continuous_action.py"),
    "sac_continuous_action_torchcompile": (None, "sac_continuous_action_torchcompile.py"),
    "td3_continuous_action": ("td3_continuous_action.py", "td3_continuous_action.py"),
    "td3_continuous_action_torchcompile": (None, "td3_continuous_action_torchcompile.py"),
    "dqn": ("dqn.py", "dqn.py"),
    "dqn_torchcompile": (None, "dqn_torchcompile.py"),
}
NOTES = {"ppo_atari_multigpu.py": "gym's Atari wrappers"}
VARIANTS = {"ppo_atari_multigpu_torchcompile", "ppo_continuous_action_ray_torchcompile"}  # no stripped file
LOGGERS = re.compile(r"^(writer|wandb|pbar)\.|^print$|^tqdm\.write$")


def formatted_lines(text, name):
    return len(cut.ruff_format(text, name).splitlines())


def main_of(source):
    """The `main` function of a script's source, as an ast node."""
    return next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "main")


def ours(stem):
    """(lines, part 1's lines, the stripped file's lines or None) of scripts/<stem>.py."""
    path = ROOT / "scripts" / f"{stem}.py"
    source = path.read_text()
    main = main_of(source)
    stripped = None if stem in VARIANTS else len(cut.cut(path).splitlines())
    lines, end = source.splitlines(), main.end_lineno
    while lines[end].startswith("    #"):  # main's last comment lines (its `# Cut:`) are main's
        end += 1
    return len(lines), end, stripped


def logs(node):
    """Whether a statement only logs: it calls a logger, or it is the `if args.track:` block."""
    if isinstance(node, ast.If) and ast.unparse(node.test) == "args.track":
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return bool(LOGGERS.search(ast.unparse(node.value.func)))
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):  # writer = SummaryWriter(...)
        return ast.unparse(node.value.func) in ("SummaryWriter", "wandb.init")
    return False


def without_logging(source):
    """The source less its logging (the module docstring's rule), as text: the lines of the statements that go
    removed, with the comment lines right above them."""
    tree = ast.parse(source)
    gone = set()  # the statements taken out
    fields = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in c.body}  # Args' fields stay

    def walk(node):  # the nodes that stay
        yield node
        for child in ast.iter_child_nodes(node):
            if id(child) not in gone:
                yield from walk(child)

    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}  # the file's functions
    assigned = {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                for t in getattr(n, "targets", None) or [n.target] if isinstance(t, ast.Name)}  # fmt: skip

    def calls_own(node):  # it calls one of the file's functions (an update, the policy): it works, whatever it logs
        calls = [n.func for n in ast.walk(node) if isinstance(n, ast.Call)]
        return any(isinstance(f, ast.Name) and f.id in own for f in calls)

    def loads(node):
        return collections.Counter(n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))

    def dead(node, read):
        """`read`: the names the rest of the file reads. Only a name the file read before its logging went qualifies:
        what the anchor itself never reads is its own, not its logging's."""
        if logs(node):
            return True
        if id(node) in fields:
            return False
        unread = [] if id(node) in gone else [name for name in first_reads if not read[name] - loads(node)[name]]
        targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
        if calls_own(node) and not isinstance(node, (ast.If, ast.For, ast.With, ast.While)):
            return False
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and all(
            isinstance(t, ast.Name) and t.id in unread for t in targets
        ):
            return True
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):  # avg_returns.append(r), unread
            func = node.value.func
            collects = isinstance(func, ast.Attribute) and func.attr in ("append", "extend")
            return collects and isinstance(func.value, ast.Name) and func.value.id in assigned and func.value.id in unread
        if isinstance(node, (ast.If, ast.For, ast.With, ast.While)):  # a block left empty
            return all(id(s) in gone for s in node.body + getattr(node, "orelse", []))
        return False

    first_reads = set(loads(tree))
    changed = True
    while changed:
        changed = False
        read = loads(tree)
        for node in list(walk(tree)):
            if isinstance(node, ast.stmt) and id(node) not in gone and dead(node, read):
                gone.add(id(node))
                changed = True
    lines = source.splitlines()
    drop = set()
    for node in ast.walk(tree):
        if id(node) in gone:
            row = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            while row > 1 and lines[row - 2].strip().startswith("#"):
                row -= 1
            drop.update(range(row, node.end_lineno + 1))
    text = "\n".join(line for row, line in enumerate(lines, start=1) if row not in drop) + "\n"
    # the imports left unused (ruff's F401 fix)
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F401", "--fix", "--stdin-filename", "x.py", "-"],
        input=text,
        capture_output=True,
        text=True,
    )
    return done.stdout or text


def table(cleanrl, leanrl):
    rows = ["| file | lines | part 1 (the algorithm) | stripped (`tools/cut.py`) | CleanRL, whole / less logging "]
    rows[0] += "| LeanRL, whole / less logging |"
    rows.append("| --- | --- | --- | --- | --- | --- |")
    for stem, anchors in ANCHORS.items():
        lines, part1, stripped = ours(stem)
        cells = []
        for folder, name in zip((cleanrl, leanrl), anchors):
            if name is None:
                cells.append("-")
                continue
            source = (folder / name).read_text()
            whole, less = formatted_lines(source, name), formatted_lines(without_logging(source), name)
            note = f", {NOTES[name]}" if name in NOTES else ""
            cells.append(f"{whole} / {less} (`{name}`{note})")
        shown = "-" if stripped is None else str(stripped)
        rows.append(f"| `scripts/{stem}.py` | {lines} | {part1} | {shown} | {cells[0]} | {cells[1]} |")
    return "\n".join(rows) + "\n"


def marked(stem):
    """The statements of `main` in scripts/<stem>.py that carry `Run:` on their first line (what the stripped file goes
    without; a marked `with` keeps its body, whose marked statements are listed too), each as that line reads."""
    source = (ROOT / "scripts" / f"{stem}.py").read_text()
    lines, runs = source.splitlines(), cut.comments(source, "Run:")
    found = []

    def visit(statements):
        for node in statements:
            if node.lineno in runs:
                found.append(lines[node.lineno - 1].strip())
                if not isinstance(node, ast.With):
                    continue
            for body in cut.bodies(node):
                visit(body)

    visit(main_of(source).body)
    return found


def marked_lists():
    """doc/sizes.md's lists of marked statements, a folded block per script."""
    blocks = []
    for stem in ANCHORS:
        statements = marked(stem)
        summary = f"<code>scripts/{stem}.py</code>: {len(statements)} statements"
        blocks.append(f"<details><summary>{summary}</summary>\n\n```python\n" + "\n".join(statements) + "\n```\n\n</details>")
    return "\n".join(blocks) + "\n"


def between(text, name):
    """(before, inside, after) the markers <!-- name --> and <!-- /name --> of a page."""
    head, rest = text.split(f"<!-- {name} -->\n", 1)
    inside, tail = rest.split(f"<!-- /{name} -->", 1)
    return head, inside, tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cleanrl", required=True, type=pathlib.Path, help="a checkout of vwxyzjn/cleanrl (fe8d8a0)")
    parser.add_argument("--leanrl", required=True, type=pathlib.Path, help="a checkout of pytorch-labs/LeanRL (8dbb633)")
    parser.add_argument("--check", action="store_true", help="only say whether doc/sizes.md holds this table")
    args = parser.parse_args()
    for folder in (args.cleanrl / "cleanrl", args.leanrl / "leanrl"):
        if not folder.is_dir():
            parser.error(f"no folder {folder}: give a checkout of the repository")
    page = ROOT / "doc" / "sizes.md"
    text = page.read_text()
    new = dict(sizes=table(args.cleanrl / "cleanrl", args.leanrl / "leanrl"), marked=marked_lists())
    if args.check:
        same = all(between(text, name)[1] == block for name, block in new.items())
        print("doc/sizes.md: the table and lists are the measured ones" if same else "doc/sizes.md: they differ")
        sys.exit(0 if same else 1)
    for name, block in new.items():
        head, _, tail = between(text, name)
        text = head + f"<!-- {name} -->\n" + block + f"<!-- /{name} -->" + tail
    page.write_text(text)
    print(new["sizes"], end="")


if __name__ == "__main__":
    main()
