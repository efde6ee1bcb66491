"""The aggregate protocol (:class:`SlotAggregate`) and the registry of aggregate constructors."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from fastops._kernels import window as _window

__all__ = ["SlotAggregate", "lookup", "register", "registered", "reserve"]


class SlotAggregate:
    """Base class of aggregates with per-slot state (see :mod:`fastops.core.aggregates`).

    Attributes
    ----------
    column
        Input column name, or None for an aggregate without input (``count()``).
    name
        Short name for messages and ``repr``.
    """

    column: str | None = None
    name: str = "aggregate"
    #: True: ``update`` also gets the rows' event times (int64 ms) as ``ts``
    needs_time: bool = False

    def output_type(self, input_type: pa.DataType | None) -> pa.DataType:
        """Arrow type of ``result`` for inputs of ``input_type``."""
        raise NotImplementedError

    def validate(self, input_type: pa.DataType | None) -> None:
        """Raise ``TypeError`` naming the column and type if unsupported."""

    def new_state(self) -> Any:
        """The state of zero slots."""
        raise NotImplementedError

    def update(self, state: Any, slots: np.ndarray, values: pa.Array) -> Any:
        """Row ``i`` of ``values`` goes into slot ``slots[i]`` (nulls already
        removed), in row order. Grows the state to ``max(slots) + 1`` slots;
        returns it. With ``needs_time``, called as ``update(state, slots,
        values, ts)``."""
        raise NotImplementedError

    def merge(self, state: Any, dst: np.ndarray, src: np.ndarray) -> Any:
        """``state[dst[i]] <- state[dst[i]] (+) state[src[i]]`` for each ``i`` in order."""
        raise NotImplementedError

    def result(self, state: Any, slots: np.ndarray) -> pa.Array:
        """One value per slot of ``slots``, in order."""
        raise NotImplementedError

    def combine(self, state: Any, rows: np.ndarray, src: np.ndarray, nrows: int,
                top: int) -> tuple[Any, pa.Array]:
        """Results of ``nrows`` output rows; row ``r`` merges the slots
        ``src[i]`` with ``rows[i] == r`` in order (sliding windows: a window
        from its panes; every row has at least one slot). Slots ``top, top + 1, ...`` (beyond every live slot)
        may serve as scratch and are left empty. Returns ``(state, results)``.

        This default merges rows of several slots into scratch slots with
        ``merge`` and reads rows of one slot directly.
        """
        result_slots = np.empty(nrows, dtype=np.int64)
        dst = np.empty(len(rows), dtype=np.int64)
        msrc = np.empty(len(rows), dtype=np.int64)
        m, nm = _window.pairs_plan(rows, src, nrows, top, np.empty(nrows, dtype=np.int64),
                                   result_slots, dst, msrc)
        if nm:
            state = self.merge(state, dst[:nm], msrc[:nm])
        out = self.result(state, result_slots)
        if m:
            state = self.reset(state, np.arange(top, top + m, dtype=np.int64))
        return state, out

    def reset(self, state: Any, slots: np.ndarray) -> Any:
        """Empty ``slots`` (purged) so they can be reused."""
        raise NotImplementedError

    def to_bytes(self, state: Any) -> bytes:
        raise NotImplementedError

    def from_bytes(self, data: bytes) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        """A stable text naming the aggregate and its parameters (checked on restore)."""
        return f"{type(self).__module__}.{type(self).__name__}({self.column!r})"

    def __repr__(self) -> str:
        return f"agg.{self.name}({'' if self.column is None else repr(self.column)})"


# ---------------------------------------------------------------- registry

_REGISTRY: dict[str, Callable[..., SlotAggregate]] = {}
_RESERVED: set[str] = set()


def register(name: str, factory: Callable[..., SlotAggregate]) -> None:
    """Make ``factory`` reachable as ``fastops.core.aggregates.<name>(...)``.

    Raises ``ValueError`` if ``name`` is taken (built-ins and the package's
    other names included) and ``TypeError`` if it is not an identifier or
    ``factory`` is not callable.
    """
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise TypeError(f"aggregate name must be a public identifier, got {name!r}")
    if not callable(factory):
        raise TypeError(f"aggregate factory for {name!r} must be callable")
    if name in _REGISTRY or name in _RESERVED:
        raise ValueError(f"aggregate {name!r} is already registered")
    _REGISTRY[name] = factory


def registered() -> list[str]:
    """Names of every aggregate constructor, built-ins first."""
    return list(_REGISTRY)


def lookup(name: str) -> Callable[..., SlotAggregate] | None:
    """The constructor registered as ``name``, None if there is none."""
    return _REGISTRY.get(name)


def reserve(names: Iterable[str]) -> None:
    """Names :func:`register` refuses besides the registered ones: those the
    package ``fastops.core.aggregates`` defines itself, which a registered
    aggregate would otherwise hide."""
    _RESERVED.update(names)
