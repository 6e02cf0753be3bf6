"""``python -m fuzz TARGET --runs N [--seed S] [--engine atheris|random]`` (fuzz.runner)."""

import sys

from fuzz.runner import main

sys.exit(main())
