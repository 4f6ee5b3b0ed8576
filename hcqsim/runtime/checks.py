"""What the runtime checks of its caller: argument types (`expect`) and where in the user's code a call came from
(`caller_location`, the first frame outside hcqsim/runtime/)."""
from __future__ import annotations

import os
import sys

_RUNTIME_DIR = os.path.dirname(os.path.abspath(__file__))
_IN_RUNTIME: dict[str, bool] = {}  # source file -> inside hcqsim.runtime (caller_location)


def caller_location() -> str:
    """'file:line in function' of the innermost frame outside hcqsim.runtime: where the user called."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        inside = _IN_RUNTIME.get(name)
        if inside is None:  # one path computation per source file (this runs at every free)
            inside = _IN_RUNTIME[name] = os.path.dirname(os.path.abspath(name)) == _RUNTIME_DIR
        if not inside:
            break
        f = f.f_back
    if f is None:
        return "unknown location"
    return f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"


def expect(value, kind: type, what: str):
    """`value` if it is a `kind`, else TypeError naming the argument: a wrong type never gets as far as an
    AttributeError from inside the runtime."""
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{what} must be {'an' if kind.__name__[0] in 'aeiouAEIOU' else 'a'} {kind.__name__}, "
                        f"got {type(value).__name__} {value!r}")
    return value
