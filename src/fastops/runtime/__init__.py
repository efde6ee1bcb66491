"""The runtime: logical graph -> physical plan -> tasks on an executor."""
from fastops.runtime.checkpoint import CheckpointStorageError
from fastops.runtime.errors import JobFailed
from fastops.runtime.executor import Executor, JobResult
from fastops.core.messages import CheckpointBarrier, EndOfStream, Idle, Watermark

__all__ = ["JobFailed", "CheckpointStorageError", "Executor", "JobResult", "Watermark", "Idle", "CheckpointBarrier", "EndOfStream"]
