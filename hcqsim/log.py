"""Logging levels of hcqsim's `hcqsim.*` loggers: `HCQSIM_LOG=debug|info|warning|error` in the environment
(read when hcqsim is imported, so it works for library users too) and `hcqsim -v` (info) / `-vv` (debug) on the
command line; the more verbose of the two wins. Messages go to stderr as `hcqsim LEVEL logger: message`.
Without either, only warnings and errors are shown.
"""
from __future__ import annotations

import logging
import os
import sys

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (pytest's capture replaces it between tests)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def env_level() -> int | None:
    """The level HCQSIM_LOG names; None when unset. ValueError names the accepted values."""
    value = os.environ.get("HCQSIM_LOG", "").strip().lower()
    if not value:
        return None
    if value not in LEVELS:
        raise ValueError(f"HCQSIM_LOG={value}: expected one of {', '.join(LEVELS)}")
    return LEVELS[value]


def configure(verbose: int = 0) -> int:
    """Set the `hcqsim` logger's level from -v count and HCQSIM_LOG; one stderr handler. Returns the level."""
    level = (logging.WARNING, logging.INFO)[verbose] if verbose < 2 else logging.DEBUG
    from_env = env_level()
    if from_env is not None:
        level = min(level, from_env)
    logger = logging.getLogger("hcqsim")
    logger.setLevel(level)
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("hcqsim %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    return level
