"""The search language (docs/SEARCH.md): what each query means, that a visitor's values are only ever bound
parameters (never SQL text), and that a query that cannot run says why and where."""
from __future__ import annotations

import pytest

from viewer.search import QueryError, parse
from viewer.search.syntax import Term, compile_query, terms


@pytest.mark.parametrize("q, level, kinds", [
    ("", "rollout", []),
    ("reward<0.5", "rollout", [("reward", "<", 0.5)]),
    ("model:qwen reward>=1", "rollout", [("model", ":", "qwen"), ("reward", ">=", 1.0)]),
    ("tool:bash", "turn", [("tool", ":", "bash")]),
    ('"a phrase" word', "turn", [("text", ":", "a phrase"), ("text", ":", "word")]),
    ("/def \\w+\\(/", "turn", [("regex", ":", "def \\w+\\(")]),
    ("logprob<-5 delta>0.5 ratio>2", "token", [("logprob", "<", -5.0), ("delta", ">", 0.5), ("ratio", ">", 2.0)]),
    ("ids:151657,198", "token", [("ids", ":", (151657, 198))]),
    ('tokens:"<tool_call>","\\n"', "token", [("tokens", ":", ("<tool_call>", "\n"))]),
    ("cause:special_token OR lint:RI011", "turn", [("cause", ":", "special_token"), ("lint", ":", "RI011")]),
    ("NOT tool:bash -model:x (a OR b)", "turn", [("tool", ":", "bash"), ("model", ":", "x"), ("text", ":", "a"),
                                                  ("text", ":", "b")]),
    ("logprob<=-1e-3", "token", [("logprob", "<=", -0.001)]),
])
def test_what_a_query_means(q, level, kinds):
    assert [(t.kind, t.op, t.value) for t in terms(parse(q))] == kinds
    assert compile_query(q).level == level


def test_boolean_structure():
    assert parse("a b OR c") == ("or", [("and", [("term", Term("text", "a", at=0)), ("term", Term("text", "b", at=2))]),
                                        ("term", Term("text", "c", at=7))])
    assert parse("NOT (a OR b)")[0] == "not" and parse("-a")[0] == "not"


@pytest.mark.parametrize("q", [
    "model:\"x'); DROP TABLE rollouts; --\"",
    "\"%' OR '1'='1\"",
    "/'||(SELECT 1)||'/",
    "tool:read_csv('/etc/passwd')",
    "tokens:\"'; COPY rollouts TO '/tmp/x'; --\"",
])
def test_a_visitors_values_are_parameters_never_sql(q):
    c = compile_query(q)
    sql = " ".join([c.where, c.rank[0], c.tok])
    for t in terms(parse(q)):
        for v in (t.value if isinstance(t.value, tuple) else (t.value,)):
            assert str(v) not in sql
    assert any(str(terms(parse(q))[0].value).strip("%") in str(p) or p for p in c.params.values())
    assert "'" not in c.where.replace("ESCAPE '\\'", "")  # no quoted literal but the LIKE escape character


@pytest.mark.parametrize("q, at, needle", [
    ("tool:bash nosuch:x", 10, "unknown field 'nosuch'"),
    ("bogus<3", 0, "unknown number 'bogus'"),
    ('model:"open', 6, "quote is not closed"),
    ("/open", 0, "regex/ is not closed"),
    ("a )", 2, "closing parenthesis"),
    ("delta<0.5", 0, "delta takes > or >="),
    ("logprob=3", 0, "takes < <= > >="),
    ("ids:1,x", 0, "ids: takes token ids"),
    ("NOT", None, "ends where a term was expected"),
])
def test_a_bad_query_says_what_and_where(q, at, needle):
    with pytest.raises(QueryError) as e:
        compile_query(q)
    assert needle in e.value.message and e.value.at == at


def test_the_command_line_refuses_a_bad_query_before_scanning(tmp_path, capsys):
    from viewer.cli import main

    assert main(["search", str(tmp_path / "nothing-here"), "tool:bash nosuch:x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: query: unknown field 'nosuch'") and "(at character 11)" in err
    assert main(["search", str(tmp_path / "nothing-here"), "tool:bash"]) == 2
    assert "no such file or folder" in capsys.readouterr().err
