"""One host thread at a time inside a Device.

A Device keeps host-side state between calls (ring write pointers, the kernarg arena, staging buffers, free
lists), and a call may sleep inside (a wait, a staged copy) with that state half-used. Two threads inside one
Device at once could interleave packets in a ring or share a staging buffer and read each other's bytes (the
second audit saw wrong copyouts from five threads sharing one Device). hcqsim does not make that silently work:
a call that finds another thread inside the same Device raises `ConcurrentUseError` at once, naming both threads
and both calls, and changes nothing; the other thread's call goes on unharmed. Give each thread its own Device
(`open_devices`), or serialise the calls. Calls by the thread already inside (a copyout that submits and waits)
nest. Reading or writing buffer and signal memory (`Buffer.view`, `Signal.value`) is plain memory and needs no
turn, as on hardware.
"""
from __future__ import annotations

import functools
import threading
from typing import Callable, TypeVar

from ..errors import ConcurrentUseError

F = TypeVar("F", bound=Callable)


class Turn:
    """Who is inside a Device now: a non-blocking lock with an owner, a depth and the call's name."""

    __slots__ = ("_lock", "owner", "owner_name", "call", "depth")

    def __init__(self):
        self._lock = threading.Lock()
        self.owner: int | None = None
        self.owner_name, self.call, self.depth = "", "", 0

    def enter(self, device, call: str) -> None:
        me = threading.get_ident()
        if self.owner == me:  # only this thread sets owner to itself: reading it unlocked is safe
            self.depth += 1
            return
        if not self._lock.acquire(blocking=False):
            raise ConcurrentUseError(
                f"{getattr(device, 'label', 'device')}: {call} from thread {threading.current_thread().name!r} while thread "
                f"{self.owner_name!r} is inside {self.call}; a Device is not thread-safe: give each thread its own "
                f"(open_devices) or serialise the calls. Nothing was done.")
        self.owner, self.owner_name, self.call, self.depth = me, threading.current_thread().name, call, 1

    def leave(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.owner, self.call = None, ""
            self._lock.release()


def exclusive(method: F) -> F:
    """A Device method that takes the Device's turn for its duration (see the module docstring)."""
    call = method.__name__

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        turn = self._turn
        turn.enter(self, call)
        try:
            return method(self, *args, **kwargs)
        finally:
            turn.leave()
    return wrapper  # type: ignore[return-value]
