"""Progress of a long run of members (`jaxhinge sweep`): a bar on a terminal, lines on a pipe.

On a terminal one line is redrawn in place (at most ten times a second, and at the end): members done out of
the total, members per second, the time left at that rate and the failures so far. On a pipe or in a file (a
CI log, `2> log.txt`) each update is its own line, `jaxhinge: <done>/<total> members done, <s> s`, with the
failures when there are any.
"""

import sys
import time
from io import TextIOBase

__all__ = ["MemberProgress"]

_WIDTH = 28  # characters of the bar


class MemberProgress:
    """`update(done, failed)` after each chunk; `close()` at the end (ends the terminal's line)."""

    def __init__(self, total: int, stream: TextIOBase | None = None, start: int = 0):
        self.total, self.stream = total, stream or sys.stderr
        self.start, self.t0, self.shown = start, time.perf_counter(), 0.0
        isatty = getattr(self.stream, "isatty", None)
        self.bar = bool(isatty and isatty())
        self.open = False

    def line(self, done: int, failed: int, now: float) -> str:
        """The terminal line for `done` members (of which `failed` failed) at `now` (perf_counter seconds)."""
        wall = max(now - self.t0, 1e-9)
        rate = (done - self.start) / wall
        left = (self.total - done) / rate if rate > 0 else None
        filled = round(_WIDTH * done / self.total) if self.total else _WIDTH
        eta = "?" if left is None else f"{left:.0f} s"
        return (f"jaxhinge: [{'#' * filled}{'.' * (_WIDTH - filled)}] {done}/{self.total} members, "
                f"{rate:.0f}/s, {'done' if done >= self.total else 'ETA ' + eta}, {failed} failed")

    def update(self, done: int, failed: int = 0) -> None:
        now = time.perf_counter()
        if not self.bar:
            extra = f", {failed} failed" if failed else ""
            print(f"jaxhinge: {done}/{self.total} members done, {now - self.t0:.1f} s{extra}", file=self.stream,
                  flush=True)
            return
        if done < self.total and now - self.shown < 0.1:
            return
        self.shown = now
        self.stream.write("\r\x1b[K" + self.line(done, failed, now))
        self.stream.flush()
        self.open = True

    def close(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False
