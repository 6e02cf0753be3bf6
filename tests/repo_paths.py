"""Where tests find the checkout's files, wherever in tests/ they live."""

from pathlib import Path

#: the repository checkout
REPO_ROOT = Path(__file__).resolve().parent.parent
#: the tests' own data files
TEST_DATA = REPO_ROOT / "tests" / "data"
