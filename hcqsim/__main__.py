"""`python -m hcqsim ...`: the same as the `hcqsim` command (hcqsim/cli.py)."""
import sys

from .cli import main

sys.exit(main())
