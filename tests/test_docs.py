"""The pages users read speak to users: no word from how the project is maintained, nor the other ways of saying how its
checks were organised (a machine's time budget, commands counted as calls, plans for the next check), no sentence left
in lower case by a search-and-replace, no absolute path of the machine a result was made on, and citation metadata
GitHub can read."""

import re

import pytest
from helpers.scripts import ROOT

# The user pages: the README and doc/ (its tools' own docstrings are code), the published results; not the maintainers'
# checklist in doc/maintainers/.
USER_PAGES = [ROOT / "README.md", *sorted((ROOT / "doc").glob("*.md"))]
PUBLISHED = sorted(p for p in (ROOT / "doc" / "results").rglob("*") if p.suffix in (".md", ".csv", ".json"))
# Words of the maintainers' workflow (what a session, an issue or a sitting is means nothing to a user)
WORKFLOW = re.compile(
    r"\bissue \d+|\bthe issue's|\bsessions?\b|\bsittings?\b|\bstand-in\b|\bplumbing\b|\brow group\b|\bworkplace\b"
    r"|\bdevice tool\b|\.\./shared",
    re.IGNORECASE,
)
# How the checks were organised, however it is said again: a machine's time budget ("15 minutes of GPU time", "no GPU
# time was left", "ran out of", "to fit the time left"), the commands of a check counted as calls ("call 4", "four
# calls, 809 s", "in the second call", "when the call ran", "the calls' archives"), the maintainers' checklist and its
# prelude, plans for the next check ("the next check on a GPU", "the next GPU", "for the GPU check"), the rhythm of the
# work ("stretches of 3 hours"), and a time estimated at another project's reported rate ("at LeanRL's 6,809 steps/s").
# A function's calls ("7 blocks of 50 calls", "us per call", "one compiled call") are not these.
KEEPING = re.compile(
    r"\b(?:GPU|device|machine) time\b|\bran out of\b|\btime (?:was )?left\b|\bdid not fit\b|\bto fit the\b"
    r"|\bcall \d+\b|\b\w+ calls?,? (?:of )?[\d,]+(?:, [\d,]+)*(?: and [\d,]+)? s\b"
    r"|\b(?:first|second|third|fourth|fifth|last|next|each|that|this|one|two|three|four) calls?\b(?= of (?:the|this|\[)"
    r"|,? (?:in|on) (?:the )?(?:GPU|machine))|\b(?:in|from) the (?:first|second|third|fourth|last) call\b"
    r"|\bwhen the call ran\b|\bcalls' archives\b|\bprelude\b|\bchecklist's\b|\bthe GPU checklist\b"
    r"|\bnext (?:check|GPU|machine|session|call)\b|\b(?:for|in) the (?:next|GPU) check\b|\bGPU checks?\b"
    r"|\b(?:first|second|third) check\b|\bstretches of \d|\bwork (?:here )?goes in\b"
    r"|\bat LeanRL's (?:reported )?[\d,]+ steps/s\b"
    # and the pages' own history: what an earlier version did, a file edited by hand, a plan, a target barely met
    r"|\b(?:shortened|corrected)\b[^.]{0,60}\bby hand\b|\ban earlier version\b|\bearlier versions\b|\bgit history keeps\b"
    r"|\bthe plan holds\b|\bmet, barely\b|## Before:",
    re.IGNORECASE,
)
# A sentence begun in lower case where a search-and-replace put a phrase at its start (". the GPU checklist's ..."):
# a full stop after a word, then a common sentence opening in lower case. Abbreviations (e.g., i.e., vs., etc.) and
# lower-case names (envpool, torchrun, bf16) are not this.
LOWER_START = re.compile(
    r"[a-z0-9)\]*`](?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\betc)(?<!\bcf)\. "
    r"(?:the|a|an|this|these|it|its|no|not|one|so|then|but|each|every)\b"
)
# An absolute path on a machine: /work/..., /tmp/..., /home/..., /root/..., /Users/... (not a URL's path)
ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:work|tmp|home|root|Users|mnt|scratch|private)/[\w.-]")


def flat_matches(lines, pattern):
    """The numbers (from 1) of the lines where the pattern matches the text read as one line, each run of white space
    (a line break and the next line's indent included) read as one space: a phrase broken across lines is found, at
    the line where it starts."""
    flat, line_of = [], []
    for n, line in enumerate(lines, 1):
        for piece in re.finditer(r"\S+|\s+", line + "\n"):
            text = piece.group() if piece.group().strip() else " "
            if text == " " and flat and flat[-1] == " ":
                continue
            flat.append(text)
            line_of += [n] * len(text)
    joined = "".join(flat)
    return sorted({line_of[m.start()] for m in pattern.finditer(joined)})


def lines_matching(path, pattern):
    name = path.relative_to(ROOT) if ROOT in path.parents else path.name
    lines = path.read_text().splitlines()
    return [f"{name}:{n}: {lines[n - 1].strip()}" for n in flat_matches(lines, pattern)]


@pytest.mark.parametrize("page", USER_PAGES + PUBLISHED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_maintainers_workflow_word_in_a_user_page(page):
    found = lines_matching(page, WORKFLOW)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", USER_PAGES + PUBLISHED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_word_of_how_the_checks_were_organised_in_a_user_page(page):
    found = lines_matching(page, KEEPING)
    assert not found, "\n".join(found)


def prose_lines_matching(path, pattern):
    """lines_matching outside code blocks and code spans (a code block ends a sentence's run of lines)."""
    name = path.relative_to(ROOT) if ROOT in path.parents else path.name
    lines, prose, fenced = path.read_text().splitlines(), [], False
    for line in lines:
        fence = line.lstrip().startswith("```")
        fenced = fenced != fence
        prose.append("" if fenced or fence else re.sub(r"`[^`]*`", "`x`", line))
    blocks, start = [], 0  # paragraphs, so that no match runs from one into the next
    for n, line in enumerate(prose + [""], 1):
        if not line.strip():
            blocks += [start + m for m in flat_matches(prose[start : n - 1], pattern)]
            start = n
    return [f"{name}:{n}: {lines[n - 1].strip()}" for n in blocks]


@pytest.mark.parametrize(
    "page", [p for p in USER_PAGES + PUBLISHED if p.suffix == ".md"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_sentence_starts_in_lower_case(page):
    found = prose_lines_matching(page, LOWER_START)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", USER_PAGES + PUBLISHED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_absolute_path_in_a_published_file(page):
    found = lines_matching(page, ABSOLUTE)
    assert not found, "\n".join(found)


def test_the_checks_catch_what_they_are_for(tmp_path):
    page = tmp_path / "results.md"
    page.write_text("made in one sitting (issue 40) on the stand-in device\nsee /work/main/bench/x/summary.json\n")
    assert len(lines_matching(page, WORKFLOW)) == 1 and len(lines_matching(page, ABSOLUTE)) == 1
    page.write_text("a paragraph whose words (issue\n  36 kept it) break across lines\n")  # found at its first line
    assert lines_matching(page, WORKFLOW) == ["results.md:1: a paragraph whose words (issue"]
    page.write_text("see https://example.org/tmp/x and bench/x/summary.json; a process session of its own? no\n")
    assert not lines_matching(page, ABSOLUTE)
    said_again = [
        "The second check on a GPU machine (15 minutes of GPU time) reran the tests",
        "Four calls, 809 s in all, machine starts included",
        "four calls of 470, 184, 46 and 50 s",
        "none rerun on a GPU yet (no GPU time was left)",
        "30,000 steps instead of 60,000, to fit the time left",
        "under TORCH_LOGS=perf_hints; call 4, the two at once",
        "In the second call 56 passed, so the prelude now sets MUJOCO_GL=disable",
        "the next check on a GPU measures envpool's rate",
        "Whether it holds on a GPU is for the GPU check",
        "the two checks on a GPU machine so far ran out of time",
        "it is measured on the next GPU we get",
        "Work here goes in stretches of 3 hours",
        "a GPU runs it in about half an hour at LeanRL's 6,809 steps/s",
        "two calls of the checklist's checks in one script each",
        "The paths were shortened to these relative ones by hand",
        "An earlier version of this page gave 0.95x",
        "What the plan holds that these runs have not finished yet",
    ]
    for sentence in said_again:
        page.write_text(sentence + "\n")
        assert lines_matching(page, KEEPING), sentence
    page.write_text("7 interleaved blocks of 50 calls, median; 320 us a call, four calls an update; one compiled call\n")
    assert not lines_matching(page, KEEPING)
    page.write_text("not reached on this run. the GPU checklist's target\nno sync there. each loop\n")
    assert len(prose_lines_matching(page, LOWER_START)) == 2
    page.write_text("a sentence ends here.\nthe next begins in lower case\n\n```\nx = 1.\nthe code\n```\n")
    assert prose_lines_matching(page, LOWER_START) == ["results.md:1: a sentence ends here."]
    page.write_text("e.g. the H100; 1e-3. cuDNN's; here. bf16 keeps; shown. envpool steps; `x. the`\n")
    assert not prose_lines_matching(page, LOWER_START)


def test_the_citation_file_has_what_github_reads():
    text = (ROOT / "CITATION.cff").read_text()
    for key in ("cff-version: 1.2.0", "message:", "title:", "authors:", "license: MIT", "type: software"):
        assert re.search(rf"^{re.escape(key)}", text, flags=re.M), key
