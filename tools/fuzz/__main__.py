"""``python -m fuzz TARGET --runs N [--seed S] [--engine atheris|random]`` (nnhal.tools.fuzz.runner)."""

import sys

from nnhal.tools.fuzz.runner import main

sys.exit(main())
