"""The progress core (STYLE §5): low/high-watermarks, per-group tracking, min-combination, measures.

* :class:`LowWatermark` / :class:`HighWatermark` -- one stream, one attribute;
* :class:`GroupWatermarks` -- the same per group (group-wise punctuation);
* :class:`MinFrontier` -- the Meld rule for linear punctuation (min over inputs);
* :class:`JointFrontier` -- the Meld rule for joint punctuation (component-wise min);
* :class:`WindowExtentDuration`, :class:`SourceOffsets`, :class:`StreamVolume` --
  the stream measures AdaptWID uses (004 §6.3.1, ``measures.py``).
"""

from oop.progress.frontier import JointFrontier, MinFrontier
from oop.progress.groups import GroupWatermarks
from oop.progress.measures import SourceOffsets, StreamVolume, WindowExtentDuration
from oop.progress.watermark import HighWatermark, LowWatermark

__all__ = ["LowWatermark", "HighWatermark", "GroupWatermarks", "MinFrontier", "JointFrontier",
           "WindowExtentDuration", "SourceOffsets", "StreamVolume"]
