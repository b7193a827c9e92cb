"""The README's claims, kept true: its first screen gets the code, installs and trains, one command a line; its speed
tables, the ratios it quotes, the headline picture's caption, the flag advice and the quick start's time and return
are the results pages', and so are the returns typed in the learning page's SAC and TD3 paragraphs; the GPU figures
name the commits and machines they come from; the scripts import no file of the project; and every flag that the
README or doc/usage.md names exists in the `--help` of the file it is named for. (The size table, in doc/sizes.md, is
checked by tests/test_files.py.)"""

import ast
import contextlib
import csv
import fnmatch
import functools
import io
import re
import statistics
import subprocess
import sys

import pytest
import tyro
from helpers.scripts import ROOT, SCRIPTS, load_script, load_tool
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tables = load_tool(ROOT / "tools" / "tables.py")  # the README's tables' writer

README = ROOT / "README.md"
SPEED = ROOT / "doc" / "speed.md"  # the speed tables and the flag advice
LEARNING = ROOT / "doc" / "results" / "learning.md"
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
    "--results",  # tools/envpool_rate.py's
}
RESULTS_LINK = re.compile(r"\]\((results/[\w-]+/results\.md)\)")  # a link from doc/speed.md to a results page
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


def column(header):
    """The CPU_COLUMNS name of a README header: the header without a trailing parenthesis."""
    return re.sub(r" \([^`]*\)$", "", header)


def cpu_table_text():
    """doc/speed.md's CPU speed table (the Xeon's), between its markers."""
    return SPEED.read_text().split("<!-- table: cpu -->", 1)[1].split("<!-- /table -->", 1)[0]


def readme_speed_table():
    """{algorithm: {column: cell}} from doc/speed.md's CPU speed table."""
    table = {}
    for row in table_rows(cpu_table_text()):
        name = next(n for n in ALGORITHMS if row["algorithm"].startswith(n + " "))
        table[ALGORITHMS[name]] = {column(k): v for k, v in row.items() if k != "algorithm"}
    return table


def readme_speed_headers():
    """doc/speed.md's CPU speed table's headers as written."""
    line = next(line for line in cpu_table_text().splitlines() if line.startswith("|"))
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_the_pages_tables_are_the_results_files_():
    """The README's tables (what is proven, the quick start, the sizes), doc/speed.md's (GPU, CPU, beside LeanRL's, best
    against best), the learning page's, doc/tricks.md's timings and doc/usage.md's checkpoint costs are as
    tools/tables.py writes them from the results files (each names the machine and the commit); an edited cell is told
    apart."""
    for page in tables.PAGES:
        text = page.read_text()
        assert tables.written(text, page) == text, (
            f"{page.name}'s tables differ from the results files': run python tools/tables.py"
        )
    text = SPEED.read_text()
    cell = "| 1,563 |"
    assert cell in text and tables.written(text.replace(cell, "| 1,564 |", 1), SPEED) == text
    text = README.read_text()
    cell = ": 1.47x |"
    assert cell in text and tables.written(text.replace(cell, ": 1.48x |", 1)) == text
    text = tables.TRICKS.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| ppo_atari, 128 x 8 | fast |"))
    assert tables.written(text.replace(row, row.replace("| fast |", "| fast! |"), 1), tables.TRICKS) == text


def test_the_readme_s_cpu_command_is_the_one_timed():
    """The quick start's timing (tools/micro.py's quickstart part) ran the command the README gives."""
    micro = load_tool(ROOT / "tools" / "micro.py")
    assert f"\npython {micro.QUICKSTART}\n" in README.read_text()
    with open(ROOT / "doc" / "results" / tables.MICRO / "quickstart.csv") as f:
        assert f"python {micro.QUICKSTART}" in f.read()


def test_the_gpu_section_says_where_its_figures_come_from():
    """doc/speed.md's GPU section names, for each results page it links, the GPU and the commit of the scripts that ran
    (the page's machine record), says "one seed" where a row is one run, and, until a GPU results page holds LeanRL's
    files beside ours, says that which is faster on a GPU is not yet measured."""
    text = section(SPEED.read_text(), "## On a GPU")
    prose = " ".join(line for line in text.splitlines() if not line.startswith("|"))
    prose = " ".join(prose.split())
    pages = {link for link in RESULTS_LINK.findall(text)}
    assert pages
    for link in pages:
        record = ((ROOT / "doc" / link).parent / "machine.md").read_text()
        gpu = re.search(r"gpu: NVIDIA (\w+)", record).group(1)
        assert f"an {gpu}" in prose, (link, gpu)
        runs = [r["runs"] for r in table_rows((ROOT / "doc" / link).read_text()) if "runs" in r]
        if "1/1" in runs:
            assert re.search(r"\bone seed\b", prose, re.I), link
    gpu_pages = [
        p for p in (ROOT / "doc" / "results").glob("*/results.csv") if "gpu: none" not in (p.parent / "machine.md").read_text()
    ]
    beside = any(r["variant"].startswith("leanrl") for p in gpu_pages for r in csv.DictReader(open(p)))
    if not beside:
        assert "faster on a GPU is not yet measured" in prose


# The README's first screen says why (what is proven, as a table) within WHY lines; a GPU user and a CPU user reach their
# training command, and everyone the test command, within FIRST_SCREEN lines (the table above them is read first)
WHY = 20
FIRST_SCREEN = 50


def commands(text):
    """The command lines of the bash blocks in text, each checked to be one command: valid shell, nothing chained."""
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for line in block.splitlines()]
    lines = [line for line in lines if line.strip() and not line.startswith("#")]
    for line in lines:
        assert not re.search(r"&&|\|\||;|\\$", line), f"one command a line: {line!r}"
        subprocess.run(["bash", "-n", "-c", line], check=True)
    return lines


def test_get_started_comes_first_and_gets_the_code():
    """The README opens with what the collection is and what is proven (the table written from the results files);
    Get started is its first section; its first block clones the project and enters it, then makes the environment;
    the picture comes after the training commands."""
    text = README.read_text()
    assert text.splitlines().index("<!-- table: proven -->") < text.splitlines().index("<!-- /table -->") < WHY
    assert re.findall(r"^## .+", text, flags=re.M)[0] == "## Get started"
    intro = text.split("\n### ", 1)[0].split("## Get started\n", 1)[1]
    clone, enter, venv, activate = commands(intro)
    assert clone.startswith("git clone ") and enter == f"cd {clone.split('#')[0].split()[-1]}"
    assert re.match(r"python3\.1[12] -m venv ", venv) and activate.startswith(". ")  # envpool: Python 3.11 up
    assert text.index("![") > text.index("### On a CPU")


def test_every_get_started_form_installs_then_trains_one_command_a_line():
    """Each form: the install commands, then one training command, one a line; the versions it names are those the
    requirements admit, and each training command sits within the first screen."""
    text = README.read_text()
    lines = text.splitlines()
    requirements = (ROOT / "requirements" / "requirements.txt").read_text()
    for form, torch, train in [("### On a GPU", "2.11.0", "--compile --cudagraphs"), ("### On a CPU", "2.13.0", "")]:
        *installs, training = commands(section(text, form))
        assert installs and all(c.startswith("pip install ") for c in installs), (form, installs)
        assert any(f"pip install torch=={torch}" in c for c in installs), form
        assert any("-r requirements/requirements.txt" in c for c in installs), form
        assert training.startswith("python scripts/") and train in training, training
        assert lines.index(training) < FIRST_SCREEN, f"{form}'s training command is on line {lines.index(training) + 1}"
        assert torch in requirements  # a tested version, in the range the requirements give
    install, tests = commands(section(text, "### The tests"))
    assert lines.index(tests) < FIRST_SCREEN, f"the test command is on line {lines.index(tests) + 1}"
    assert install == "pip install -r requirements/requirements-dev.txt -c requirements/constraints-cpu.txt"
    assert tests.startswith("python -m pytest") and "torch>=2.11,<2.14" in requirements
    # a GPU install is told to keep its own pins for the tests' install
    block = re.search(r"```bash\n(.*?)```", section(text, "### The tests"), flags=re.S).group(1)
    assert "# after the GPU install, use -c requirements/constraints-gpu.txt instead" in block.splitlines()[0]
    # each install pins the versions that ran: the CPU's, the GPU's
    for form, constraints in [("### On a GPU", "constraints-gpu.txt"), ("### On a CPU", "constraints-cpu.txt")]:
        requirement = next(c for c in commands(section(text, form)) if "-r requirements/requirements.txt" in c)
        assert requirement.endswith(f" -c requirements/{constraints}"), requirement


def pins(name):
    """{package (normalized): version} of a constraints file, each line one exact pin (pip's own parser reads it too)."""
    found = {}
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        if line and not line.startswith("#"):
            pin = Requirement(line)  # a line that is no requirement fails here, as it fails pip
            (spec,) = pin.specifier
            assert spec.operator == "==" and not pin.extras and not pin.marker, line
            assert canonicalize_name(pin.name) not in found, f"{name} pins {pin.name} twice"
            found[canonicalize_name(pin.name)] = spec.version
    return found


def requirements(name):
    """The requirements of a requirements file, those it includes (-r) too."""
    found = []
    for line in (ROOT / "requirements" / name).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found += requirements(line.split()[1])
        elif line:
            found.append(Requirement(line))
    return found


@pytest.mark.parametrize(
    "constraints,files",
    [("constraints-cpu.txt", ["requirements-dev.txt"]), ("constraints-gpu.txt", ["requirements.txt"])],
)
def test_the_constraints_pin_versions_the_requirements_admit(constraints, files):
    """Each requirement has its pin in the CPU constraints, one the requirement admits; the GPU constraints pin what
    the GPU machines had (torch 2.11.0, numpy 2.5.2) and what gpu_check.sh packs for them, each admitted too."""
    pinned = pins(constraints)
    for requirement in [r for f in files for r in requirements(f)]:
        name = canonicalize_name(requirement.name)
        if constraints == "constraints-cpu.txt":
            assert name in pinned, f"{constraints} pins no {requirement.name}"
        if name in pinned:
            assert requirement.specifier.contains(pinned[name], prereleases=True), (constraints, requirement, pinned[name])
    if constraints == "constraints-gpu.txt":
        pack = re.search(r'OURS_WHEELS="(.*?)"', (ROOT / "tools" / "gpu_check.sh").read_text(), re.S)[1]
        packed = {canonicalize_name(p.split("==")[0]): p.split("==")[1] for p in pack.split()}
        assert pinned == {**packed, "torch": "2.11.0", "numpy": "2.5.2"}, set(pinned.items()) ^ set(packed.items())


def test_the_headline_caption_is_the_learning_page_s():
    """The headline picture is the learning page's figure of the fast SAC file's seeds; its caption's seeds, return at
    1M and CleanRL's figure are the learning table's row of that file without flags, and every other figure it gives
    is in that row."""
    text = README.read_text()
    picture = re.search(r"!\[[^]]*\]\(([^)]*)\)", text).group(1)
    assert picture == "doc/results/learning_sac_continuous_action.png" and (ROOT / picture).is_file(), picture
    caption = " ".join(text[text.index("![") :].split("\n\n")[1].split())
    (row,) = [
        r
        for r in table_rows(section(LEARNING.read_text(), "## In short"))
        if r["file and flags"] == "`sac_continuous_action_torchcompile.py`"
    ]
    seeds = row["seeds"].split(", ")
    said = ", ".join(seeds[:-1]) + f" and {seeds[-1]}"
    assert caption.startswith(f"*The fast SAC file (no flags, seeds {said})"), caption
    assert f"{row['return']} at 1M against CleanRL's {row['CleanRL']} (3 seeds)" in caption, (row, caption)
    cells = " ".join([*row.values(), *row.keys()])
    for figure in re.findall(r"(?<![\w.-])(\d[\d,.]*\d|\d)(?![\w-])", caption):
        assert figure in cells, f"the caption says {figure}; the learning table's row does not"


def test_the_flag_advice_names_the_three_cpus_and_types_no_figure():
    """doc/speed.md's "Which file and which flags": the three 2-core CPUs measured, each with its results pages linked;
    the speed-ups are theirs, so its prose types no ratio."""
    text = section(SPEED.read_text(), "## Which file and which flags")
    prose = " ".join(line for line in text.splitlines() if not line.startswith("|"))
    assert "three 2-core CPUs were measured" in " ".join(prose.split())
    for page in ["cpu-2core-xeon", "cpu-2core", "cpu-2core-dqn-leanrl", "cpu-2core-ppo-atari-leanrl"]:
        assert f"(results/{page}/results.md)" in prose, page
    assert not re.findall(r"\d+\.\d+x", prose), "a ratio typed into the flag advice"


def test_an_algorithm_missing_from_the_cpu_table_is_said_to_be_missing():
    """An algorithm that the CPU table beside LeanRL's lacks is named under it as not in the table, with why."""
    text = " ".join(section(SPEED.read_text(), "## On a CPU, beside LeanRL's own files").split())
    for name, algorithm in ALGORITHMS.items():
        if algorithm not in readme_speed_table():
            assert re.search(rf"{name} is not in this table: [^.]*not been run", text), name


# The project's own modules: a script that imports one of them is no longer a file that stands alone
PROJECT_MODULES = {*STEMS, "aggregate", "helpers", "tests", "tools", "scripts", "conftest"}


def project_imports(source):
    """The project modules a source imports, or loads by path (importlib's spec_from_file_location, runpy)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in PROJECT_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PROJECT_MODULES):
            found.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Attribute) and node.attr in ("spec_from_file_location", "run_path", "import_module"):
            found.append(node.attr)
    return found


def test_no_script_imports_another_file_of_the_project():
    """What the README's Contributing section says: each file stands alone, importing no other file of the project."""
    for path in sorted(SCRIPTS.glob("*.py")):
        assert not project_imports(path.read_text()), f"{path.name} imports {project_imports(path.read_text())}"
    # the check can fail
    assert project_imports("from dqn import Args\nimport aggregate\nfrom . import x") == ["dqn", "aggregate", "."]
    assert project_imports("import importlib.util\nimportlib.util.spec_from_file_location('x', 'scripts/dqn.py')")
    assert not project_imports("import torch\nfrom dataclasses import dataclass\nimportlib.util.find_spec('ray')")


def learning_page_rows():
    return [r for r in table_rows(LEARNING.read_text()) if "file and flags" in r and "run" in r]


def test_the_learning_table_is_the_learning_page_s():
    """Each row: the learning page's final return for that file, flags and seed (mean ± the sample std over the seeds
    where several), and CleanRL's figure as the page gives it."""
    rows = table_rows(section(LEARNING.read_text(), "## In short"))
    assert len(rows) >= 5
    page = learning_page_rows()
    for row in rows:
        same = [r for r in page if r["file and flags"] == row["file and flags"]]
        same = [r for r in same if row["algorithm, env, budget"].startswith(r["run"])]
        assert same, row
        assert all(r["CleanRL (mean ± std, at its budget)"].startswith(row["CleanRL"]) for r in same), row
        exact = [r for r in same if r["seed"] == row["seeds"]]
        if exact:
            assert exact[0]["return"] == row["return"], (row, exact[0]["return"])
            continue
        finals = [number(r["return"]) for r in same if r["seed"] in row["seeds"].split(", ")]
        assert len(finals) == len(row["seeds"].split(", ")) > 1, row
        mean, std = statistics.mean(finals), statistics.stdev(finals)
        said = row["return"].split(" ± ")
        assert abs(number(said[0]) - mean) <= 1 and abs(number(said[1]) - std) <= 1, (row, mean, std)


def test_the_table_measured_as_cleanrl_measures_agrees_with_the_runs_table():
    """Each row of the like-for-like table: its seeds are runs of the learning page's table of runs, its last-20 column
    is their returns' mean ± the population std (CleanRL's), its last-100 figure no more than a few hundred from it
    (the same runs, a longer window), and CleanRL's figure is the In short table's."""
    rows = table_rows(section(LEARNING.read_text(), "## Measured as CleanRL measures"))
    assert rows, "no row: no results folder holds return_last100"
    short = table_rows(section(LEARNING.read_text(), "## In short"))
    for row in rows:
        runs = [r for r in learning_page_rows() if r["file and flags"] == row["file and flags"]]
        runs = [r for r in runs if r["seed"] in row["seeds"].split(", ")]
        assert len(runs) == len(row["seeds"].split(", ")), row
        returns = [number(r["return"]) for r in runs]
        said = [number(x) for x in row["the same seeds' last 20"].split(" ± ")]
        assert abs(said[0] - statistics.mean(returns)) <= 1, (row, returns)
        assert len(said) == 1 or abs(said[1] - statistics.pstdev(returns)) <= 1, (row, returns)
        assert abs(number(row["last 100 episodes"].split(" ± ")[0]) - said[0]) < 1000, row
        assert any(r["file and flags"] == row["file and flags"] and r["CleanRL"] == row["CleanRL"] for r in short), row


def learning_bullet(name):
    """The learning page's paragraph on one algorithm (its bullet under the table of runs), on one line."""
    text = LEARNING.read_text()
    start = text.index(f"- **{name}**")
    return " ".join(text[start : text.index("\n- **", start)].split())


def learning_seeds(algorithm, variant):
    """{seed: results.csv row} of the learning table's row for this file without flags (tools/tables.py's LEARNING)."""
    (folder,) = [f for _, f, a, v, exp, _ in tables.LEARNING if (a, v, exp) == (algorithm, variant, None)]
    return {int(r["seed"]): r for r in tables.finished_seeds(folder, algorithm, variant, None)}


def test_the_returns_typed_in_the_learning_page_s_prose_are_the_results_files_():
    """The figures typed in the SAC and TD3 paragraphs (each seed's distance from CleanRL's band, the means' gap, the
    last-100 figures, the spread, TD3 seed 1's curve at 300k) computed again from the results files and the reference:
    a new seed or a rerun that changes one fails here until the paragraph is rewritten."""
    said = lambda x: f"{x:,.0f}"  # noqa: E731
    for algorithm, name in (
        ("sac_continuous_action", "SAC, HalfCheetah-v4"),
        ("td3_continuous_action", "TD3, HalfCheetah-v4"),
    ):
        mean, std, _ = tables.reference_final(algorithm, "HalfCheetah-v4")
        fast = learning_seeds(algorithm, "fast")
        final = {seed: float(r["episodic_return"]) for seed, r in fast.items()}
        last100 = {seed: float(r["return_last100"]) for seed, r in fast.items() if r.get("return_last100")}
        text = learning_bullet(name)
        wanted = [f"{said(mean - std)} to {said(mean + std)}"]
        if algorithm == "sac_continuous_action":
            wanted += [f"{said(final[1] - mean - std)} above its top", f"{said(final[3] - mean + std)} above its bottom"]
            wanted += [f"means differ by {said(statistics.mean(final.values()) - mean)}"]
            wanted += [f"seed 2's last 100 episodes read {said(final[2] - last100[2])} lower than its last 20"]
            wanted += [f"seed 3's {said(last100[3] - final[3])} higher"]
        else:
            (baseline,) = learning_seeds(algorithm, "baseline").values()
            wanted += [f"seed 2 ({said(final[2])}, on the EPYC with AVX2) {said(final[2] - mean - std)} above its top"]
            wanted += [f"seed 3 ({said(final[3])}) {said(final[3] - mean - std)} above"]
            wanted += [f"seed 1 ({said(final[1])}) {said(mean - std - final[1])} below its bottom"]
            wanted += [f"last 100 episodes: {said(last100[1])} and {said(last100[3])}"]
            wanted += [f"ended {said(float(baseline['episodic_return']) - mean)} above its mean"]
            last = float(baseline["return_last100"])
            wanted += [f"({said(last)} over its last 100 episodes: {said(last - mean)} above, measured CleanRL's way)"]
            wanted += [f"({said(statistics.mean(final.values()) - mean)}, a"]
            wanted += [f"their mean's standard error is {said(statistics.stdev(final.values()) / len(final) ** 0.5)}"]
            wanted += [f"({said(statistics.pstdev(final.values()))} against {said(std)}, both the population"]
            # seed 1's curve at 300k (its curves.csv row nearest), to the hundred, against CleanRL's point read there
            results = tables.RESULTS
            (folder,) = [f for _, f, a, v, exp, _ in tables.LEARNING if (a, v, exp) == (algorithm, "fast", None)]
            curve = [
                r
                for f in tables.folders_of(folder)
                if (results / f / "curves.csv").is_file()
                for r in tables.read_csv(results / f / "curves.csv")
                if (r["algorithm"], r["variant"], r["seed"]) == (algorithm, "fast", "1")
            ]
            at = min(curve, key=lambda r: abs(int(r["global_step"]) - 300_000))
            (point,) = [
                r
                for r in tables.read_csv(results / "cleanrl_reference.csv")
                if (r["algorithm"], r["step"]) == (algorithm, "300000")
            ]
            seed1_at_300k = said(round(float(at["episodic_return"]), -2))
            wanted += [f"(about {seed1_at_300k} at 300k against CleanRL's {said(float(point['return']))})"]
        assert [w for w in wanted if w not in text] == [], text


def test_the_roofline_figures_are_the_roofline_page_s():
    """The roofline figures that the README's CPU section links to, on doc/results/README.md, are the roofline page's."""
    assert "results/README.md#what-the-cpu-pages-show" in section(SPEED.read_text(), "## On a CPU, beside LeanRL's own files")
    text = (ROOT / "doc" / "results" / "README.md").read_text()
    sentence = text[text.index("[roofline.md](cpu-2core/roofline.md)") :].split("\n\n")[0]
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
        "m.speed_flags(m.Args(compile=True, cuda=False))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return "runs eager on a CPU" in proc.stderr


@pytest.mark.slow  # (it runs the fast files: tens of seconds)
def test_the_compile_column_names_the_files_it_runs_eager():
    """The CPU table's `--compile` header names exactly the algorithms whose fast file --compile runs eager on a CPU
    ("fast `--compile` (SAC, TD3: eager on a CPU)"): their cells are the measured rows of code that ran eager."""
    (header,) = [h for h in readme_speed_headers() if column(h) == "fast `--compile`"]
    named = re.fullmatch(r"fast `--compile`(?: \((.+): eager on a CPU\))?", header)
    assert named, header
    said = {ALGORITHMS[n.strip()] for n in named.group(1).split(",")} if named.group(1) else set()
    eager = {a for a in readme_speed_table() if compile_runs_eager_on_a_cpu(f"{a}_torchcompile")}
    assert said == eager, (header, sorted(eager))


@functools.cache
def help_flags(stem):
    """The flags `python scripts/<stem>.py --help` lists: tyro's help of the file's Args, made in this process (the
    same text; a subprocess a file would take seconds of imports each)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        tyro.cli(load_script(stem).Args, args=["--help"])
    return set(FLAG.findall(out.getvalue()))


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


PAGES = [README, USAGE, SPEED, ROOT / "doc/scaling.md", ROOT / "doc/testing.md", LEARNING, ROOT / "doc/tricks.md"]
PAGES += [ROOT / "doc/gpu.md", ROOT / "doc/tuning.md", ROOT / "doc/sizes.md", ROOT / "doc/results/README.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
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


def test_the_stripped_sizes_are_the_size_table_s():
    """Using a file in your own code: the stripped files' line ranges and their ratios to CleanRL's (baselines) and
    LeanRL's (fast files) files whole, and the whole files' lengths, are those of doc/sizes.md's table."""
    text = " ".join(section(README.read_text(), "## Using a file in your own code").split())
    from test_files import size_table, stripped_ratios

    b, f = stripped_ratios(size_table())["baselines"], stripped_ratios(size_table())["fast"]
    sentence = f"Stripped, a baseline has {b[0]}-{b[1]} lines, {b[2]}-{b[3]}x its CleanRL file whole; a fast file"
    sentence += f" {f[0]}-{f[1]}, {f[2]}-{f[3]}x its LeanRL file whole. The whole files, with what runs the run, have"
    assert sentence in text, sentence


def test_the_readme_is_at_most_1200_words():
    """What a reader reads: the words, outside the HTML comments that mark the written tables."""
    words = re.sub(r"<!--.*?-->", " ", README.read_text()).split()
    assert len(words) <= 1200, len(words)


# A measured quantity in prose: a ratio, a percentage, a rate or a time (a range's ends each); a figure in a code span, a
# quotation (an error message) or a link's target is not prose
MEASURED = re.compile(
    r"(?<![\w.,-])(\d[\d,]*(?:\.\d+)?)(?:-(\d[\d,]*(?:\.\d+)?))?"
    r"(x\b|%| ?steps/s| s\b| min\b| minutes\b| h\b| hours\b| seconds\b| ms\b| µs\b)"
)
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")
# A setting, not a measurement: the figure a flag is set to or a bound the code keeps ("at most 10 s")
SETTING = re.compile(r"(`--[\w-]+`[^.;()]{0,12}[(,]? ?|at most )$")


def held(figure, unit, source):
    """Whether the source holds the figure: as written, as a number that rounds to it, or (a ratio) as the ratio of two
    of its numbers, rounded as the figure is."""
    if re.search(rf"(?<![\d.,]){re.escape(figure)}(?![\d,]|\.\d)", source):
        return True
    places = len(figure.split(".")[1]) if "." in figure else 0
    want = float(figure.replace(",", ""))
    numbers = {float(n.replace(",", "")) for n in NUMBER.findall(source)}
    if any(round(n, places) == want for n in numbers):
        return True
    return unit == "x" and any(b and round(a / b, places) == want for a in numbers for b in numbers)


def untraced_figures(page):
    """(figure, its sentence) for each measured figure in the page's prose that neither the page's tables (written or
    typed) nor a file its paragraph links (with the machine record, notes and results of a results folder) hold."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    tabled = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    tabled += "".join(re.findall(r"<!-- table: [\w-]+ -->(.*?)<!-- /table -->", text, flags=re.S))
    text = re.sub(r"<!-- table: [\w-]+ -->.*?<!-- /table -->", "", text, flags=re.S)
    found = []
    for paragraph in text.split("\n\n"):
        lines = [line for line in paragraph.splitlines() if not line.startswith(("|", "#"))]
        paragraph = " ".join(lines)
        cited = ""
        for link in re.findall(r"\]\(([^)#\s]+)", paragraph):
            path = (page.parent / link).resolve()
            if re.match(r"\w+://", link) or not path.is_file() or path.suffix not in (".md", ".csv", ".json"):
                continue
            cited += path.read_text()
            if path.parent.parent.name == "results":  # a results folder's record, notes and results
                cited += "".join((path.parent / f).read_text() for f in RESULTS_FILES if (path.parent / f).is_file())
        # a code span goes, but a flag stays for SETTING
        prose = re.sub(r"`[^`]*`", lambda m: m.group(0) if m.group(0).startswith("`--") else "`", paragraph)
        prose = re.sub(r'\]\([^)]*\)|"[^"]*"', "]", prose)
        for m in MEASURED.finditer(prose):
            if SETTING.search(prose[: m.start()]):
                continue
            for figure in filter(None, m.group(1, 2)):
                if not held(figure, m.group(3), tabled + cited):
                    found.append((figure + m.group(3), prose[max(0, m.start() - 80) : m.end() + 20]))
    return found


RESULTS_FILES = ["machine.md", "notes.md", "results.md", "results.csv"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_measured_figure_in_prose_is_traced(page):
    """A ratio, percentage, rate or time in a page's prose is in one of the page's tables or in a file its paragraph
    links (a results folder's record, notes and results with it): a figure typed from memory, extrapolated or left
    from an old run fails here, naming its sentence."""
    assert not untraced_figures(page), untraced_figures(page)


def test_an_untraced_figure_is_caught(tmp_path):
    """The trace check can fail: a typed rate, a ratio no two figures give, a range's ends; a quotation, a flag's
    value and a bound pass."""
    results = tmp_path / "results" / "m"
    results.mkdir(parents=True)
    (results / "results.md").write_text("| a | 1,292 | 2,462 |\n")
    page = tmp_path / "page.md"
    page.write_text(
        'It ran at 2,462 steps/s, 1.91x the baseline ([m](results/m/results.md)); the error said "within 60 seconds"'
        " and `--grace-s` (180 s) waits at most 10 s.\n\nIt ran at 2,500 steps/s, 1.95x, 1,292-1,400 steps/s.\n"
    )
    # a paragraph's sources are its own links: the second cites nothing
    assert [f for f, _ in untraced_figures(page)] == ["2,500 steps/s", "1.95x", "1,292 steps/s", "1,400 steps/s"]
