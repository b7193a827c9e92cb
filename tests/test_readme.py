"""The README's claims, kept true: its speed tables and the ratios its opening quotes are the results pages', and every
flag that the README or doc/usage.md names exists in the `--help` of the file it is named for. (The size table,
in doc/sizes.md, is checked by tests/test_files.py.)"""

import csv
import fnmatch
import functools
import re
import statistics
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
    "--results",  # doc/envpool_rate.py's
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
    """The text under a heading, up to the next heading of its level or above (lines in code fences are not headings)."""
    level = len(title.split(" ")[0])
    lines, fenced = text.split(f"\n{title}\n", 1)[1].splitlines(), False
    for i, line in enumerate(lines):
        fenced = fenced != line.startswith("```")
        heading = re.match(r"(#+) ", line)
        if heading and not fenced and len(heading.group(1)) <= level:
            return "\n".join(lines[:i])
    return "\n".join(lines)


def number(text):
    return float(text.replace(",", ""))


def results_page():
    """The results page the README's speed section links, and its rows: {(algorithm, variant, exp name): row}."""
    speed = section(README.read_text(), "## Speed on a CPU")
    link = RESULTS_LINK.search(speed)
    assert link, "the README's Speed on a CPU section links no results page"
    page = ROOT / link.group(1)
    return page, {(r["algorithm"], r["variant"], r["exp name"]): r for r in table_rows(page.read_text())}


# The CPU table's columns: the results page's (variant, exp name) of each, the exp name as a suffix of the algorithm
CPU_COLUMNS = {
    "baseline steps/s": ("baseline", ""),
    "fast": ("fast", "_torchcompile"),
    "fast `--compile`": ("compile", "_torchcompile"),
    "fast `--precision bf16`": ("fast", "bf16"),
    "LeanRL baseline": ("leanrl", ""),
    "LeanRL fast": ("leanrl_fast", "_torchcompile"),
    "LeanRL fast `--compile`": ("leanrl_compile", "_torchcompile"),
}


def measured(rows, algorithm, column):
    """(steps/s, ratio to our baseline) of a README column, from the results page's rows."""
    base = number(rows[(algorithm, "baseline", algorithm)]["steps/s median"])
    variant, exp = CPU_COLUMNS[column]
    row = rows[(algorithm, variant, exp if exp == "bf16" else algorithm + exp)]
    if row["speed-up"].endswith("x"):  # the page's own ratio (of the unrounded medians)
        return number(row["steps/s median"]), number(row["speed-up"].rstrip("x"))
    return number(row["steps/s median"]), number(row["steps/s median"]) / base  # its own exp name: no speed-up there


def readme_speed_table():
    """{algorithm: {column: cell}} from the README's CPU speed table."""
    table = {}
    for row in table_rows(section(README.read_text(), "## Speed on a CPU")):
        name = next(n for n in ALGORITHMS if row["algorithm"].startswith(n + " "))
        table[ALGORITHMS[name]] = {k: v for k, v in row.items() if k != "algorithm"}
    return table


def test_the_speed_table_is_the_results_pages():
    """Each cell: the results page's median steps/s of that variant, and its ratio to our baseline's; "-" where the
    page has no such run, "= fast ..." where --compile runs the fast file eager (test_no_compile_cell...)."""
    page, rows = results_page()
    table = readme_speed_table()
    assert set(table) >= {"ppo_atari", "ppo_continuous_action", "sac_continuous_action", "td3_continuous_action"}
    for algorithm, cells in table.items():
        assert set(cells) == set(CPU_COLUMNS), sorted(cells)
        for column, cell in cells.items():
            variant, exp = CPU_COLUMNS[column]
            if cell == "-":
                assert not any(key[:2] == (algorithm, variant) and key[2].endswith(exp) for key in rows), (algorithm, column)
                continue
            if cell.startswith("= fast"):
                continue
            sps, ratio = measured(rows, algorithm, column)
            match = re.fullmatch(r"([\d,]+)(?: \((\d+\.\d+)x\))?", cell)
            assert match, f"README speed table, {algorithm}, {column}: {cell!r}"
            assert number(match.group(1)) == round(sps), f"README {algorithm} {column}: {cell}, {page.name}: {sps:,.0f}"
            if match.group(2):
                assert f"{ratio:.2f}" == match.group(2), f"README {algorithm} {column}: {cell}, {page.name}: {ratio:.2f}x"


def test_the_ratios_to_leanrl_are_the_table_s():
    """The sentence under the CPU table: ours against LeanRL's with the same flags, per algorithm, from the table."""
    text = " ".join(section(README.read_text(), "## Speed on a CPU").split())  # (a line may break anywhere)
    table = readme_speed_table()
    said = re.findall(r"([A-Z][\w ]+?): (\d+\.\d+)x \(no flags\), (\d+\.\d+)x \(`--compile`\)", text)
    assert len(said) == len(table), said
    for name, fast, compiled in said:
        cells = table[ALGORITHMS[name.strip()]]
        ours = [cells["fast"], cells["fast `--compile`"]]
        if ours[1].startswith("= fast"):
            ours[1] = ours[0]  # the fast file, eager, on a CPU
        theirs = [cells["LeanRL fast"], cells["LeanRL fast `--compile`"]]
        for quoted, mine, peer in zip((fast, compiled), ours, theirs):
            ratio = number(mine.split(" ")[0]) / number(peer.split(" ")[0])
            assert f"{ratio:.2f}" == quoted, (name, quoted, ratio)


# The steps in each GPU run's burn-in (the commands in the GPU pages' notes): PPO 2 iterations (--measure-burnin 2) of
# 8 x 128 (Atari) and 2048 (continuous) steps; SAC and TD3 5,000 random steps and 51 updates (--learning-starts 5000
# --measure-burnin 50); DQN 10,000 random steps, then an update every 10 steps, 51 of them (--measure-burnin 50).
GPU_BURNIN_STEPS = {
    "ppo_atari": 2 * 1024,
    "ppo_continuous_action": 2 * 2048,
    "sac_continuous_action": 5000 + 51,
    "td3_continuous_action": 5000 + 51,
    "dqn": 10000 + 51 * 10,
}


def test_the_gpu_table_is_its_results_pages():
    """Each row of the README's GPU table is the baseline and `--compile --cudagraphs` rows of the results page it
    links (one page per GPU), and its `timed` cell the seconds those runs measured (steps after the burn-in / rate)."""
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
        runs = list(csv.DictReader(open(ROOT / link.group(1).replace("results.md", "results.csv"))))
        timed = []
        for variant in ("compile_cudagraphs", "baseline"):
            (run,) = [r for r in runs if r["algorithm"] == ALGORITHMS[name] and r["variant"] == variant]
            measured = int(run["global_step"]) - GPU_BURNIN_STEPS[ALGORITHMS[name]]
            timed.append(f"{measured / float(run['sps']):.1f} s")
        assert row["timed (fast / baseline)"] == " / ".join(timed), (name, timed)


def test_the_headline_gpu_figure_is_the_table_s():
    """Get started's PPO Atari figure on an H100 and the time it gives for CleanRL's 10M steps."""
    text = README.read_text()
    started = section(text, "### On a GPU")
    (row,) = [r for r in table_rows(section(text, "## Speed on a GPU")) if r["algorithm"].startswith("PPO Atari ")]
    fast = row["fast `--compile --cudagraphs`"].split(" (")[0]
    assert f"PPO Atari at {fast} steps/s" in started and "H100" in row["GPU"]
    minutes = round(10_000_000 / number(fast) / 60)
    assert f"10M steps take about {minutes} minutes" in started, minutes


def test_every_get_started_form_keeps_the_two_command_promise():
    """Each form: one command that installs and trains, one that installs the test requirements and runs the tests;
    the versions it names are those the requirements admit, and the commands are valid shell."""
    text = README.read_text()
    requirements = (ROOT / "requirements" / "requirements.txt").read_text()
    for form, torch, train in [("### On a GPU", "2.11.0", "--compile --cudagraphs"), ("### On a CPU", "2.13.0", "")]:
        blocks = re.findall(r"```bash\n(.*?)```", section(text, form), flags=re.S)
        commands = [line for block in blocks for line in block.splitlines() if line.strip()]
        assert len(commands) == 2, (form, commands)
        install, tests = commands
        assert f"pip install torch=={torch}" in install and "-r requirements/requirements.txt" in install
        assert install.split(" && ")[-1].startswith("python scripts/") and train in install
        assert tests.startswith("pip install -r requirements/requirements-dev.txt && python -m pytest")
        assert torch in requirements  # a tested version, in the range the requirements give
        for command in commands:
            subprocess.run(["bash", "-n", "-c", command], check=True)
    assert "torch>=2.11,<2.14" in requirements


def learning_page_rows():
    page = ROOT / "doc" / "results" / "cpu-2core" / "learning.md"
    return [r for r in table_rows(page.read_text()) if "file and flags" in r]


def test_the_learning_table_is_the_learning_page_s():
    """Each row: the learning page's final return for that file, flags and seed (mean ± std over the seeds where
    several, as CleanRL counts: the sample std), and CleanRL's figure as the page gives it."""
    rows = table_rows(section(README.read_text(), "## Learning at CleanRL's budgets"))
    assert len(rows) >= 5
    page = learning_page_rows()
    for row in rows:
        same = [r for r in page if r["file and flags"] == row["file and flags"]]
        same = [r for r in same if r["algorithm, env, budget"].startswith(row["algorithm, env, budget"])]
        assert same, row
        assert all(r["CleanRL (mean ± std, 3 seeds)"].startswith(row["CleanRL"]) for r in same), row
        exact = [r for r in same if r["seed"] == row["seeds"]]
        if exact:
            assert exact[0]["final"] == row["return"], (row, exact[0]["final"])
            continue
        finals = [number(r["final"]) for r in same if r["seed"] in row["seeds"].split(", ")]
        assert len(finals) == len(row["seeds"].split(", ")) > 1, row
        mean, std = statistics.mean(finals), statistics.stdev(finals)
        assert row["return"] == f"{mean:,.0f} ± {std:,.0f}", (row, mean, std)


def test_the_learning_prose_quotes_the_learning_page():
    """Every figure in the learning section's prose (TD3's seed 1, PPO Atari's curve) is on the learning page."""
    prose = "\n".join(line for line in section(README.read_text(), "## Learning at CleanRL's budgets").splitlines()
                      if not line.startswith("|"))  # fmt: skip
    page = (ROOT / "doc" / "results" / "cpu-2core" / "learning.md").read_text()
    figures = re.findall(r"(?<![\w.-])(\d[\d,.]*\d|\d)(?![\w-])", prose)
    assert len(figures) >= 8
    for figure in figures:
        assert figure in page, f"the README's learning section says {figure}; the learning page does not"


def test_the_roofline_figures_are_the_roofline_page_s():
    text = README.read_text()
    sentence = text[text.index("[roofline.md](doc/results/cpu-2core/roofline.md)") :].split("\n\n")[0]
    page = (ROOT / "doc" / "results" / "cpu-2core" / "roofline.md").read_text()
    said = re.findall(r"(\d+(?:-\d+)?)%", sentence)
    assert len(said) == 3, sentence
    for figure in said:
        if "-" in figure:  # a range the page gives in words
            assert f"{figure}%" in page, figure
        else:  # the update-only fraction of the page's table, rounded
            assert re.search(rf"\| {figure}\.\d% \|", page), figure


def compile_runs_eager_on_a_cpu(stem):
    """Whether the fast file's --compile runs it eager on a CPU (it says so in one warning)."""
    code = (
        f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); import {stem} as m; "
        "m.check_fast_flags(m.Args(compile=True, cuda=False))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return "runs eager on a CPU" in proc.stderr


def test_no_compile_cell_describes_code_that_does_not_run():
    """A fast file whose --compile runs it eager on a CPU shows no --compile figure in the CPU table."""
    table = readme_speed_table()
    for algorithm, cells in table.items():
        eager = compile_runs_eager_on_a_cpu(f"{algorithm}_torchcompile")
        cell = cells["fast `--compile`"]
        assert (not re.search(r"\d", cell)) == eager, (algorithm, cell, eager)


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
