"""tools/shared.py, the maintainers' writer of the definitions the scripts share (not a package): loaded
here as a module, for the tests that check each copy against its one text and the writer itself."""

from helpers.scripts import ROOT, load_tool

shared = load_tool(ROOT / "tools" / "shared.py")
