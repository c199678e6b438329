"""The one retry policy: bounded backoff for calls that may fail for a while (a throttled cloud API, a busy SMTP
server). A try, then one more after each delay; `sleep` is injectable so tests do not wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Retry:
    delays: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0)  # seconds waited before each try after the first
    sleep: Callable[[float], None] = time.sleep
    retried: int = 0

    @classmethod
    def exponential(cls, attempts: int, delay: float, cap: float = 60.0,
                    sleep: Callable[[float], None] = time.sleep) -> Retry:
        """`attempts` tries in all, waiting delay, 2*delay, 4*delay... (at most cap) in between."""
        return cls(tuple(min(cap, delay * 2 ** i) for i in range(attempts - 1)), sleep)

    @property
    def attempts(self) -> int:
        return len(self.delays) + 1

    def wait(self, attempt: int) -> float:
        """The wait after the given try (1 for the first)."""
        return self.delays[attempt - 1]

    def call(self, fn: Callable[..., Any], *args: Any, throttled: Callable[[BaseException], bool],
             **kwargs: Any) -> Any:
        """fn's result, tried again after each delay while what it raises is `throttled`."""
        for delay in (*self.delays, None):
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                if delay is None or not throttled(e):
                    raise
                self.retried += 1
                self.sleep(delay)
        raise AssertionError("unreachable")
