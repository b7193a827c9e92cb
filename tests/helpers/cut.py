"""The cut: a script's part 1 without what runs the run, as a copier takes it.

The stripped file is the file up to its appendix line, each statement of it whose first line carries a comment beginning
`Run:` removed (a marked `with` keeps its body, one level out; any other marked statement goes with its block, and with
the comment lines right above it), a block left empty holding `pass`, then `if __name__ == "__main__":` calling
`main(tyro.cli(Args))`."""

import ast
import io
import tokenize

GUARD = '\n\nif __name__ == "__main__":\n    main(tyro.cli(Args))\n'


def marked_lines(source):
    """The lines that carry a comment beginning `Run:`."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0] for t in tokens if t.type == tokenize.COMMENT and t.string[1:].strip().startswith("Run:")}


def bodies(node):
    """The statement lists a compound statement holds (body, else, finally, each except's)."""
    if not isinstance(node, (ast.stmt, ast.Module, ast.ExceptHandler)):
        return []
    found = [getattr(node, field) for field in ("body", "orelse", "finalbody") if getattr(node, field, None)]
    return found + [handler.body for handler in getattr(node, "handlers", [])]


def strip(source):
    """The stripped file's text, from a whole script's."""
    lines = source.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("# Appendix"))
    lines = lines[:end]
    part1 = "\n".join(lines) + "\n"
    marked = marked_lines(part1)
    gone, dedent, kept_withs = set(), [0] * (len(lines) + 2), []

    def first_line(node):
        return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])

    def visit(statements):
        for node in statements:
            if node.lineno in marked and isinstance(node, (ast.With, ast.AsyncWith)):
                kept_withs.append(node)
                gone.update(range(node.lineno, node.body[0].lineno))  # the header; the body one level out
                shift = node.body[0].col_offset - node.col_offset
                for row in range(node.body[0].lineno, node.end_lineno + 1):
                    dedent[row] += shift
            elif node.lineno in marked:
                if lines[node.lineno - 1].lstrip().startswith("elif "):  # its span runs over the else: say so
                    raise ValueError(f"line {node.lineno}: a marked elif is not cut (mark its statements)")
                row = first_line(node)
                # the comment lines right above it go with it
                while row > 1 and lines[row - 2].strip().startswith("#") and row - 1 not in marked:
                    row -= 1
                gone.update(range(row, node.end_lineno + 1))
                continue
            for body in bodies(node):
                visit(body)

    visit(ast.parse(part1).body)
    # a block whose statements all went holds `pass`
    kept = {node.lineno for node in kept_withs}

    def removed(node):
        return isinstance(node, ast.stmt) and node.lineno in gone and node.lineno not in kept

    passes = {}
    for node in ast.walk(ast.parse(part1)):
        for body in bodies(node):
            if not removed(node) and all(removed(s) for s in body):
                passes[body[0].lineno] = " " * (body[0].col_offset - dedent[body[0].lineno]) + "pass"
    out = []
    for row, line in enumerate(lines, start=1):
        if row in passes:
            out.append(passes[row])
        if row in gone:
            continue
        cut = min(dedent[row], len(line) - len(line.lstrip()))
        out.append(line[cut:])
    text = "\n".join(out).rstrip() + "\n"
    return text + GUARD
