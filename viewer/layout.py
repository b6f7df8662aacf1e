"""The capture folder layout: the one owner of its file names (docs/FORMATS.md §2).

A capture folder is what our recording proxy + capture job write and what the capture
reader opens. Every other module (readers, Hub fetch, upload intake, the drift CLI, the
capture job, the app's sample list) takes the names from here, so a new file is added once
(tests/test_layering.py fails on a name typed out elsewhere). It sits at the top of
``viewer`` with no imports of ours: ``sources/``, ``tokenizer/`` and ``capture/`` all read it,
and none of them may depend on another through it (no package cycle).
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["TRACE_NAMES", "TURNS_NAMES", "RECORD_NAMES", "SIDE_NAMES", "CAPTURE_FILES", "ARTEFACTS",
           "TOKENIZER_DIR", "TRACE", "TURNS", "TASK", "VISIBLE_TESTS", "HELD_OUT_TESTS", "SUMMARY", "PROXY_TRACE",
           "AGENT_LOG", "JOB_SPEC", "JOB_BUNDLE", "NOTES", "DECK", "is_capture_dir"]

# Per-call records, first match wins in a folder: the seed layout first, then raw proxy logs.
TRACE = "trace.json"  # what a capture writes (the first of each list below)
TURNS = "turns.json"
TRACE_NAMES = (TRACE, "trace.jsonl", "proxy_trace.jsonl", "proxy_trace.json")
# Per-turn ids + masks (the trainer's view of each call).
TURNS_NAMES = (TURNS, "turns.jsonl")
# Any of these makes a folder (or an upload, or a Hub folder) a capture.
RECORD_NAMES = TRACE_NAMES + TURNS_NAMES

TASK = "task.json"
VISIBLE_TESTS = "visible_tests.txt"
HELD_OUT_TESTS = "held_out_tests.json"
SUMMARY = "summary.json"
SIDE_NAMES = (TASK, VISIBLE_TESTS, HELD_OUT_TESTS, SUMMARY)
# What a reader of a capture opens (and the Hub fetch downloads, by name).
CAPTURE_FILES = RECORD_NAMES + SIDE_NAMES

PROXY_TRACE = "proxy_trace.jsonl"  # raw proxy records, appended live during a capture
AGENT_LOG = "agent_log.jsonl"  # opencode's own event log
TOKENIZER_DIR = "tokenizer"  # the tokenizer files a capture ships (sha256s in summary.json)
# What a capture job writes into its output folder.
ARTEFACTS = (TRACE, TURNS, TASK, VISIBLE_TESTS, HELD_OUT_TESTS, SUMMARY, PROXY_TRACE, AGENT_LOG)

# An hf-jobs capture's own files, uploaded with the job (viewer/capture/hf_jobs.py): the capture
# as data (every visitor value is in here, never on the job's argument list) and the package zip.
JOB_SPEC = "job_spec.json"
JOB_BUNDLE = "viewer_bundle.zip"

# Talk files (docs/TALK.md): a local capture's token-anchored notes sit beside its records; a deck
# is any file inside the data root, this is the name the bundled example uses.
NOTES = "notes.json"
DECK = "deck.json"


def is_capture_dir(path: Path) -> bool:
    """A folder holding at least one per-call or per-turn file."""
    p = Path(path)
    return p.is_dir() and any((p / name).is_file() for name in RECORD_NAMES)
