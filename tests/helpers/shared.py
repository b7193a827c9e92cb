"""doc/maintainers/shared.py, the maintainers' writer of the definitions the scripts share (not a package): loaded
here as a module, for the tests that check each copy against its one text and the writer itself."""

import importlib.util

from helpers.scripts import ROOT

spec = importlib.util.spec_from_file_location("shared", ROOT / "doc" / "maintainers" / "shared.py")
shared = importlib.util.module_from_spec(spec)
spec.loader.exec_module(shared)
