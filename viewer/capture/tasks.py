"""Tasks in the seed's shape: instruction, visible example tests, held-out tests (stdin/stdout).

* Bundled tasks (``viewer/capture/tasks/bundled.json``): small stdin/stdout problems with
  a reference solution, used offline and by the scripted expert.
* DeepCoder ``primeintellect`` tasks (``agentica-org/DeepCoder-Preview-Dataset``), only
  when online, with the seed's ``build_dataset(n_prompts, seed)`` semantics (docs/FORMATS.md
  §2.1): shuffle the train split with ``random.Random(seed)``, keep problems with >= 3
  stdin/stdout tests, first ``n_prompts`` of them; a problem's examples are its first
  tests and its held-out tests are up to 12 tests; ``task_id`` = sha1(instruction).
"""
from __future__ import annotations

import hashlib
import json
import shlex
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

__all__ = ["Task", "bundled_tasks", "bundled_task", "custom_task", "build_dataset", "instruction_for",
           "scripted_steps", "DEEPCODER"]

BUNDLED = Path(__file__).parent / "tasks" / "bundled.json"
DEEPCODER = ("agentica-org/DeepCoder-Preview-Dataset", "primeintellect")
MAX_HELD_OUT = 12
N_VISIBLE = 2


@dataclass
class Task:
    task_id: str
    instruction: str
    visible_tests: list[dict[str, str]] = field(default_factory=list)
    held_out_tests: list[dict[str, str]] = field(default_factory=list)
    name: str = ""
    source: str = "bundled"  # bundled | deepcoder | custom
    task_index: int | None = None
    n_prompts: int | None = None
    seed: int | None = None
    solution: str | None = None  # reference solution (bundled tasks; the scripted expert writes it)

    def task_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("visible_tests")
        d.pop("held_out_tests")
        d.pop("solution")
        d["dataset"] = f"{DEEPCODER[0]}:{DEEPCODER[1]}" if self.source == "deepcoder" else None
        return d

    def visible_text(self) -> str:
        parts = []
        for i, t in enumerate(self.visible_tests, 1):
            parts.append(f"Example {i}\nInput:\n{t['input']}\nOutput:\n{t['output']}")
        return "\n".join(parts)


def instruction_for(problem: str, examples: list[dict[str, str]]) -> str:
    ex = "\n".join(f"Example {i} input:\n{t['input']}Expected output:\n{t['output']}" for i, t in enumerate(examples, 1))
    return (f"{problem.strip()}\n\n{ex}\n"
            "Write the program as solution.py in the current directory (read stdin, write stdout). "
            "Test it against the example cases with bash, and if an example fails, fix solution.py with edit.")


def bundled_tasks() -> list[Task]:
    rows = json.loads(BUNDLED.read_text(encoding="utf-8"))
    out = []
    for i, r in enumerate(rows):
        out.append(Task(task_id=r["task_id"], instruction=instruction_for(r["problem"], r["examples"]),
                        visible_tests=r["examples"], held_out_tests=r["held_out"], name=r["name"], source="bundled",
                        task_index=i, solution=r.get("solution")))
    return out


def bundled_task(index: int) -> Task:
    tasks = bundled_tasks()
    if not 0 <= index < len(tasks):
        raise ValueError(f"--task-index {index} out of range: {len(tasks)} bundled tasks (0..{len(tasks) - 1})")
    return tasks[index]


def custom_task(instruction: str, held_out: list[dict[str, str]] | None = None) -> Task:
    if not instruction.strip():
        raise ValueError("the instruction is empty")
    tid = "custom/" + hashlib.sha1(instruction.encode()).hexdigest()[:12]
    return Task(task_id=tid, instruction=instruction, held_out_tests=held_out or [], source="custom", name="custom")


def _stdin_tests(row: dict[str, Any]) -> list[dict[str, str]]:
    raw = row.get("tests")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return []
    if isinstance(raw, dict) and isinstance(raw.get("inputs"), list):
        raw = [{"input": a, "output": b} for a, b in zip(raw["inputs"], raw.get("outputs") or [])]
    out = []
    for t in raw if isinstance(raw, list) else []:
        if not isinstance(t, dict):
            continue
        if t.get("type", "stdin_stdout") not in ("stdin_stdout", "stdin"):
            continue
        if isinstance(t.get("input"), str) and isinstance(t.get("output"), str):
            out.append({"input": t["input"], "output": t["output"]})
    return out


def build_dataset(n_prompts: int, seed: int, rows: Iterable[dict[str, Any]] | None = None) -> list[Task]:
    """The seed's task list. ``rows`` defaults to the DeepCoder primeintellect train split (online)."""
    if rows is None:
        from datasets import load_dataset  # online only; offline raises

        rows = load_dataset(DEEPCODER[0], DEEPCODER[1], split="train")
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    out: list[Task] = []
    for row in rows:
        tests = _stdin_tests(row)
        if len(tests) < 3:
            continue
        problem = str(row.get("problem") or row.get("question") or "")
        examples = tests[:N_VISIBLE]
        instruction = instruction_for(problem, examples)
        out.append(Task(task_id=hashlib.sha1(instruction.encode()).hexdigest(), instruction=instruction,
                        visible_tests=examples, held_out_tests=tests[:MAX_HELD_OUT], name=problem[:60],
                        source="deepcoder", task_index=len(out), n_prompts=n_prompts, seed=seed))
        if len(out) >= n_prompts:
            break
    return out


def deepcoder_task(index: int, n_prompts: int, seed: int, rows: Iterable[dict[str, Any]] | None = None) -> Task:
    tasks = build_dataset(n_prompts, seed, rows)
    if not 0 <= index < len(tasks):
        raise ValueError(f"--task-index {index} out of range: build_dataset({n_prompts}, {seed}) has {len(tasks)} tasks")
    return tasks[index]


def _tool_call(name: str, args: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def scripted_steps(task: Task, workdir: Path, commands: list[str] | None = None) -> list[str]:
    """The scripted expert's outputs: run ``commands`` (bash), write the reference solution,
    run example 1, answer."""
    if not task.solution:
        raise ValueError(f"task {task.task_id} has no reference solution: scripted mode needs a bundled task")
    path = str(Path(workdir) / "solution.py")
    ex = task.visible_tests[0] if task.visible_tests else {"input": "", "output": ""}
    # %s and shell quoting: the example's input reaches stdin byte for byte, quotes and % included
    cmd = f"printf %s {shlex.quote(ex['input'])} | python3 solution.py"
    return [
        *(_tool_call("bash", {"command": c}) for c in (commands or [])),
        _tool_call("write", {"content": task.solution, "filePath": path}),
        _tool_call("bash", {"command": cmd}),
        f"solution.py is written and prints {ex['output'].strip()} on example 1, as expected.",
    ]
