"""Progress of long work on stderr: a bar on a terminal, a few plain lines elsewhere.

On a terminal each phase gets a tqdm bar. When stderr is a pipe or a log file a bar would
write hundreds of carriage-return updates, so a phase prints one plain line when it ends
(and one every `interval_s` while it runs, for long phases). `quiet` prints nothing.

    progress = Progress(quiet=args.quiet)
    with progress.bar("embedding", total=120, unit="vector") as bar:
        bar.update(64)
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Never, TextIO, TypeVar

# tqdm rather than rich: tqdm has no dependencies of its own (rich brings pygments and
# markdown-it-py into every install), and a one-line bar on stderr is all needed here.
if TYPE_CHECKING:  # loaded for the first bar on a terminal: pipes and logs never need it
    from tqdm import tqdm

__all__ = ["Bar", "Progress"]

T = TypeVar("T")


class Bar:
    """One phase: `update`/`update_to` move it, `close` (or leaving the `with`) ends it."""

    def __init__(
        self, owner: Progress, desc: str, total: int | None, unit: str, interval_s: float
    ) -> None:
        self.desc = desc
        self.total = total
        self.unit = unit
        self.done = 0
        self._owner = owner
        self._interval_s = interval_s
        self._started = self._last_line = time.monotonic()
        self._closed = False
        self._tqdm: tqdm[Never] | None = None
        if owner.mode == "bar":
            from tqdm import tqdm

            self._tqdm = tqdm(
                total=total,
                desc=desc,
                unit=f" {unit}s",
                file=owner.stream,
                dynamic_ncols=True,
                mininterval=0.2,
                leave=True,
            )

    def update(self, n: int = 1) -> None:
        self.update_to(self.done + n)

    def update_to(self, done: int) -> None:
        """Set how much is done (it never goes back); a total it passes is raised."""
        done = max(done, self.done)
        if self.total is not None and done > self.total:
            self.set_total(done)
        step, self.done = done - self.done, done
        if self._tqdm is not None:
            if step:
                self._tqdm.update(step)
        elif self._owner.mode == "lines":
            now = time.monotonic()
            if now - self._last_line >= self._interval_s:
                self._last_line = now
                self._owner.line(f"{self.desc}: {self._count()}{self._rate(now)}")

    def set_total(self, total: int) -> None:
        self.total = total
        if self._tqdm is not None:
            self._tqdm.total = total
            self._tqdm.refresh()

    def set_detail(self, text: str) -> None:
        """What the phase is on now (a file name): shown beside the bar, not in logs."""
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(text, refresh=False)

    def close(self, *, finished: bool = True, say: bool = True) -> None:
        """End the phase; `say=False` ends it without its last line (an error follows)."""
        if self._closed:
            return
        self._closed = True
        if self._tqdm is not None:
            if finished:
                self._tqdm.set_postfix_str("", refresh=False)
            self._tqdm.close()
        elif self._owner.mode == "lines" and say:
            elapsed = time.monotonic() - self._started
            state = f"done in {elapsed:.1f} s" if finished else "stopped"
            self._owner.line(f"{self.desc}: {self._count()}, {state}")
        self._owner._closed(self)

    def _rate(self, now: float) -> str:
        """`, 4.2 vectors/s, about 31 s left` from the pace so far (a bar shows its own)."""
        elapsed = now - self._started
        if self.done <= 0 or elapsed <= 0:
            return ""
        rate = self.done / elapsed
        text = f", {rate:.1f} {self.unit}s/s"
        if self.total is not None and self.total > self.done:
            left = (self.total - self.done) / rate
            text += f", about {_duration(left)} left"
        return text

    def _count(self) -> str:
        total = "" if self.total is None else f"/{self.total}"
        return f"{self.done}{total} {self.unit}s"

    def __enter__(self) -> Bar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(finished=exc is None)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class Progress:
    """Where a command reports its progress: `bar()` per phase, `note()` for a line."""

    def __init__(
        self, *, quiet: bool = False, stream: TextIO | None = None, interval_s: float = 10.0
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s = interval_s
        if quiet:
            self.mode = "quiet"
        else:
            isatty = getattr(self.stream, "isatty", None)
            self.mode = "bar" if isatty is not None and isatty() else "lines"
        self._open: list[Bar] = []

    def bar(self, desc: str, total: int | None = None, unit: str = "item") -> Bar:
        bar = Bar(self, desc, total, unit, self.interval_s)
        self._open.append(bar)
        return bar

    def iterate(self, desc: str, items: Sequence[T], unit: str = "item") -> Iterator[T]:
        """The items, with a bar of how many have been dealt with."""
        with self.bar(desc, len(items), unit) as bar:
            for item in items:
                yield item
                bar.update()

    def note(self, message: str) -> None:
        """A line on stderr (above any bar), unless quiet."""
        if self.mode != "quiet":
            self.line(message)

    def line(self, message: str) -> None:
        if self.mode == "bar" and self._open:
            from tqdm import tqdm

            tqdm.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def _closed(self, bar: Bar) -> None:
        if bar in self._open:
            self._open.remove(bar)
