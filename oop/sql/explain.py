"""``EXPLAIN``: the oop plan of a query as an indented operator tree.

Each line is one operator, its inputs indented below it; a node feeding two
operators (a table used twice) is printed once and referred to after. Per
operator: what it computes, its output columns and progressing attributes,
and for

* sources -- the event-time column and unit, the **punctuation** generator
  (from the WATERMARK clause or the ``punctuation`` option) and late policy;
* window operators -- the kind, keys, aggregates, and **WID or Paned-WID and
  why**: the method when it is fixed at plan time (a tumbling or cumulative
  window is WID: each tuple is in one window -- or in a contiguous run of
  windows of different lengths -- so there are no panes to share), or the
  rule that decides it on the first batch (the cost model of 004 Eqs.
  6.1-6.4, :func:`oop.window.choose_method`). ``EXPLAIN ANALYZE`` runs the
  query and prints the choice made (``plan_info``), with each operator's
  tuples in/out, late counts and peak state; a window on key partitions
  (``--threads``) is described as the operator it splits, plus its partitions;
* joins -- keys, band, join type and residual predicate (a SplitJoin: its
  workers and ordered gathering).

After the tree, ``== threads ==`` lists the planner's decisions: which
operators run on how many threads, and why the others run on one
(:mod:`oop.sql.parallel`).
"""

from __future__ import annotations

from typing import Any

from oop.plan.executor import Node, topological

__all__ = ["explain"]


def _cols(op: Any) -> str:
    out = op.output
    if out is None:
        return ""
    times = ", ".join(f"{a} ({u})" for a, u in out.times.items())
    return f"out: {', '.join(out.schema.names)}" + (f"; event time: {times}" if times else "")


def _method(op: Any, analyzed: bool) -> str:
    from oop.window.kinds import Landmark, Sliding

    info = dict(getattr(op, "plan_info", {}) or {})
    kind = getattr(op, "kind", None) or getattr(op, "kind_config", None)
    chosen = info.get("method")
    name = {"wid": "WID", "paned": "Paned-WID"}
    if chosen and info.get("method_config") != "auto":
        return f"method: {name.get(chosen, chosen)} (method={chosen!r} was given)"
    if isinstance(kind, Landmark):
        why = "landmark windows always use panes"
        fixed = "paned"
    elif not isinstance(kind, Sliding):
        why = f"{type(kind).__name__} windows have no common pane: each tuple updates its windows"
        fixed = "wid"
    elif kind.range == kind.slide:
        why = "tumbling: each tuple is in one window, so panes would share nothing"
        fixed = "wid"
    else:
        fixed = ""
        why = ("sliding: the cost model of 004 Eqs. 6.1-6.4 (choose_method) picks on the first "
               "batch -- Paned-WID when T_slide + G*panes/slide + window-level combine < "
               "T_slide*range/slide")
    if chosen:
        costs = {k: round(v, 1) for k, v in info.items() if k.startswith("cost_")}
        layout = info.get("layout")
        extra = (f"; costs {costs}" if costs else "") + (f"; layout {layout}" if layout else "")
        return f"method: {name.get(chosen, chosen)} (auto: {why}){extra}"
    return f"method: {name.get(fixed, 'WID or Paned-WID')} (auto: {why})" + (
        "" if fixed or analyzed else "; run EXPLAIN ANALYZE to see the choice")


def _describe(op: Any, analyzed: bool) -> list[str]:
    t = type(op).__name__
    lines: list[str] = []
    if t == "Source":
        lines.append(f"time: {op.time} ({op.unit}); punctuation: {op.punctuation_config!r}; "
                     f"late: {op.late_policy.value}")
    elif t == "Select":
        lines.append(f"predicate: {op.predicate}")
    elif t == "Apply":
        lines.append("compute: " + ", ".join(f"{c} = {f}" for c, f in op.columns.items()))
    elif t == "Rename":
        lines.append("rename: " + ", ".join(f"{a} -> {b}" for a, b in op.mapping.items()))
    elif t in ("OAJoin", "SplitJoin", "KeyedJoin", "OPOBJoin", "OPIBJoin"):
        cfg = op.config
        band = cfg.extra.get("durations") if cfg.extra else None
        pred = getattr(op, "pred", None) or cfg.predicate
        lines.append(f"how: {cfg.how}; keys: {list(cfg.on)}; band: "
                     f"{pred if op.output is not None else band}; residual: {cfg.residual}")
        oa = t in ("OAJoin", "SplitJoin", "KeyedJoin")
        lines.append("state: each side's tuples until the other side's punctuation passes "
                     "their band (the b_{1-i} rule)" if oa else
                     "inputs sorted; order-preserving join")
        if t == "KeyedJoin":
            asked = getattr(op, "threads_asked", None)
            lines.append(f"threads: {op.n} key partitions (each stores, probes and purges its "
                         "keys; every punctuation to every partition); each input element's "
                         "rows leave sorted by the output columns, as SplitJoin's"
                         + (f"; the checkpoint's count ({asked} asked)" if asked else ""))
        if t == "SplitJoin":
            lines.append(f"workers: {op.workers} (round-robin state, probes on threads); each "
                         "input element's rows leave sorted by the output columns (002 ordered "
                         "gathering: the same rows in the same order for any number of workers)")
    elif t == "ThreadedWindow":  # the one-thread operator it splits, on key partitions
        lines.extend(_describe(op.template, analyzed))
        lines.append(f"threads: {op.n} key partitions (global key codes, punctuation to every "
                     "partition, rows merged into the one-thread order)")
    elif t in ("WindowAggregate", "BufferingWindow"):
        kind = getattr(op, "kind", None) or getattr(op, "kind_config", None)
        aggs = ", ".join(f"{a.name}={a.fn}({a.column or '*'}"
                         + (f", {a.q}" if a.q is not None else "") + ")" for a in op.aggs)
        on = (getattr(op, "time", None) or getattr(op, "attr", None)
              or getattr(op, "time_config", None) or "the primary time")
        lines.append(f"window: {kind!r} on {on}; by: {list(op.by)}; aggregates: {aggs}")
        if t != "BufferingWindow":
            lines.append(_method(op, analyzed))
        else:
            lines.append("in-order: materialises each extent from sorted input")
    elif t == "SortBuffer":
        spec = getattr(op, "spec", None)
        lines.append(f"sort buffer: {spec!r} (releases tuples in time order; a tuple behind "
                     "the released frontier is dropped as late)")
    elif t == "Merge":
        lines.append("order-preserving merge: waits for every input to pass a time")
    elif t == "Meld":
        lines.append("union: punctuation is the min over the inputs")
    return lines


def _safe_describe(op: Any, analyzed: bool) -> list[str]:
    """:func:`_describe`, or nothing for an operator whose attributes it does not know."""
    try:
        return _describe(op, analyzed)
    except AttributeError:
        return []


def _stats(op: Any) -> str:
    m = op.metrics
    late = sum(m.late.values())
    return (f"rows in {m.tuples_in}, out {m.tuples_out}; punctuations out {m.punctuations_out}; "
            f"late {late}; peak state {m.peak_state_items} items")


def explain(stream: Any, *, strategy: str = "oop", analyzed: bool = False,
            threads: list[str] | None = None) -> str:
    """The plan of ``stream`` as text (module doc). ``analyzed``: the operators already ran;
    ``threads``: the planner's notes on which operators run on threads, and why not
    (:mod:`oop.sql.parallel`), listed after the tree."""
    top: Node = stream.node
    if not analyzed:
        memo: dict[int, Node] = {}

        def copy(n: Node) -> Node:
            if n.id not in memo:
                memo[n.id] = Node(n.op.fresh(), [copy(p) for p in n.parents])
            return memo[n.id]

        top = copy(top)
        for n in topological([top]):
            n.op.open([p.op.output for p in n.parents])
    lines = [f"== oop plan (strategy {strategy}){' -- analyzed' if analyzed else ''} =="]
    shown: dict[int, str] = {}

    def walk(n: Node, depth: int) -> None:
        pad = "  " * depth
        label = f"{n.op.name} [{type(n.op).__name__}]"
        if n.id in shown:
            lines.append(f"{pad}{'<- ' if depth else ''}{label} (shared, shown above)")
            return
        shown[n.id] = label
        lines.append(f"{pad}{'<- ' if depth else ''}{label}")
        for d in _safe_describe(n.op, analyzed) + [_cols(n.op)] + (
                [_stats(n.op)] if analyzed else []):
            if d:
                lines.append(f"{pad}     {d}")
        for p in n.parents:
            walk(p, depth + 1)

    walk(top, 0)
    if threads:
        lines.append("== threads ==")
        lines.extend(threads)
    return "\n".join(lines)
