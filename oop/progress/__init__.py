"""The progress core (STYLE §5): low/high-watermarks and their min-combination."""

from oop.progress.frontier import MinFrontier
from oop.progress.measures import SourceOffsets, StreamVolume, WindowExtentDuration
from oop.progress.watermark import HighWatermark, LowWatermark

__all__ = ["LowWatermark", "HighWatermark", "MinFrontier",
           "WindowExtentDuration", "SourceOffsets", "StreamVolume"]
