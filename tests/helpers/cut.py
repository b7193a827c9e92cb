"""cut.py, the project's command that writes the file a copier takes (at the project's root, not a package): loaded
here as a module, for the tests that check its rules and the stripped files' sizes."""

import importlib.util

from helpers.scripts import ROOT

spec = importlib.util.spec_from_file_location("cut", ROOT / "cut.py")
cut = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cut)
