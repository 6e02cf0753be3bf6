"""``python -m nnhal``: the same command line as the ``nnhal`` script.

The only module of the contract that reaches into another layer: an entry
point has to name the command line (``nnhal.tools.cli``) somewhere.
"""

from nnhal.tools.cli import main

raise SystemExit(main())
