"""Keep the thread-state sampler alive: it must see a busy thread as runnable and an idle
one as not (no timing is asserted; experiments/thread_states.py reports the shape)."""

import importlib.util
import re
import sys
from pathlib import Path


def _tool():
    path = Path(__file__).resolve().parents[1] / "experiments" / "thread_states.py"
    spec = importlib.util.spec_from_file_location("thread_states", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# the main thread spins for 0.6 s of wall time while a second thread sleeps all along
_BUSY_AND_IDLE = """
import threading, time
threading.Thread(target=time.sleep, args=(1.0,), name="idle", daemon=True).start()
t = time.perf_counter()
while time.perf_counter() - t < 0.6:
    pass
"""


def test_a_spinning_thread_is_runnable_and_a_sleeping_one_is_not(capsys):
    assert _tool().main(["--", sys.executable, "-c", _BUSY_AND_IDLE]) == 0
    out = capsys.readouterr().out
    shares = [float(s) for s in re.findall(r"^  \S+ +([0-9.]+)$", out, re.M)]
    assert len(shares) == 2, out  # the spinning main thread and the sleeping one
    assert max(shares) > 0.5 and min(shares) < 0.2, out
    assert re.search(r"^\d+ samples over [0-9.]+ s$", out, re.M), out


def test_no_command_is_a_usage_error():
    import pytest

    with pytest.raises(SystemExit) as e:
        _tool().main([])
    assert e.value.code == 2
