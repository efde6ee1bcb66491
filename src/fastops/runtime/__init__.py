"""The runtime: logical graph -> physical plan -> tasks on an executor."""
from fastops.core.messages import CheckpointBarrier, EndOfStream, Idle, Watermark
from fastops.runtime.checkpoint import CheckpointStorageError
from fastops.runtime.errors import JobFailed
from fastops.runtime.executor import Executor, JobResult

__all__ = ["CheckpointBarrier", "CheckpointStorageError", "EndOfStream", "Executor", "Idle", "JobFailed", "JobResult", "Watermark"]
