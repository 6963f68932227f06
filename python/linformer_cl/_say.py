"""What the package tells its user through Python's logging (the logger "linformer_cl").

A program that configured no logging would see nothing of a record below
WARNING, so such a record is also written once on stderr there.
"""
import logging
import sys

log = logging.getLogger("linformer_cl")
_said = set()


def say_once(message: str, level: int = logging.INFO) -> None:
    """Logs message once in the process; on stderr too where no handler would show it."""
    if message in _said:
        return
    _said.add(message)
    log.log(level, message)
    if level < logging.WARNING and not log.hasHandlers():
        print(f"linformer_cl: {message}", file=sys.stderr, flush=True)
