"""Exit statuses of the `hcqsim` command, and the error a subcommand raises to end with one line on stderr.

    0    done (conformance: every scenario passed)
    1    conformance: a scenario failed, errored or differed from a record; trace -- CMD: CMD failed
    2    usage: an unknown option, value, scenario name or device spec
    3    unavailable: the device is not there (no /dev/kfd, fewer GPUs than asked for), or a file cannot be read
         or written (a missing --compare record, an output directory that does not exist)
    4    internal error: hcqsim itself failed; the line says so, and -vv (HCQSIM_LOG=debug) logs the traceback
    130  interrupted (Ctrl-C)
    141  the reader of stdout went away (`hcqsim ... | head -3`), as a shell reports a writer stopped by SIGPIPE

`hcqsim disasm` keeps its own statuses (hcqsim/disasm_command.py: 1 for input it cannot read or decode, 2, 141).
Harness layer.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class CommandError(Exception):
    """Ends a subcommand: `hcqsim <command>: <message>` on stderr and `status` as the exit status."""

    def __init__(self, message: str, status: int = EXIT_USAGE):
        super().__init__(message)
        self.status = status


def usage(message: str) -> CommandError:
    return CommandError(message, EXIT_USAGE)


def unavailable(message: str) -> CommandError:
    return CommandError(message, EXIT_UNAVAILABLE)
