"""fastops: stream processing over Apache Arrow with compiled Cython kernels."""
import sys as _sys

if _sys.byteorder != "little":  # hashes are defined on little-endian bytes
    raise ImportError("fastops supports little-endian platforms only")

try:
    from fastops._kernels import core as _core  # noqa: F401
except ImportError as exc:  # no silent pure-Python fallback
    raise ImportError(
        "fastops' compiled kernels (fastops._kernels.core) are missing or failed to load: "
        f"{exc}. Install fastops with 'pip install .' (or 'pip install -e .' for "
        "development; re-run it after editing .pyx files)."
    ) from exc

# --- windows (window aggregation, durations, watermarks, agg) ---
# --- end windows ---
# --- sketches ---
from fastops import agg, sketches, windows  # noqa: F401  (fastops.sketches.HyperLogLog, ...)
from fastops.autoscale import Autoscaling
from fastops.core.arrow import release_memory
from fastops.core.durations import parse_duration
from fastops.core.hashing import hash64, null_hash
from fastops.core.keys import KeyTable
from fastops.core.partitioning import key_group_range, moved_fraction, partition, partition_ids
from fastops.core.watermarks import BoundedOutOfOrderness, MonotonousTimestamps
from fastops.core.window.aggregator import WindowAggregator
from fastops.core.window.assigners import GlobalWindow, Session, Sliding, Tumbling

# --- end sketches ---
# --- runtime and DataStream API ---
from fastops.datastream import DataStream, KeyedStream, StreamEnvironment, WindowedStream, col
from fastops.operators.process import KeyedProcessFunction
from fastops.runtime import CheckpointStorageError, JobCancelled, JobClient, JobFailed, JobResult, JobStatus
from fastops.shedding import QoS
from fastops.table import TableEnvironment, lit, udaf, udf, udtf

# --- end runtime ---

__version__ = "0.1.0"

__all__ = [
    "Autoscaling",
    "BoundedOutOfOrderness",
    "CheckpointStorageError",
    "DataStream",
    "GlobalWindow",
    "JobCancelled",
    "JobClient",
    "JobFailed",
    "JobResult",
    "JobStatus",
    "KeyTable",
    "KeyedProcessFunction",
    "KeyedStream",
    "MonotonousTimestamps",
    "QoS",
    "Session",
    "Sliding",
    "StreamEnvironment",
    "TableEnvironment",
    "Tumbling",
    "WindowAggregator",
    "WindowedStream",
    "__version__",
    "agg",
    "col",
    "hash64",
    "key_group_range",
    "lit",
    "moved_fraction",
    "null_hash",
    "parse_duration",
    "partition",
    "partition_ids",
    "release_memory",
    "sketches",
    "udaf",
    "udf",
    "udtf",
]

# Subpackages users import from (fastops.table, fastops.windows, ...): listed by dir(), not
# star-imported.
_PUBLIC_MODULES = ("agg", "connectors", "operators", "sketches", "table", "windows")


def __dir__() -> list[str]:
    """The public API only: not the helper modules the imports above load as attributes."""
    return sorted({*__all__, *_PUBLIC_MODULES})
