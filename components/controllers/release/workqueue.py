"""A de-duplicating, rate-limited work queue: client-go's workqueue, for one controller.

Why: a controller that handles objects inline on its watch stops for everyone when one object
cannot be handled (the watch replays the same event). With this queue the watch only records
keys; workers take them one at a time, and a key whose handling failed comes back after a
backoff of its own (exponential per key, like controller-runtime's rate limiter) while every
other key goes on. Semantics kept from client-go: a key is queued at most once; a key being
processed is never handed to a second worker; a key added while it is processed is handed out
again once it is done. `max_len` bounds the queue for best-effort work (adds past it are
refused and the caller counts them). `oldest_wait()` says how long the oldest ready key has
waited for a worker: the controller's health reads it (workers that stopped taking keys), not
the backoff of keys that wait by design. No Python library offers these semantics without a whole
operator framework around them, hence this small class.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable


class WorkQueue:
    def __init__(
        self,
        base_delay: float = 0.05,
        max_delay: float = 30.0,
        max_len: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_len = max_len
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._waiting: list[tuple[float, int, Hashable]] = []
        self._seq = itertools.count()
        self._failures: dict[Hashable, int] = {}
        # When each key in _queue became ready (the deque is in that order).
        self._ready_since: dict[Hashable, float] = {}
        self._shutdown = False

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def add(self, key: Hashable) -> bool:
        """Queue `key` unless it is queued already. False only when the queue is full."""
        with self._cond:
            if self._shutdown or key in self._dirty:
                return True
            if self.max_len is not None and len(self._dirty) >= self.max_len:
                return False
            self._dirty.add(key)
            if key not in self._processing:
                self._ready(key)
                self._cond.notify()
            return True

    def _ready(self, key: Hashable) -> None:
        self._queue.append(key)
        self._ready_since[key] = self._clock()

    def oldest_wait(self) -> float:
        """Seconds the oldest ready key has waited for a worker (0 when none waits)."""
        with self._cond:
            self._promote(self._clock())
            if not self._queue:
                return 0.0
            return max(0.0, self._clock() - self._ready_since[self._queue[0]])

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            heapq.heappush(self._waiting, (self._clock() + delay, next(self._seq), key))
            self._cond.notify()

    def backoff(self, key: Hashable) -> float:
        """The delay the next add_rate_limited(key) will wait."""
        with self._cond:
            return self._delay(key)

    def _delay(self, key: Hashable) -> float:
        return min(self.max_delay, self.base_delay * 2 ** self._failures.get(key, 0))

    def add_rate_limited(self, key: Hashable) -> float:
        """Queue `key` again after its own exponential backoff; returns the delay. One step under
        the lock, so a forget() from another thread comes wholly before or after it."""
        with self._cond:
            delay = self._delay(key)
            self._failures[key] = self._failures.get(key, 0) + 1
            if not self._shutdown:
                heapq.heappush(self._waiting, (self._clock() + delay, next(self._seq), key))
                self._cond.notify()
        return delay

    def failures(self, key: Hashable) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    def forget(self, key: Hashable) -> None:
        """Reset the key's backoff (handled, or gone)."""
        with self._cond:
            self._failures.pop(key, None)

    def _promote(self, now: float) -> None:
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._ready(key)

    def get(self, timeout: float | None = None) -> Hashable | None:
        """The next key (now processing), or None after `timeout` seconds or at shutdown."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                now = self._clock()
                self._promote(now)
                if self._queue:
                    key = self._queue.popleft()
                    self._ready_since.pop(key, None)
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                if self._shutdown:
                    return None
                waits = [t - now for t in ((self._waiting[0][0],) if self._waiting else ())]
                if deadline is not None:
                    if now >= deadline:
                        return None
                    waits.append(deadline - now)
                self._cond.wait(min(waits) if waits else None)

    def done(self, key: Hashable) -> None:
        """Processing of `key` is over; if it was added meanwhile it is queued again."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._ready(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
