"""A boundary wrapper for tests that count driver calls (not time them)."""
from __future__ import annotations


class CountingOS:
    """Wraps a boundary: counts ioctls by request, passes everything through."""

    def __init__(self, os_):
        self._os, self.counts = os_, {}

    def ioctl(self, fd, request, arg):
        self.counts[request] = self.counts.get(request, 0) + 1
        return self._os.ioctl(fd, request, arg)

    def __getattr__(self, name):
        return getattr(self._os, name)
