"""The file a copier takes: a script's part 1, without what runs the run, formatted.

    python tools/cut.py scripts/sac_continuous_action_torchcompile.py -o sac.py
    python tools/cut.py scripts/dqn.py > dqn.py

Each script cuts in two: part 1, the algorithm, then an appendix (from the line that opens with `# Appendix`) with
what runs the run: flag checks, the run folder and its metrics, checkpoints, evaluation, saved models. The stripped
file is part 1 with each statement whose first line carries a comment beginning `Run:` removed, ended by
`if __name__ == "__main__": main(tyro.cli(Args))`:

- a marked `with` keeps its body, one level out (its header goes, with the comment lines right above it); any other
  marked statement goes with its block, and with the comment lines right above it; a marked field of `Args` goes with
  its docstring (its flag is the appendix's);
- a comment line beginning `# Cut:` right under a marked statement, at its indentation, takes its place: the code after
  `Cut:` (the stripped file prints each finished episode's return there, and closes its envs at the end of `main`,
  as CleanRL's files do);
- a block left empty holds `pass`.

The result is formatted by ruff (line length 127, as the scripts), so that it is the file the tests train, byte for
byte (ruff==0.17.6, requirements/requirements.txt). It keeps the algorithm's and the speed flags, each of which it
reads; it loses the checks of mistyped flags, the run folder, metrics.csv, TensorBoard, checkpoints and --resume,
Ctrl-C and SIGTERM handling, --save-model, --eval-model, --eval-episodes and --track.
"""

import argparse
import ast
import io
import pathlib
import subprocess
import sys
import tokenize

GUARD = '\n\nif __name__ == "__main__":\n    main(tyro.cli(Args))\n'


def comments(source, prefix):
    """The lines that carry a comment beginning with `prefix` (after the `#`), and the comment's text after it."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    found = {}
    for t in tokens:
        if t.type == tokenize.COMMENT and t.string[1:].strip().startswith(prefix):
            found[t.start[0]] = t.string[1:].strip()[len(prefix) :].strip()
    return found


def bodies(node):
    """The statement lists a compound statement holds (body, else, finally, each except's)."""
    if not isinstance(node, (ast.stmt, ast.Module, ast.ExceptHandler)):
        return []
    found = [getattr(node, field) for field in ("body", "orelse", "finalbody") if getattr(node, field, None)]
    return found + [handler.body for handler in getattr(node, "handlers", [])]


def strip(source):
    """The stripped file's text, from a whole script's, before formatting."""
    lines = source.splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("# Appendix")), None)
    if end is None:
        raise ValueError("no line opens with '# Appendix': not one of the scripts")
    lines = lines[:end]
    part1 = "\n".join(lines) + "\n"
    variant = [m for m in ("Runners:", "DDP:") if comments(part1, m)]
    if variant:
        raise ValueError(f"a variant file (its {variant[0]} lines use the appendix): cut its core file instead")
    marked = comments(part1, "Run:")
    cuts = {row: code for row, code in comments(part1, "Cut:").items() if lines[row - 1].lstrip().startswith("# Cut:")}
    gone, dedent, kept_withs, replaced = set(), [0] * (len(lines) + 2), [], {}

    def first_line(node):
        return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])

    tree = ast.parse(part1)
    firsts = {first_line(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)} | {
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.stmt)
    }
    stray = sorted(set(marked) - firsts)
    if stray:
        raise ValueError(f"line {stray[0]}: a Run: comment on no statement's first line (it would mark nothing)")

    def visit(statements, in_class=False):
        for k, node in enumerate(statements):
            if first_line(node) in marked:  # (a decorator's line marks its function)
                marked.setdefault(node.lineno, marked[first_line(node)])
            if node.lineno in marked and isinstance(node, (ast.With, ast.AsyncWith)):
                kept_withs.append(node)
                row = node.lineno  # the header, and the comment lines right above it, which say what it does
                while lines[row - 2].strip().startswith("#") and row - 1 not in marked and row - 1 not in cuts:
                    row -= 1
                gone.update(range(row, node.body[0].lineno))  # the body stays, one level out
                shift = node.body[0].col_offset - node.col_offset
                for row in range(node.body[0].lineno, node.end_lineno + 1):
                    dedent[row] += shift
            elif node.lineno in marked:
                if lines[node.lineno - 1].lstrip().startswith("elif "):  # its span runs over the else: say so
                    raise ValueError(f"line {node.lineno}: a marked elif is not cut (mark its statements)")
                row, last = first_line(node), node.end_lineno
                # the comment lines right above it go with it (not the file's header, above its first statement)
                while row > 1 and lines[row - 2].strip().startswith("#") and row - 1 not in marked and row - 1 not in cuts:
                    if node is tree.body[0]:
                        break
                    row -= 1
                following = statements[k + 1] if k + 1 < len(statements) else None
                if in_class and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
                    last = following.end_lineno  # a field's docstring goes with the field
                gone.update(range(row, last + 1))
                if last + 1 in cuts and lines[last].index("#") == node.col_offset:  # `# Cut:` takes its place
                    replaced[node.lineno] = last + 1
                continue
            for body in bodies(node):
                visit(body, in_class=isinstance(node, ast.ClassDef))

    visit(tree.body)
    orphans = sorted(set(cuts) - {cut_row for cut_row in replaced.values()})
    if orphans:
        raise ValueError(f"line {orphans[0]}: a '# Cut:' line right under no marked statement at its indentation")
    # a block whose statements all went holds `pass`
    kept = {node.lineno for node in kept_withs}

    def removed(node):  # (an except clause goes with its marked try)
        return (
            isinstance(node, (ast.stmt, ast.ExceptHandler))
            and node.lineno in gone
            and node.lineno not in kept | replaced.keys()
        )

    passes = {}
    for node in ast.walk(ast.parse(part1)):
        for body in bodies(node):
            if not removed(node) and all(removed(s) for s in body):
                passes[body[0].lineno] = " " * (body[0].col_offset - dedent[body[0].lineno]) + "pass"
    replacements = {cut_row: row for row, cut_row in replaced.items()}  # each `# Cut:` row: the marked statement's
    out = []
    for row, line in enumerate(lines, start=1):
        if row in passes:
            out.append(passes[row])
        if row in replacements:  # at the marked statement's place, one level out where that was in a marked `with`
            indent = len(line) - len(line.lstrip())
            out.append(" " * (indent - min(dedent[replacements[row]], indent)) + cuts[row])
            continue
        if row in gone or row in cuts:
            continue
        cut = min(dedent[row], len(line) - len(line.lstrip()))
        out.append(line[cut:])
    text = "\n".join(out).rstrip() + "\n"
    return text + GUARD


def ruff_format(text, name):
    """`text` as ruff formats it at the scripts' settings (line length 127, Python 3.11 on)."""
    cmd = [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", "127", "--target-version", "py311"]
    try:
        done = subprocess.run(cmd + ["--stdin-filename", name, "-"], input=text, capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError(f"cannot run ruff: {e}") from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        if "No module named ruff" in done.stderr:
            raise RuntimeError("ruff formats the stripped file: pip install ruff==0.17.6")
        raise RuntimeError(f"ruff could not format the stripped file: {first}")
    return done.stdout


def cut(path):
    """The formatted stripped file of the script at `path`."""
    path = pathlib.Path(path)
    return ruff_format(strip(path.read_text()), path.name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="The rules: cut.py's docstring.")
    parser.add_argument("script", help="one of the scripts, e.g. scripts/dqn.py")
    parser.add_argument("-o", "--output", help="where to write the stripped file (default: standard output)")
    args = parser.parse_args()
    try:
        text = cut(args.script)
    except FileNotFoundError:
        parser.exit(2, f"cut.py: error: no file {args.script}\n")
    except (ValueError, RuntimeError, SyntaxError) as e:
        parser.exit(2, f"cut.py: error: {args.script}: {e}\n")
    if args.output is None:
        sys.stdout.write(text)
        return
    try:
        pathlib.Path(args.output).write_text(text)
    except OSError as e:
        parser.exit(2, f"cut.py: error: cannot write {args.output}: {e.strerror}\n")


if __name__ == "__main__":
    main()
