"""Reading a Flink SQL script with sqlglot: statements, positions and one-line errors.

sqlglot (>= 25) has no Flink dialect. The closest one is ``risingwave``
(Postgres syntax plus streaming DDL): it parses Flink's
``CREATE TABLE t (..., WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH
('k' = 'v', ...)`` into a ``WatermarkColumnConstraint`` and ``Properties``.
Two Flink forms need a step before parsing, done on sqlglot's own tokens (so
string literals and comments are never touched) and by replacing text with
blanks of the same length (so every line:col in an error stays that of the
user's text):

* ``TABLE t`` as an argument of the window TVFs ``TUMBLE`` / ``HOP`` /
  ``CUMULATE`` (sqlglot reads ``TABLE t, ...`` as a subquery with a comma
  join): the ``TABLE`` keyword is blanked, leaving ``TUMBLE(t, ...)``;
* ``SESSION(TABLE t PARTITION BY k, ...)``: sqlglot reads ``SESSION(`` as a
  keyword, so the call becomes ``SESSIO_(`` and ``PARTITION BY k`` the
  argument ``,PARTITIO= k`` (same lengths); :mod:`oop.sql.window` reads both;
* Flink's backtick-quoted identifiers (`` `user` ``) become double-quoted;
* a leading ``EXPLAIN`` (also ``EXPLAIN PLAN FOR`` and ``EXPLAIN ANALYZE``)
  on the query, which sqlglot would keep as an opaque command: it is blanked
  and reported in :attr:`Script.explain`.

Errors are :class:`SqlError` (an :class:`~oop.errors.OopError`) with a
``line:col`` position, printed on one line by the CLI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from oop.sql.error import SqlError

__all__ = ["SqlError", "Script", "parse_script", "DIALECT", "position"]

DIALECT = "risingwave"
_TVFS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
#: sqlglot reads ``SESSION(`` as a keyword: the call is renamed to this (same length)
SESSION_ALIAS = "SESSIO_"


@dataclass
class Script:
    """A parsed script: DDL statements, then the one query (``explain``: ``"plan"``,
    ``"analyze"`` or None)."""

    text: str
    ddl: list[exp.Expression] = field(default_factory=list)
    query: exp.Expression | None = None
    explain: str | None = None
    tokens: list[Token] = field(default_factory=list)

    def at(self, node: exp.Expression | None, keyword: str | None = None) -> str:
        """``line:col`` of ``node`` in the script (see :func:`position`)."""
        return position(self.text, self.tokens, node, keyword)

    def error(self, what: str, node: exp.Expression | None = None,
              keyword: str | None = None) -> SqlError:
        """A :class:`SqlError` ``"line:col: what"`` pointing at ``node``."""
        return SqlError(f"{self.at(node, keyword)}: {what}")


def _line_col(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"{line}:{col}"


def position(text: str, tokens: list[Token], node: exp.Expression | None,
             keyword: str | None = None) -> str:
    """``line:col`` (1-based) where ``node`` starts in ``text``.

    sqlglot records offsets on identifiers, literals and some functions; a
    node's start is the smallest offset in its subtree. With ``keyword``
    (e.g. ``"ORDER"``), the position of the last token with that text before
    the node's start (or anywhere, when the node has no recorded offset).
    """
    start: int | None = None
    if node is not None:
        starts = [n.meta["start"] for n in node.walk() if n.meta and "start" in n.meta]
        start = min(starts) if starts else None
    if keyword is not None:
        kw = [t.start for t in tokens if t.text.upper().split()[:1] == [keyword.upper()]
              and (start is None or t.start <= start)]
        if kw:
            start = kw[-1] if start is not None else kw[0]
    return _line_col(text, start) if start is not None else "1:1"


def _blank(chars: list[str], tok: Token) -> None:
    for i in range(tok.start, tok.end + 1):
        if chars[i] != "\n":
            chars[i] = " "


def _quoted_spans(text: str) -> Iterator[tuple[str, int, int | None]]:
    """``(quote, open offset, close offset or None when never closed)`` of each quoted span
    of ``text`` (``'``, ``"`` or backtick) outside ``--`` comments; a doubled quote inside a
    span is an escaped one. O(len(text))."""
    i, n, quote, start = 0, len(text), None, 0
    while i < n:
        c = text[i]
        if quote is None:
            if text.startswith("--", i):
                j = text.find("\n", i)
                i = n if j < 0 else j
            elif c in ("'", '"', "`"):
                quote, start = c, i
        elif c == quote:
            if text.startswith(quote * 2, i):
                i += 1  # an escaped quote
            else:
                yield quote, start, i
                quote = None
        i += 1
    if quote is not None:
        yield quote, start, None


def _open_quote(text: str) -> int | None:
    """Offset of a quote that is never closed (outside comments), else None."""
    return next((start for _, start, end in _quoted_spans(text) if end is None), None)


def _backticks(text: str) -> str:
    """Flink quotes identifiers with backticks; the dialect with double quotes: swap them
    (outside string literals and comments; same length, so positions hold)."""
    out = list(text)
    for quote, start, end in _quoted_spans(text):
        if quote == "`":
            for i in (start, end):
                if i is not None:
                    out[i] = '"'
    return "".join(out)


def _tokens(text: str) -> list[Token]:
    try:
        return sqlglot.Dialect.get_or_raise(DIALECT).tokenize(text)
    except TokenError:
        at = _open_quote(text)
        if at is not None:
            raise SqlError(f"{_line_col(text, at)}: this quote is never closed") from None
        raise SqlError("1:1: cannot split the SQL text into tokens") from None


def _prepare(text: str) -> tuple[str, list[Token], str | None]:
    """Blank a leading ``EXPLAIN`` and ``TABLE`` inside window TVF calls (module doc)."""
    text = _backticks(text)
    tokens = _tokens(text)
    chars = list(text)
    # the last statement: tokens after the last ';' that is followed by something. sqlglot
    # reads everything after EXPLAIN as one opaque command token, so blank it first and
    # tokenize again.
    semis = [i for i, t in enumerate(tokens) if t.token_type == TokenType.SEMICOLON
             and i + 1 < len(tokens)]
    first = semis[-1] + 1 if semis else 0
    explain = None
    if first < len(tokens) and tokens[first].text.upper() == "EXPLAIN":
        explain = "plan"
        _blank(chars, tokens[first])
        rest = _tokens("".join(chars)[tokens[first].end + 1:])
        words = [t.text.upper() for t in rest[:2]]
        skip = 1 if words[:1] == ["ANALYZE"] else 2 if words == ["PLAN", "FOR"] else 0
        if words[:1] == ["ANALYZE"]:
            explain = "analyze"
        base = tokens[first].end + 1
        for t in rest[:skip]:
            for i in range(base + t.start, base + t.end + 1):
                chars[i] = " "
        tokens = _tokens("".join(chars))
    for i, t in enumerate(tokens):
        if t.text.upper() in _TVFS and i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
            session = t.text.upper() == "SESSION"
            if session:
                chars[t.start:t.end + 1] = SESSION_ALIAS
            depth = 0
            for j in range(i + 1, len(tokens)):
                tt = tokens[j].token_type
                if tt == TokenType.L_PAREN:
                    depth += 1
                elif tt == TokenType.R_PAREN:
                    depth -= 1
                    if depth == 0:
                        break
                elif (depth == 1 and tokens[j].text.upper() == "TABLE"
                      and tokens[j - 1].token_type in (TokenType.L_PAREN, TokenType.COMMA)):
                    _blank(chars, tokens[j])
                elif session and depth == 1 and " ".join(
                        tokens[j].text.upper().split()) == "PARTITION BY":
                    # TABLE t PARTITION BY k -> t ,PARTITIO=  k (an argument, same length)
                    n = tokens[j].end + 1 - tokens[j].start
                    chars[tokens[j].start:tokens[j].end + 1] = ",PARTITIO=".ljust(n)
    return "".join(chars), tokens, explain


def parse_script(text: str) -> Script:
    """Parse ``text``: DDL statements (CREATE TABLE / CREATE VIEW) then exactly one query.

    The query is a ``SELECT`` (with ``UNION ALL``) or ``INSERT INTO sink SELECT``,
    optionally preceded by ``EXPLAIN``. Raises :class:`SqlError`.
    """
    if not isinstance(text, str) or not text.strip():
        raise SqlError("1:1: the SQL text is empty; give DDL statements and one query")
    prepared, tokens, explain = _prepare(text)
    script = Script(text, tokens=tokens, explain=explain)
    try:
        stmts = [s for s in sqlglot.parse(prepared, read=DIALECT) if s is not None]
    except ParseError as e:
        err: dict[str, Any] = e.errors[0] if e.errors else {}
        line, col = err.get("line"), err.get("col")
        hl = err.get("highlight") or ""
        if line is not None and col is not None:
            col = max(1, int(col) - len(hl) + 1)
            desc = str(err.get("description", e)).split("<Token")[0].strip().rstrip(".")
            if desc.endswith(" but got"):
                desc = desc[: -len(" but got")]
            if desc.startswith("Required keyword"):
                desc = "the clause is incomplete"
            if desc.startswith("Invalid expression / Unexpected token"):
                desc = "unexpected token"
            near = f" near {hl!r}" if hl else ""
            raise SqlError(f"{line}:{col}: syntax error{near}: {desc}") from None
        raise SqlError(f"syntax error: {str(e).splitlines()[0]}") from None
    if not stmts:
        raise SqlError("1:1: the SQL text holds no statement; give one query")
    for s in stmts[:-1]:
        if not isinstance(s, exp.Create):
            raise script.error(f"only CREATE TABLE / CREATE VIEW statements may precede the "
                               f"query; found a second query ({_kind(s)})", s)
    last = stmts[-1]
    if isinstance(last, exp.Create):
        raise script.error("the script has no query: end it with one SELECT or "
                           "INSERT INTO ... SELECT", last)
    if isinstance(last, exp.Command):
        raise script.error(f"unsupported statement {last.name.upper()!r}; the query must be "
                           "a SELECT or INSERT INTO ... SELECT", last, last.name)
    script.ddl, script.query = stmts[:-1], last
    return script


def _kind(s: exp.Expression) -> str:
    return type(s).__name__.upper()
