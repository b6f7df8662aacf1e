"""Architecture rules that keep the core usable without a UI."""
import ast
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def core_modules():
    for p in sorted((REPO / "viewer").rglob("*.py")):
        rel = p.relative_to(REPO).with_suffix("")
        if "ui" in rel.parts or p.name == "__main__.py":
            continue
        yield ".".join(rel.parts).removesuffix(".__init__")


def test_core_never_imports_gradio():
    mods = list(core_modules())
    assert "viewer.rollout" in mods and "viewer.drift" in mods
    code = ("import importlib, sys\n"
            f"for m in {mods!r}: importlib.import_module(m)\n"
            "bad = sorted(k for k in sys.modules if k == 'gradio' or k.startswith('gradio.'))\n"
            "print('GRADIO' if bad else 'CLEAN')")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("CLEAN")



# An HTML element as markup: ``<b>``, ``</div>``, ``<span class=...>`` (a whole tag with attributes
# as ``name=``, so ``a<b and c>d`` in code or ``<tool_call>`` in a label is not one).
_TAG = re.compile(r"</?(?:a|b|i|p|br|hr|em|strong|code|pre|div|span|table|thead|tbody|tr|td|th|ul|ol|li|"
                  r"h[1-6]|img|svg|script|style|iframe|details|summary|button|input|label|select|option|"
                  r"section|small|sup|sub|kbd|mark)(?:\s[^<>]*=[^<>]*)?/?>", re.I)


def markup_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string in ``source`` that holds an HTML tag: constants and whole
    f-strings (their ``{...}`` parts read as ``{}``); docstrings and comments do not count."""
    tree = ast.parse(source)
    docstrings = {id(n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    in_fstring = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in ast.walk(n)}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in n.values)
        elif (isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
              and id(n) not in in_fstring):
            text = n.value
        else:
            continue
        if _TAG.search(text):
            found.append((n.lineno, text))
    return found


def test_markup_finder_sees_tags_in_strings_not_in_docstrings():
    src = ('"""A <div> in a docstring."""\n# <span> in a comment\n'
           'x = "a<b and c>d"\nlabel = "Spell <tool_call> as plain pieces"\n'
           'y = f\'<span class="k {cls}">{esc(v)}</span>\'\nz = ("<div class=\'n\'>" "text</div>")\n')
    assert [line for line, _ in markup_strings(src)] == [5, 6]


def test_html_is_built_only_in_render():
    """Markup strings live in the viewer/render/ package (and the UI's static assets), nowhere
    else: not in the core, and not in viewer/ui/ (which passes render's strings to gr.HTML)."""
    offenders = []
    for p in (REPO / "viewer").rglob("*.py"):
        rel = p.relative_to(REPO)
        parts = rel.parts
        if parts[:2] == ("viewer", "render"):
            continue
        text = p.read_text()
        if "ui" not in parts:  # the core: no markup at all (plots' hover templates are Plotly's, not HTML)
            offenders += [f"{rel}: {tag}" for tag in ("<div", "<span", "<table", "<pre") if tag in text]
        else:
            offenders += [f"{rel}:{line}: {s[:60]!r}" for line, s in markup_strings(text)]
    assert offenders == []


def _docstrings(tree) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def capture_name_literals(source: str, names: set[str], folder: str) -> list[tuple[int, str]]:
    """(line, text) of each string constant in ``source`` that is a capture file name (or a path
    starting with one), and of the tokenizer folder's name where it is joined into a path
    (``x / "tokenizer"``; the bare word is also a summary key and an argument name). Docstrings
    and comments do not count: they may name the files."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    joined = {id(side) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
              for side in (n.left, n.right)}
    hits = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Constant) and isinstance(n.value, str)) or id(n) in docs:
            continue
        v = n.value
        if v in names or any(v.startswith(f"{name}/") for name in names | {folder}) \
                or (v == folder and id(n) in joined):
            hits.append((n.lineno, n.col_offset, v))
    return [(line, v) for line, _, v in sorted(hits)]


def _layout_names() -> tuple[set[str], str]:
    from viewer import layout

    names = set()
    for k, v in vars(layout).items():
        if k.isupper() and isinstance(v, str):
            names.add(v)
        elif k.isupper() and isinstance(v, tuple):
            names.update(v)
    return names - {layout.TOKENIZER_DIR}, layout.TOKENIZER_DIR


def test_capture_file_names_are_written_only_in_layout():
    """viewer/layout.py is the one owner of a capture folder's file names (issue 20): a reader, the
    capture job, the Hub fetch or a screen that typed "trace.json" itself would drift from it."""
    names, folder = _layout_names()
    assert {"trace.json", "summary.json", "task.json", "job_spec.json"} <= names and folder == "tokenizer"
    offenders = []
    for p in sorted((REPO / "viewer").rglob("*.py")):
        rel = p.relative_to(REPO).as_posix()
        if rel == "viewer/layout.py":
            continue
        offenders += [f"{rel}:{line}: {text!r}" for line, text in capture_name_literals(p.read_text(), names, folder)]
    assert offenders == []


def test_capture_name_finder_sees_literals_not_docs():
    src = ('"""reads trace.json"""\nimport x\n# summary.json\n'
           'def f(d):\n    """the tokenizer/ folder"""\n    k = {"tokenizer": 1}\n'
           '    return d / "summary.json", d / "tokenizer", "tokenizer/vocab.json", f"{d}/x"\n')
    assert capture_name_literals(src, {"summary.json"}, "tokenizer") == [
        (7, "summary.json"), (7, "tokenizer"), (7, "tokenizer/vocab.json")]


def _import_graph() -> dict[str, set[str]]:
    """module -> viewer modules it imports (anywhere in the file, lazy imports included).
    ``from pkg import sub`` is an edge to ``pkg.sub`` only: importing a submodule runs its
    package's ``__init__``, which is a parent, not a dependency cycle."""
    import ast

    files = {}
    for p in (REPO / "viewer").rglob("*.py"):
        parts = p.relative_to(REPO).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, p in files.items():
        pkg = mod if p.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in files]
                graph[mod].update(subs)
                if target in files and len(subs) < len(node.names):
                    graph[mod].add(target)
            elif isinstance(node, ast.Import):
                graph[mod].update(a.name for a in node.names if a.name in files)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    cycles, state = [], {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                cycles.append(" -> ".join(path[path.index(n):] + [n]))
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_no_import_cycles():
    graph = _import_graph()
    assert graph["viewer.cli.drift"] and "viewer.tokenizer.choice" in graph  # the walk found the modules
    assert _cycles(graph) == []



def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded to ``viewer.X`` units: a package (``viewer.sources``, ``viewer.tokenizer``)
    or a top-level module (``viewer.visitor``). Two packages that need each other cannot be
    understood, tested or moved one without the other, even when no two modules form a cycle."""
    def unit(m: str) -> str:
        return ".".join(m.split(".")[:2])

    out: dict[str, set[str]] = {}
    for m, targets in graph.items():
        out.setdefault(unit(m), set()).update(unit(n) for n in targets if unit(n) != unit(m))
    return out


def test_no_package_cycles():
    """No viewer.X package imports another that imports it back (issue 20: tokenizer/choice.py read
    sources/layout.py while sources/derive.py used the tokenizer; the visitor's capture checks
    imported capture/ while capture/ imported the visitor)."""
    pkgs = package_graph(_import_graph())
    assert {"viewer.sources", "viewer.tokenizer", "viewer.capture", "viewer.layout"} <= set(pkgs)
    assert _cycles(pkgs) == []


def test_package_graph_folds_modules():
    g = {"viewer.a.x": {"viewer.b.y"}, "viewer.b.y": {"viewer.c"}, "viewer.c": {"viewer.a.z"}, "viewer.a.z": set(),
         "viewer.b": {"viewer.b.y"}}
    assert _cycles(g) == []  # no module cycle ...
    assert _cycles(package_graph(g)) == ["viewer.a -> viewer.b -> viewer.c -> viewer.a"]  # ... but a package one

def test_cycle_finder_reports_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a -> b -> c -> a"]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_over_400_lines():
    """Small modules (issue 12): a module a maintainer can hold in their head."""
    big = {str(p.relative_to(REPO)): n for p in (REPO / "viewer").rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 400}
    assert big == {}


def test_the_ui_never_imports_a_command_line_module():
    """The command line is one package, ``viewer.cli``, a front end like the UI: what both need lives
    in the library (the scan panel once imported scan_table from drift_cli), and nothing but
    ``python -m viewer`` imports it."""
    graph = _import_graph()
    cli = {m for m in graph if m == "viewer.cli" or m.startswith("viewer.cli.")}
    assert {"viewer.cli", "viewer.cli.drift", "viewer.cli.summary", "viewer.cli.common"} <= cli
    bad = sorted(f"{m} -> {n}" for m in graph if m not in cli and m != "viewer.__main__" for n in graph[m] if n in cli)
    assert bad == []
    # no command-line module outside the package (the old viewer/drift_cli.py, viewer/capture/cli.py, ...)
    assert sorted(m for m in graph if (m.endswith("_cli") or m.endswith(".cli")) and m != "viewer.cli") == []


# Broad handlers that may stay silent, each with its reason (issue 20: none is needed today; a new
# entry is "path::function": "why nothing can be said or raised there").
_SILENT_BROAD_EXCEPT_OK: dict[str, str] = {}


def silent_broad_handlers(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of each ``except Exception`` / ``except BaseException`` / bare
    ``except:`` (alone or in a tuple) that neither raises nor uses the error it caught: the error
    is swallowed without a word. Using it (``f"... {e}"`` into a Problem, a log line, a message,
    a result field) counts as reporting it."""
    def broad(h: ast.ExceptHandler) -> bool:
        kinds = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        return h.type is None or any(isinstance(k, ast.Name) and k.id in ("Exception", "BaseException")
                                     for k in kinds)

    out = []

    def walk(node, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.ExceptHandler) and broad(child):
                inner = [n for b in child.body for n in ast.walk(b)]
                raises = any(isinstance(n, ast.Raise) for n in inner)
                used = child.name is not None and any(isinstance(n, ast.Name) and n.id == child.name for n in inner)
                if not (raises or used):
                    out.append((child.lineno, func))
            walk(child, name)

    walk(ast.parse(source), "<module>")
    return out


def test_no_broad_except_swallows_silently():
    """A broad handler re-raises, or says what it caught (a Problem, a log line, a message), or is
    listed above with its reason: an error swallowed in silence is a wrong answer nobody can explain."""
    offenders = []
    for p in sorted((REPO / "viewer").rglob("*.py")):
        rel = p.relative_to(REPO).as_posix()
        for line, func in silent_broad_handlers(p.read_text()):
            if f"{rel}::{func}" not in _SILENT_BROAD_EXCEPT_OK:
                offenders.append(f"{rel}:{line} ({func})")
    assert offenders == []
    stale = [k for k in _SILENT_BROAD_EXCEPT_OK if not (REPO / k.split("::")[0]).exists()]
    assert stale == []


def test_silent_handler_finder():
    src = ("def a():\n    try:\n        f()\n    except Exception:\n        pass\n"
           "def b():\n    try:\n        f()\n    except Exception as e:\n        log(e)\n"
           "def c():\n    try:\n        f()\n    except:\n        raise\n"
           "def d():\n    try:\n        f()\n    except (ValueError, BaseException) as e:\n        return None\n"
           "def e():\n    try:\n        f()\n    except ValueError:\n        pass\n")
    assert silent_broad_handlers(src) == [(4, "a"), (19, "d")]
