"""cut.py, the project's command that writes the file a copier takes (at the project's root, not a package): loaded
here as a module, for the tests that check its rules and the stripped files' sizes."""

from helpers.scripts import ROOT, load_tool

cut = load_tool(ROOT / "tools" / "cut.py")
