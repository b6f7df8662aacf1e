"""The search box's language (docs/SEARCH.md), parsed into terms and compiled to parameterised SQL.

A visitor's text never becomes SQL: the parser accepts only the fields listed here, and every value it reads
is bound as a parameter (``$p0``, ``$p1``, …) of SQL written in this module. Terms, ``AND`` (or nothing),
``OR``, ``NOT`` / ``-``, parentheses. Each term has a level: ``rollout`` (reward, model…), ``turn`` (tools,
causes, text…) or ``token`` (a logprob, a token sequence); a query is answered at the finest level it names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .columns import SEP

__all__ = ["QueryError", "Term", "parse", "compile_query", "Compiled", "FIELDS", "NUMBERS", "MAX_QUERY_CHARS",
           "MAX_TERMS", "MAX_REGEX_CHARS"]

MAX_QUERY_CHARS = 2000
MAX_TERMS = 32
MAX_REGEX_CHARS = 200
MAX_SEQUENCE = 32  # tokens in an ids: / tokens: sequence


class QueryError(Exception):
    """The query cannot be run; ``at``: where in the text (a character offset), when one place is to blame."""

    def __init__(self, message: str, at: int | None = None):
        super().__init__(message)
        self.message, self.at = message, at


# field: (level, SQL over the joined tables, how the value matches)
FIELDS: dict[str, tuple[str, str, str]] = {
    "tool": ("turn", "t.tools", "list"), "cause": ("turn", "t.causes", "list"), "lint": ("turn", "t.lint", "list"),
    "finish": ("turn", "t.finish", "eq"), "model": ("rollout", "r.model", "sub"), "agent": ("rollout", "r.agent", "sub"),
    "task": ("rollout", "r.task", "sub"), "group": ("rollout", "r.grp", "eq"), "source": ("rollout", "r.label", "sub"),
    "format": ("rollout", "r.format", "eq"), "ids": ("token", "t.ids", "ids"), "tokens": ("token", "t.pieces", "pieces"),
}
# number: (level, SQL that is true when some token / the turn / the rollout satisfies ``op value``)
NUMBERS: dict[str, tuple[str, str | tuple[str, str]]] = {
    "reward": ("rollout", "r.reward"), "turns": ("rollout", "r.turns"), "tokens": ("rollout", "r.tokens"),
    "lost": ("rollout", "r.lost"), "step": ("rollout", "r.step"), "drift": ("turn", "t.drifted::INT"),
    "nan": ("turn", "t.nan_lps"), "zero": ("turn", "t.zero_lps"), "placeholder": ("turn", "t.placeholder_lps"),
    # a token below / above: the turn's lowest / highest value says whether one exists
    "logprob": ("token", ("t.min_lp", "t.max_lp")), "delta": ("token", ("t.max_delta", "t.max_delta")),
    "ratio": ("token", ("t.min_ratio", "t.max_ratio")),
}
_LEVELS = {"rollout": 0, "turn": 1, "token": 2}
_OPS = ("<=", ">=", "!=", "<", ">", "=")
_NUM = re.compile(r"^([a-z_]+)(<=|>=|!=|<|>|=)(-?(?:\d+\.?\d*|\.\d+)(?:e-?\d+)?)$", re.I)
_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "/": "/"}


@dataclass(frozen=True)
class Term:
    kind: str  # a FIELDS / NUMBERS name, "text" or "regex"
    value: Any
    op: str = ":"
    at: int = 0

    @property
    def level(self) -> str:
        if self.kind in ("text", "regex"):
            return "turn"
        return (NUMBERS[self.kind] if self.op != ":" else FIELDS[self.kind])[0]


def _quoted(q: str, i: int) -> tuple[str, int]:
    """The string quoted at ``q[i]`` (``"``, with backslash escapes) and the index after it."""
    out, j = [], i + 1
    while j < len(q):
        c = q[j]
        if c == "\\" and j + 1 < len(q):
            out.append(_ESC.get(q[j + 1], "\\" + q[j + 1]))
            j += 2
            continue
        if c == '"':
            return "".join(out), j + 1
        out.append(c)
        j += 1
    raise QueryError("a quote is not closed", i)


def _lex(q: str) -> list[tuple[str, Any, int]]:
    """(kind, value, offset): ``(``, ``)``, ``str`` (quoted), ``re`` (/…/), ``word``, ``field`` (name, [values])."""
    out: list[tuple[str, Any, int]] = []
    i = 0
    while i < len(q):
        c = q[i]
        if c.isspace():
            i += 1
        elif c in "()":
            out.append((c, c, i))
            i += 1
        elif c == '"':
            s, i2 = _quoted(q, i)
            out.append(("str", s, i))
            i = i2
        elif c == "/":
            j, buf = i + 1, []
            while j < len(q) and q[j] != "/":
                if q[j] == "\\" and j + 1 < len(q) and q[j + 1] == "/":
                    buf.append("/")
                    j += 2
                    continue
                buf.append(q[j])
                j += 1
            if j >= len(q):
                raise QueryError("a /regex/ is not closed", i)
            out.append(("re", "".join(buf), i))
            i = j + 1
        else:
            j = i
            while j < len(q) and not q[j].isspace() and q[j] not in "()\"":
                j += 1
            word = q[i:j]
            if word.endswith(":") and j < len(q) and q[j] == '"':  # field:"quoted"[,"quoted"…]
                vals = []
                while True:
                    s, j = _quoted(q, j)
                    vals.append(s)
                    if j + 1 < len(q) and q[j] == "," and q[j + 1] == '"':
                        j += 1
                        continue
                    break
                out.append(("field", (word[:-1].lower(), vals), i))
            else:
                out.append(("word", word, i))
            i = j
    return out


class _Parser:
    def __init__(self, q: str):
        self.toks, self.i, self.terms = _lex(q), 0, 0

    def peek(self) -> tuple[str, Any, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, Any, int]:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expr(self) -> Any:
        parts = [self.conj()]
        while (t := self.peek()) and t[0] == "word" and t[1] == "OR":
            self.take()
            parts.append(self.conj())
        return parts[0] if len(parts) == 1 else ("or", parts)

    def conj(self) -> Any:
        parts = [self.neg()]
        while (t := self.peek()) and t[0] != ")" and not (t[0] == "word" and t[1] == "OR"):
            if t[0] == "word" and t[1] == "AND":
                self.take()
            parts.append(self.neg())
        return parts[0] if len(parts) == 1 else ("and", parts)

    def neg(self) -> Any:
        t = self.peek()
        if t is None:
            raise QueryError("the query ends where a term was expected")
        if t[0] == "word" and t[1] == "NOT":
            self.take()
            return ("not", self.neg())
        if t[0] == "word" and t[1].startswith("-") and len(t[1]) > 1 and not _NUM.match(t[1]):
            self.toks[self.i] = ("word", t[1][1:], t[2] + 1)
            return ("not", self.neg())
        return self.atom()

    def atom(self) -> Any:
        kind, val, at = self.take()
        if kind == "(":
            inner = self.expr()
            if not (t := self.peek()) or t[0] != ")":
                raise QueryError("a parenthesis is not closed", at)
            self.take()
            return inner
        if kind == ")":
            raise QueryError("a closing parenthesis with no opening one", at)
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise QueryError(f"at most {MAX_TERMS} terms in a query", at)
        if kind == "str":
            return ("term", Term("text", val, at=at))
        if kind == "re":
            if len(val) > MAX_REGEX_CHARS:
                raise QueryError(f"a /regex/ of at most {MAX_REGEX_CHARS} characters", at)
            return ("term", Term("regex", val, at=at))
        if kind == "field":
            name, vals = val
            return ("term", _field(name, vals, at))
        return ("term", _word(val, at))


def _field(name: str, vals: list[str], at: int) -> Term:
    if name not in FIELDS:
        raise QueryError(f"unknown field {name!r} (fields: {', '.join(sorted(FIELDS))})", at)
    if name == "ids":
        raise QueryError('ids: takes numbers (ids:151657,198), not quoted text', at)
    if name == "tokens":
        if not vals or len(vals) > MAX_SEQUENCE or any(v == "" for v in vals):
            raise QueryError(f'tokens: takes 1 to {MAX_SEQUENCE} non-empty quoted token texts', at)
        return Term("tokens", tuple(v.replace(SEP, "\ufffd") for v in vals), at=at)
    if len(vals) != 1:
        raise QueryError(f"{name}: takes one value", at)
    return Term(name, vals[0], at=at)


def _word(w: str, at: int) -> Term:
    m = _NUM.match(w)
    if m and m.group(1).lower() in NUMBERS:
        return Term(m.group(1).lower(), float(m.group(3)), op=m.group(2), at=at)
    if m:
        raise QueryError(f"unknown number {m.group(1)!r} (numbers: {', '.join(sorted(NUMBERS))})", at)
    if ":" in w and re.match(r"^[a-z_]+:", w, re.I):
        name, value = w.split(":", 1)
        name = name.lower()
        if name == "ids":
            try:
                ids = tuple(int(x) for x in value.split(","))
            except ValueError:
                raise QueryError("ids: takes token ids separated by commas (ids:151657,198)", at) from None
            if not ids or len(ids) > MAX_SEQUENCE or min(ids) < 0:
                raise QueryError(f"ids: takes 1 to {MAX_SEQUENCE} token ids (not negative)", at)
            return Term("ids", ids, at=at)
        if not value:
            raise QueryError(f"{name}: needs a value", at)
        return _field(name, [value], at)
    if any(w.startswith(op) or w.endswith(op) for op in _OPS) or re.match(r"^[a-z_]+(<|>|=|!)", w, re.I):
        raise QueryError(f"{w!r}: a comparison is a name, an operator and a number (reward<0.5)", at)
    return Term("text", w, at=at)


def parse(q: str) -> Any:
    """The query's tree: ``("term", Term)``, ``("and"|"or", [trees])``, ``("not", tree)``; None when empty."""
    if len(q) > MAX_QUERY_CHARS:
        raise QueryError(f"a query of at most {MAX_QUERY_CHARS} characters")
    p = _Parser(q)
    if not p.toks:
        return None
    tree = p.expr()
    if (t := p.peek()) is not None:  # only a stray closing parenthesis stops the top level early
        raise QueryError("a closing parenthesis with no opening one", t[2])
    return tree


def terms(tree: Any) -> list[Term]:
    """The tree's terms, in the order they were written."""
    if tree is None:
        return []
    if tree[0] == "term":
        return [tree[1]]
    if tree[0] == "not":
        return terms(tree[1])
    return [t for sub in tree[1] for t in terms(sub)]


@dataclass
class Compiled:
    """``where``: SQL over ``r`` (rollouts) and, at the turn and token levels, ``t`` (turns); ``params`` bound
    by name; ``level``; ``rank``: (SQL of the value shown, ascending?) ranking the hits worst first; ``tok``:
    SQL of the hit's token position (or NULL); ``why``: words saying what the rank measures; ``text``: the
    first text / regex term (for the snippet)."""

    where: str
    params: dict[str, Any]
    level: str
    rank: tuple[str, bool]
    tok: str
    why: str
    text: Term | None


class _Sql:
    def __init__(self):
        self.params: dict[str, Any] = {}

    def p(self, v: Any) -> str:
        name = f"p{len(self.params)}"
        self.params[name] = v
        return "$" + name

    def tree(self, tree: Any) -> str:
        if tree[0] == "term":
            return self.term(tree[1])
        if tree[0] == "not":
            return f"(NOT coalesce({self.tree(tree[1])}, FALSE))"
        joiner = " AND " if tree[0] == "and" else " OR "
        return "(" + joiner.join(f"coalesce({self.tree(x)}, FALSE)" for x in tree[1]) + ")"

    def term(self, t: Term) -> str:
        if t.kind == "text":
            like = "%" + t.value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            return f"(t.text ILIKE {self.p(like)} ESCAPE '\\')"
        if t.kind == "regex":
            return f"regexp_matches(t.text, {self.p(t.value)})"
        if t.op != ":":
            level, col = NUMBERS[t.kind]
            if t.kind == "delta" and t.op not in (">", ">="):
                raise QueryError("delta takes > or >= (a token whose sampler and trainer differ by more)", t.at)
            if isinstance(col, tuple):  # some token below (the lowest is) / above (the highest is)
                if t.op in ("=", "!="):
                    raise QueryError(f"{t.kind} takes < <= > >= (a token below or above a value)", t.at)
                col = col[0] if t.op in ("<", "<=") else col[1]
            op = "<>" if t.op == "!=" else t.op
            return f"({col} {op} {self.p(t.value)})"
        _level, col, how = FIELDS[t.kind]
        if how == "list":
            return f"list_contains({col}, {self.p(t.value)})"
        if how == "eq":
            return f"(lower({col}) = lower({self.p(t.value)}))"
        if how == "sub":
            return f"(contains(lower({col}), lower({self.p(t.value)})))"
        joined = SEP + SEP.join(str(x) for x in t.value) + SEP
        return f"contains({col}, {self.p(joined)})"

    def position(self, t: Term) -> str:
        """SQL of the first token matching an ids: / tokens: term (NULL where the turn has none)."""
        col = "t.ids" if t.kind == "ids" else "t.pieces"
        pat = self.p(SEP + SEP.join(str(x) for x in t.value) + SEP)
        at = f"strpos({col}, {pat})"
        sep = self.p(SEP)
        return (f"(CASE WHEN {at} > 0 THEN length(left({col}, {at})) - length(replace(left({col}, {at}), {sep}, ''))"
                f" - 1 END)")


# (SQL shown, ascending, token position, words) for the first rankable term of each kind and sense
_RANKS = {
    ("logprob", "<"): ("t.min_lp", True, "t.min_at", "lowest logprob"),
    ("logprob", ">"): ("t.max_lp", False, "t.max_at", "highest logprob"),
    ("delta", ">"): ("t.max_delta", False, "t.max_delta_at", "largest |sampler − trainer|"),
    ("ratio", ">"): ("t.max_ratio", False, "t.max_ratio_at", "largest trainer/sampler ratio"),
    ("ratio", "<"): ("t.min_ratio", True, "t.min_ratio_at", "smallest trainer/sampler ratio"),
    ("reward", "<"): ("r.reward", True, "NULL", "reward"), ("reward", ">"): ("r.reward", True, "NULL", "reward"),
    ("drift", ">"): ("r.lost", False, "NULL", "tokens losing gradient"),
    ("lost", ">"): ("r.lost", False, "NULL", "tokens losing gradient"),
    ("nan", ">"): ("t.nan_lps", False, "NULL", "NaN logprobs"), ("zero", ">"): ("t.zero_lps", False, "NULL", "zero logprobs"),
    ("placeholder", ">"): ("t.placeholder_lps", False, "NULL", "placeholder logprobs"),
}


def compile_query(q: str) -> Compiled:
    """``q`` as SQL pieces with bound parameters (see :class:`Compiled`). Raises :class:`QueryError`."""
    tree = parse(q)
    ts = terms(tree)
    level = max((t.level for t in ts), key=_LEVELS.__getitem__, default="rollout")
    sql = _Sql()
    where = sql.tree(tree) if tree is not None else "TRUE"
    rank = ("t.min_lp", True, "NULL", "lowest logprob") if level != "rollout" else ("r.reward", True, "NULL", "reward")
    tok = "t.min_at" if level != "rollout" else "NULL"
    seq = next((t for t in ts if t.kind in ("ids", "tokens") and t.op == ":"), None)
    for t in ts:
        key = (t.kind, t.op[0] if t.op[0] in "<>" else "")
        if key in _RANKS:
            rank = _RANKS[key][:2] + (_RANKS[key][3],)
            tok = _RANKS[key][2] if _RANKS[key][2] != "NULL" else tok
            break
    else:
        rank = (rank[0], rank[1], rank[3])
    if seq is not None:
        tok = sql.position(seq)
        if rank[0] == "t.min_lp":
            rank = (rank[0], rank[1], "lowest logprob")
    text = next((t for t in ts if t.kind in ("text", "regex")), None)
    if text is not None and seq is None and not any((t.kind, t.op[:1]) in _RANKS or (t.kind, t.op) in _RANKS
                                                    for t in ts):
        tok = "NULL"  # a text hit is a place in the turn's text, not a token
    return Compiled(where=where, params=sql.params, level=level, rank=(rank[0], rank[1]), tok=tok, why=rank[2],
                    text=text)
