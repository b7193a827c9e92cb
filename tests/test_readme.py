"""The README's claims, kept true: its speed tables and the ratios its opening quotes are the results pages', and every
flag that the README or doc/usage.md names exists in the `--help` of the file it is named for. (The size table,
in doc/sizes.md, is checked by tests/test_files.py.)"""

import fnmatch
import functools
import re
import subprocess
import sys

import pytest
from helpers.scripts import ROOT, SCRIPTS

README = ROOT / "README.md"
USAGE = ROOT / "doc" / "usage.md"
STEMS = sorted(p.stem for p in SCRIPTS.glob("*.py"))
# The README's names of the algorithms, and run.sh's
ALGORITHMS = {
    "PPO Atari": "ppo_atari",
    "PPO continuous": "ppo_continuous_action",
    "SAC": "sac_continuous_action",
    "TD3": "td3_continuous_action",
    "DQN": "dqn",
}
# Flags of the other tools the pages show in their commands: pip, torchrun, sbatch, ray, tensorboard
OTHER_TOOLS = {
    "--index-url",
    "--standalone",
    "--nproc-per-node",
    "--partition",
    "--gpus-per-task",
    "--cpus-per-task",
    "--time",
    "--requeue",
    "--signal",
    "--head",
    "--address",
    "--logdir",
}
RESULTS_LINK = re.compile(r"\]\((doc/results/[\w-]+/results\.md)\)")  # a link to a results page
FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def table_rows(text):
    """The rows of every Markdown table in text, as dicts keyed by their table's header."""
    rows, header = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif not set(line) <= set("|- "):
            rows.append(dict(zip(header, cells)))
    return rows


def section(text, title):
    return text.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0]


def number(text):
    return float(text.replace(",", ""))


def results_page():
    """The results page the README's speed section links, and its rows: {(algorithm, variant, exp name): row}."""
    speed = section(README.read_text(), "## Speed")
    link = RESULTS_LINK.search(speed)
    assert link, "the README's Speed section links no results page"
    page = ROOT / link.group(1)
    return page, {(r["algorithm"], r["variant"], r["exp name"]): r for r in table_rows(page.read_text())}


def measured(rows, algorithm, column):
    """(steps/s, ratio to the baseline) of a README column, from the results page's rows."""
    base = number(rows[(algorithm, "baseline", algorithm)]["steps/s median"])
    if column == "fast `--precision bf16`":
        row = rows[(algorithm, "fast", "bf16")]  # its own exp name, so the page gives it no speed-up: the ratio is ours
        return number(row["steps/s median"]), number(row["steps/s median"]) / base
    variant = {"baseline steps/s": "baseline", "fast": "fast", "fast `--compile`": "compile"}[column]
    row = rows[(algorithm, variant, algorithm + ("_torchcompile" if variant != "baseline" else ""))]
    return number(row["steps/s median"]), number(row["speed-up"].rstrip("x"))


def readme_speed_table():
    """{algorithm: {column: cell}} from the README's speed table."""
    table = {}
    for row in table_rows(section(README.read_text(), "## Speed")):
        name = next(n for n in ALGORITHMS if row["algorithm"].startswith(n + " "))
        table[ALGORITHMS[name]] = {k: v for k, v in row.items() if k != "algorithm"}
    return table


def test_the_speed_table_is_the_results_pages():
    page, rows = results_page()
    table = readme_speed_table()
    assert set(table) == set(ALGORITHMS.values())
    for algorithm, cells in table.items():
        for column, cell in cells.items():
            if cell == "-":
                assert not any(key[:1] == (algorithm,) and key[2] == "bf16" for key in rows), (algorithm, column)
                continue
            sps, ratio = measured(rows, algorithm, column)
            match = re.fullmatch(r"([\d,]+)(?: \((\d+\.\d+)x\))?", cell)
            assert match, f"README speed table, {algorithm}, {column}: {cell!r}"
            assert number(match.group(1)) == sps, f"README {algorithm} {column}: {cell}, {page.name} says {sps:,.0f}"
            if match.group(2):
                assert f"{ratio:.2f}" == match.group(2), f"README {algorithm} {column}: {cell}, {page.name}: {ratio:.2f}x"


def test_the_gpu_table_is_its_results_pages():
    """Each row of the README's GPU table is the baseline and `--compile --cudagraphs` rows of the results page it
    links (one page per GPU)."""
    rows = table_rows(section(README.read_text(), "## Speed on a GPU"))
    names = [next(n for n in ALGORITHMS if row["algorithm"].startswith(n + " ")) for row in rows]
    assert sorted(names) == sorted(ALGORITHMS)
    for name, row in zip(names, rows):
        link = RESULTS_LINK.search(row["GPU"])
        assert link, f"README GPU table, {name}: {row['GPU']!r} links no results page"
        page = {(r["algorithm"], r["variant"]): r for r in table_rows((ROOT / link.group(1)).read_text())}
        base, fast = page[(ALGORITHMS[name], "baseline")], page[(ALGORITHMS[name], "compile_cudagraphs")]
        assert row["baseline steps/s"] == base["steps/s median"], (name, link.group(1))
        assert row["fast `--compile --cudagraphs`"] == f"{fast['steps/s median']} ({fast['speed-up']})", (name, link.group(1))
    # the opening's GPU sentence quotes the table: each "<fast> against <baseline>" is one of its rows
    opening = README.read_text().split("\n## ", 1)[0]
    sentence = opening[opening.index("The GPU path") :]
    quoted = re.findall(r"([\d,.]+)\s+(?:steps/s\s+)?against\s+(?:its\s+baseline's\s+)?([\d,.]+)", sentence)
    quoted = {(fast.strip(",."), base.strip(",.")) for fast, base in quoted}
    table = {(row["fast `--compile --cudagraphs`"].split(" (")[0], row["baseline steps/s"]) for row in rows}
    assert len(quoted) == len(ALGORITHMS) and quoted <= table, f"the opening says {sorted(quoted - table)}"


def test_the_opening_quotes_the_table():
    """Each ratio the opening quotes for an algorithm is one of that algorithm's ratios in the speed table."""
    opening = README.read_text().split("\n## ", 1)[0]
    quoted = opening[opening.index("Measured on") :]
    names = sorted(ALGORITHMS, key=quoted.find)
    table = readme_speed_table()
    said = 0
    for name, after in zip(names, names[1:] + [None]):
        start = quoted.index(name)
        part = quoted[start : quoted.index(after, start) if after else None]
        ratios = set(re.findall(r"(\d+\.\d+)x", " ".join(table[ALGORITHMS[name]].values())))
        for ratio in re.findall(r"(\d+\.\d+)x", part):
            assert ratio in ratios, f"the README's opening says {ratio}x for {name}; its table says {sorted(ratios)}"
            said += 1
    assert said >= len(ALGORITHMS)


@functools.cache
def help_flags(stem):
    """The flags `python scripts/<stem>.py --help` lists."""
    proc = subprocess.run([sys.executable, str(SCRIPTS / f"{stem}.py"), "--help"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(FLAG.findall(proc.stdout))


@functools.cache
def run_sh_flags():
    return set(FLAG.findall(subprocess.run(["bash", str(ROOT / "run.sh"), "--help"], capture_output=True, text=True).stdout))


def files_of(cell):
    """The script stems a `files` cell names, as patterns (`*`, `*_torchcompile`, `sac_*`)."""
    patterns = re.findall(r"`([\w*]+)`", cell)
    assert patterns, cell
    stems = {stem for pattern in patterns for stem in STEMS if fnmatch.fnmatchcase(stem, pattern)}
    assert stems, f"{cell} names no file in scripts/"
    return stems


def test_every_flag_in_the_usage_tables_is_in_each_named_files_help():
    rows = [row for row in table_rows(USAGE.read_text()) if "files" in row]
    assert len(rows) > 20
    for row in rows:
        flags = FLAG.findall(row["flags"])
        assert flags, row
        for stem in files_of(row["files"]):
            missing = set(flags) - help_flags(stem)
            assert not missing, f"doc/usage.md names {sorted(missing)} for {stem}.py, whose --help has no such flag"


@pytest.mark.parametrize("page", [README, USAGE, ROOT / "doc/scaling.md"], ids=lambda p: p.stem)
def test_every_flag_named_exists(page):
    """A command `python scripts/x.py ...` uses only x.py's flags; any other flag named is some script's, run.sh's, or
    one of the other tools' in OTHER_TOOLS."""
    anywhere = set().union(*(help_flags(stem) for stem in STEMS), run_sh_flags(), OTHER_TOOLS)
    text = page.read_text()
    for command in re.finditer(r"scripts/(\w+)\.py([^\n`;&|]*)", text):
        stem, rest = command.groups()
        if stem in STEMS:
            missing = set(FLAG.findall(rest)) - help_flags(stem)
            assert not missing, f"{page.name}: `{command.group(0)}`: {stem}.py has no {sorted(missing)}"
    unknown = set(FLAG.findall(text)) - anywhere
    assert not unknown, f"{page.name} names flags that no script, run.sh nor the tools it shows have: {sorted(unknown)}"


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


PAGES = [README, USAGE, ROOT / "doc/scaling.md", ROOT / "doc/testing.md", ROOT / "doc/results/cpu-2core/learning.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_link_leads_somewhere(page):
    """Each relative link names a file that exists, and each #anchor a heading of that file."""
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"\w+://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: ({target}): no such file"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.MULTILINE)
            assert anchor in {slug(h) for h in headings}, f"{page.name}: ({target}): no such heading in {linked.name}"
