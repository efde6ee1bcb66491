"""Bounded channels with credit-based flow control, grouped into input gates.

A channel carries record batches and control messages from one sending task
to one receiving task. The receiver grants ``capacity`` credits up front and
one more each time it takes a batch; a sender without credit waits, and the
wait is counted as backpressure. Control messages (watermarks, barriers, end
of stream) are tiny and need no credit, so they can never deadlock behind a
full channel.

All channels into one task form its input gate: one lock, one condition, so
the task can wait on any of its inputs at once.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import pyarrow as pa


class Cancelled(Exception):
    """The job is being cancelled; a blocked send or receive gives up."""


class InputGate:
    """The input channels of one task."""

    def __init__(self, cancel: threading.Event):
        self.lock = threading.Lock()
        self.data_ready = threading.Condition(self.lock)
        self.channels: list[Channel] = []
        self.cancel = cancel
        self._next = 0
        self._blocked: set[int] = set()

    def new_channel(self, capacity: int | None, input_index: int = 0) -> Channel:
        ch = Channel(self, len(self.channels), capacity, input_index)
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

    def _pick(self) -> tuple[int, Any] | None:
        n = len(self.channels)
        for k in range(n):
            i = (self._next + k) % n
            ch = self.channels[i]
            if ch.queue and i not in self._blocked:
                self._next = (i + 1) % n
                item = ch.queue.popleft()
                if isinstance(item, pa.RecordBatch) and ch.capacity is not None:
                    ch.credits += 1  # the receiver grants a credit back
                    ch.credit_ready.notify()
                return i, item
        return None

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
                if self.cancel.is_set():
                    raise Cancelled()
                wait = 0.1
                if deadline is not None:
                    wait = min(wait, deadline - time.perf_counter())
                    if wait <= 0:
                        return None
                self.data_ready.wait(wait)

    def wake(self) -> None:
        with self.lock:
            self.data_ready.notify_all()
            for ch in self.channels:
                ch.credit_ready.notify_all()


class Channel:
    """One sender -> one receiver. ``capacity=None`` means unbounded (one-thread mode)."""

    def __init__(self, gate: InputGate, index: int, capacity: int | None, input_index: int):
        if capacity is not None and capacity < 1:
            raise ValueError(f"channel capacity must be >= 1, got {capacity}")
        self.gate = gate
        self.index = index
        self.input_index = input_index  # which logical input of the receiver
        self.capacity = capacity
        self.credits = capacity if capacity is not None else 0
        self.queue: deque = deque()
        self.credit_ready = threading.Condition(gate.lock)

    def send(self, item: Any) -> float:
        """Enqueue ``item``; returns the seconds spent waiting for credit."""
        waited = 0.0
        gate = self.gate
        with gate.lock:
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

    def __len__(self) -> int:
        return len(self.queue)
