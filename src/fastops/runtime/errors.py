"""Job failures that point at the user's code, not at the engine."""
from __future__ import annotations

import os
from types import TracebackType
from typing import Any

import pyarrow as pa

from fastops.operators.base import OperatorContractError

__all__ = ["JobCancelled", "JobFailed", "OperatorContractError", "describe_batch", "user_traceback"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_engine_frame(tb: TracebackType) -> bool:
    return os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep)


def user_traceback(exc: BaseException) -> BaseException:
    """Drop the engine's frames from the top of ``exc``'s traceback.

    The traceback then starts at the first frame of user code, so the user's
    own frames come first. If every frame is the engine's, it is left alone.
    """
    tb = exc.__traceback__
    while tb is not None and _is_engine_frame(tb):
        tb = tb.tb_next
    if tb is not None:
        exc.__traceback__ = tb
    return exc


def _first_rows(batch: pa.RecordBatch) -> str:
    try:
        return repr(batch.to_pylist())
    except (OverflowError, ValueError, pa.ArrowException):
        # values Python cannot hold (timestamps beyond year 9999): Arrow's own text per column
        return "{" + ", ".join(f"{name!r}: {col.to_string(skip_new_lines=True)}"
                               for name, col in zip(batch.schema.names, batch.columns)) + "}"


def describe_batch(batch: pa.RecordBatch | None, rows: int = 5) -> str:
    """The batch in an error message: size, schema and its first ``rows`` rows."""
    if batch is None:
        return "no batch"
    schema = batch.schema.to_string(show_schema_metadata=False).replace(chr(10), ", ")
    return (f"a batch of {batch.num_rows} rows, schema ({schema}), "
            f"first rows {_first_rows(batch.slice(0, rows))}")


class JobFailed(RuntimeError):
    """A job stopped because an operator raised.

    Attributes: ``operator`` (its name), ``task`` (e.g. ``"map[1/2]"``),
    ``batch`` (the batch being processed, or None) and ``__cause__`` (the
    original exception, its traceback starting at the user's frames).
    """

    def __init__(self, operator: str, task: str, cause: BaseException,
                 batch: pa.RecordBatch | None = None):
        self.operator = operator
        self.task = task
        self.batch = batch
        message = (
            f"operator {operator!r} (task {task}) failed on {describe_batch(batch)}: "
            f"{type(cause).__name__}: {cause}"
        )
        super().__init__(message)


class JobCancelled(Exception):
    """The job was cancelled (``JobClient.cancel()``) before it finished.

    ``result`` is the ``JobResult`` up to the cancel (metrics, checkpoints
    completed) when the job driver made one, else None.
    """

    def __init__(self, job_name: str, result: Any = None):
        super().__init__(f"job {job_name!r} was cancelled")
        self.job_name = job_name
        self.result = result
