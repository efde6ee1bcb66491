"""Control messages on channels (defined in ``fastops.messages``)."""
from fastops.messages import (END_OF_STREAM, IDLE, MAX_WATERMARK, MIN_WATERMARK,  # noqa: F401
                              CheckpointBarrier, EndOfStream, Idle, Watermark)
