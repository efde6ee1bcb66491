"""The runtime: logical graph -> physical plan -> attempts on an executor, driven by a job driver."""
from fastops.core.messages import CheckpointBarrier, EndOfStream, Idle, Watermark
from fastops.runtime.checkpoint import CheckpointStorageError
from fastops.runtime.client import JobClient
from fastops.runtime.errors import JobCancelled, JobFailed
from fastops.runtime.executors import Executor
from fastops.runtime.job import Job, JobResult, JobStatus

__all__ = ["CheckpointBarrier", "CheckpointStorageError", "EndOfStream", "Executor", "Idle", "Job", "JobCancelled",
           "JobClient", "JobFailed", "JobResult", "JobStatus", "Watermark"]
