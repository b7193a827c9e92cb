"""The pages users read speak to users: no word from how the project is maintained, no absolute path of the machine a
result was made on, and citation metadata GitHub can read."""

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
# An absolute path on a machine: /work/..., /tmp/..., /home/..., /root/..., /Users/... (not a URL's path)
ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:work|tmp|home|root|Users|mnt|scratch|private)/[\w.-]")


def lines_matching(path, pattern):
    name = path.relative_to(ROOT) if ROOT in path.parents else path.name
    return [f"{name}:{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


@pytest.mark.parametrize("page", USER_PAGES + PUBLISHED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_maintainers_workflow_word_in_a_user_page(page):
    found = lines_matching(page, WORKFLOW)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", USER_PAGES + PUBLISHED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_absolute_path_in_a_published_file(page):
    found = lines_matching(page, ABSOLUTE)
    assert not found, "\n".join(found)


def test_the_checks_catch_what_they_are_for(tmp_path):
    page = tmp_path / "results.md"
    page.write_text("made in one sitting (issue 40) on the stand-in device\nsee /work/main/bench/x/summary.json\n")
    assert len(lines_matching(page, WORKFLOW)) == 1 and len(lines_matching(page, ABSOLUTE)) == 1
    page.write_text("see https://example.org/tmp/x and bench/x/summary.json; a process session of its own? no\n")
    assert not lines_matching(page, ABSOLUTE)


def test_the_citation_file_has_what_github_reads():
    text = (ROOT / "CITATION.cff").read_text()
    for key in ("cff-version: 1.2.0", "message:", "title:", "authors:", "license: MIT", "type: software"):
        assert re.search(rf"^{re.escape(key)}", text, flags=re.M), key
