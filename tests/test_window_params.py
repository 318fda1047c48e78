"""WindowParams: the window query's options defined once (oop/window/params.py)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from oop.errors import ConfigError
from oop.stream.late import LatePolicy
from oop.window import Sliding, Tumbling, agg
from oop.window.aggregate import WindowAggregate
from oop.window.build import one_window_operator
from oop.window.params import OPTION_NAMES, WindowOptions, WindowParams
from oop.window.plan import window_operator


def test_typed_options_are_the_fields() -> None:
    fields = [f.name for f in dataclasses.fields(WindowParams)]
    assert fields[:2] == ["kind", "aggs"]
    assert list(typing.get_type_hints(WindowOptions)) == fields[2:] == list(OPTION_NAMES)


def test_normalizes() -> None:
    p = WindowParams.of(Tumbling(10), agg.count(), by="k", late="side")
    assert p.by == ("k",) and p.late is LatePolicy.SIDE_OUTPUT and len(p.aggs) == 1
    assert p.options()["by"] == ("k",) and "layout" not in p.options(drop=("layout",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.name = "x"  # type: ignore[misc]


@pytest.mark.parametrize("options, message", [
    ({"layout": "sparse"}, "layout='sparse'"),
    ({"max_state_bytes": 0}, "max_state_bytes must be > 0"),
    ({"late": "later"}, "unknown late policy"),
    ({"bogus": 1}, "unknown window option"),
])
@pytest.mark.parametrize("entry", [WindowParams.of, WindowAggregate, one_window_operator,
                                   window_operator])
def test_every_entry_rejects_the_same(entry, options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        entry(Tumbling(10), agg.count(), name="q", **options)


def test_not_a_kind_names_the_operator() -> None:
    with pytest.raises(ConfigError, match=r"^q: 10 is not a window kind"):
        window_operator(10, agg.count(), name="q")  # type: ignore[arg-type]


def test_entries_build_the_same_operator() -> None:
    kw = dict(by=["k"], method="paned", late="update", allowed_lateness=3, emit_wid=True,
              name="w", layout="dense", time=None)
    kind, aggs = Sliding(10, 5), [agg.count(), agg.sum("v")]
    ops = [WindowAggregate(kind, aggs, **kw), one_window_operator(kind, aggs, **kw),
           window_operator(kind, aggs, **kw)]
    for op in ops:
        assert isinstance(op, WindowAggregate)
        assert op.params == ops[0].params
        assert (op.by, op.late, op.lateness_config, op.emit_wid, op.layout_config) == (
            ["k"], LatePolicy.UPDATE, 3, True, "dense")
