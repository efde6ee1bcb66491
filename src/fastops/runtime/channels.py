"""Bounded channels with credit-based flow control, grouped into input gates.

A channel carries record batches and control messages from one sending task
to one receiving task. The receiver grants ``capacity`` credits up front and
one more each time it takes a batch; a sender without credit waits, and the
wait is counted as backpressure. Control messages (watermarks, barriers, end
of stream) are tiny and need no credit, so they can never deadlock behind a
full channel.

``Channel`` is the protocol the tasks program against; ``LocalChannel``
implements it between threads of one process. All channels into one task
form its ``InputGate``: one lock, one condition, so the task can wait on any
of its inputs at once. Another transport (actors on several machines)
implements the same two: a sending end with credits, a receiving gate.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Protocol

import pyarrow as pa


class Cancelled(Exception):
    """The job is being cancelled; a blocked send or receive gives up."""


class ChannelClosed(RuntimeError):
    """An item was sent on a channel after ``close()``."""


class Channel(Protocol):
    """One sender -> one receiver, with credits for record batches."""

    input_index: int  # which logical input of the receiver (join: 0 left, 1 right)

    def send(self, item: Any) -> float:
        """Enqueue ``item``, waiting for a credit if it is a batch and none is
        left; returns the seconds waited (backpressure). Raises ``Cancelled``
        when the job stops while waiting."""
        ...

    def try_send(self, item: Any) -> bool:
        """Enqueue ``item`` if that needs no wait; False (nothing sent) otherwise."""
        ...

    def receive(self, timeout: float | None = None) -> Any:
        """The next item of this channel, waiting up to ``timeout`` seconds
        (None: no limit); None if nothing came. A batch taken grants a credit back."""
        ...

    def close(self) -> None:
        """The sender is done (after ``EndOfStream``): later sends fail."""
        ...


class InputGate:
    """The input channels of one task."""

    def __init__(self, cancel: threading.Event):
        self.lock = threading.Lock()
        self.data_ready = threading.Condition(self.lock)
        self.channels: list[LocalChannel] = []
        self.cancel = cancel
        self._next = 0
        self._blocked: set[int] = set()

    def new_channel(self, capacity: int | None, input_index: int = 0) -> LocalChannel:
        ch = LocalChannel(self, len(self.channels), capacity, input_index)
        self.channels.append(ch)
        return ch

    def block(self, index: int) -> None:
        """Stop taking items from channel ``index`` (barrier alignment)."""
        with self.lock:
            self._blocked.add(index)

    def unblock_all(self) -> None:
        with self.lock:
            self._blocked.clear()
            self.data_ready.notify_all()

    def _take(self, i: int) -> Any:
        """Pop the head of channel ``i`` (the lock is held; the queue is not empty)."""
        ch = self.channels[i]
        item = ch.queue.popleft()
        if isinstance(item, pa.RecordBatch) and ch.capacity is not None:
            ch.credits += 1  # the receiver grants a credit back
            ch.credit_ready.notify()
        return item

    def _pick(self) -> tuple[int, Any] | None:
        n = len(self.channels)
        for k in range(n):
            i = (self._next + k) % n
            if self.channels[i].queue and i not in self._blocked:
                self._next = (i + 1) % n
                return i, self._take(i)
        return None

    def _wait(self, deadline: float | None) -> bool:
        """Wait for a notification (the lock is held); False once ``deadline`` passed."""
        if self.cancel.is_set():
            raise Cancelled()
        wait = 0.1
        if deadline is not None:
            wait = min(wait, deadline - time.perf_counter())
            if wait <= 0:
                return False
        self.data_ready.wait(wait)
        return True

    def has_input(self) -> bool:
        """Whether an item waits on a channel not blocked (without taking it)."""
        with self.lock:
            return any(ch.queue and i not in self._blocked for i, ch in enumerate(self.channels))

    def poll(self) -> tuple[int, Any] | None:
        """Take the next item of any input without waiting, or None."""
        with self.lock:
            return self._pick()

    def get(self, timeout: float | None = None) -> tuple[int, Any] | None:
        """Wait for the next ``(channel index, item)``; None after ``timeout`` seconds."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        with self.lock:
            while True:
                got = self._pick()
                if got is not None:
                    return got
                if not self._wait(deadline):
                    return None

    def receive_from(self, index: int, timeout: float | None = None) -> Any:
        """The next item of channel ``index`` alone (see ``Channel.receive``)."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        with self.lock:
            while True:
                if self.channels[index].queue:
                    return self._take(index)
                if not self._wait(deadline):
                    return None

    def wake(self) -> None:
        with self.lock:
            self.data_ready.notify_all()
            for ch in self.channels:
                ch.credit_ready.notify_all()


class LocalChannel:
    """A ``Channel`` between two threads. ``capacity=None`` means unbounded
    (every task in one thread: a send must never wait)."""

    def __init__(self, gate: InputGate, index: int, capacity: int | None, input_index: int):
        if capacity is not None and capacity < 1:
            raise ValueError(f"channel capacity must be >= 1, got {capacity}")
        self.gate = gate
        self.index = index
        self.input_index = input_index
        self.capacity = capacity
        self.credits = capacity if capacity is not None else 0
        self.queue: deque = deque()
        self.credit_ready = threading.Condition(gate.lock)
        self.closed = False

    def _refuse(self) -> ChannelClosed:
        return ChannelClosed(f"channel {self.index} into a task was closed by its sender")

    def send(self, item: Any) -> float:
        waited = 0.0
        gate = self.gate
        with gate.lock:
            if self.closed:
                raise self._refuse()
            if self.capacity is not None and isinstance(item, pa.RecordBatch):
                if self.credits == 0:
                    t0 = time.perf_counter()
                    while self.credits == 0:
                        if gate.cancel.is_set():
                            raise Cancelled()
                        self.credit_ready.wait(0.1)
                    waited = time.perf_counter() - t0
                self.credits -= 1
            self.queue.append(item)
            gate.data_ready.notify()
        return waited

    def try_send(self, item: Any) -> bool:
        gate = self.gate
        with gate.lock:
            if self.closed:
                raise self._refuse()
            if self.capacity is not None and isinstance(item, pa.RecordBatch):
                if self.credits == 0:
                    return False
                self.credits -= 1
            self.queue.append(item)
            gate.data_ready.notify()
        return True

    def receive(self, timeout: float | None = None) -> Any:
        return self.gate.receive_from(self.index, timeout)

    def close(self) -> None:
        with self.gate.lock:
            self.closed = True

    def __len__(self) -> int:
        return len(self.queue)
