"""Rollout Inspector as a library: read an agent's RL rollout and see it as the trainer does.

The operations of ``python -m viewer`` (and of the app's tabs) as functions: open a source, check
every turn for retokenisation drift, build the rows TRL trains on, compare two rollouts, rescore,
lint, certify a chat template, export one offline HTML file. The names below are the public API
(``__all__``); the modules under them may change. docs/API.md walks through it with a worked example.

Importing ``viewer`` loads nothing else: each name is imported from its module on first use (PEP 562), so
``import viewer`` (which every ``import viewer.x`` runs) never loads gradio, transformers or torch.

Example (the bundled sample; a tokenizer loads in a few seconds, offline)::

    import viewer

    ro = viewer.load_source(viewer.SAMPLE_DIR / "qwen3-tiny")
    tok = viewer.tokenizer_for(ro).tokenizer
    for turn in ro.agent_turns:
        print(turn.index, viewer.roundtrip(turn, tok).cause)   # why decode → encode changes the ids
    print(viewer.trainer_rows(ro, viewer.choose_spec(ro), tok).totals())
    print([hit.rule for hit in viewer.lint_rollout(ro)])

Open a source
    ``load_source`` (a capture folder, trace / turns file, dataset row or ``hf://``: one
    :class:`Rollout`), ``open_dataset`` (its rows, lazily: :class:`DatasetSource`), ``iter_rollouts``
    (every rollout of a folder or dataset), ``SourceError`` / ``SourceNotFound`` / ``ScanInputError``,
    ``Settings`` (every knob), ``SAMPLE_DIR`` (the bundled captures).
Values
    ``Rollout``, ``Turn`` (ids, logprobs, mask, messages of one model call), ``Problem``.
Tokenizers
    ``tokenizer_for`` (the one a rollout is shown with), ``resolve_tokenizer`` (by name), ``TokenizerChoice``,
    ``token_table`` (each id's exact text).
Drift checks
    ``roundtrip``, ``template_check``, ``prefix_audit`` (one turn each), ``turn_report`` (all three and the
    trainer's verdict for one turn: ``TurnReport``), ``scan`` / ``scan_source`` (many rollouts),
    ``repro`` (a bug report), ``CAUSES`` (the stable cause names).
Trainer rows
    ``trainer_rows`` (the rows a named TRL version trains on: ``TrainerRows``), ``choose_spec``, ``TrainerSpec``.
Compare
    ``compare`` (two rollouts, turns paired, first divergence each: ``Comparison``).
Rescore (needs torch)
    ``rescore_rollout`` (the trainer's logprobs against the sampler's: ``RescoreResult``),
    ``rescore_dataset`` (``RescoreOptions``), ``torch_available``, ``TorchMissing``.
Lint
    ``lint_rollout``, ``lint_source`` (rule hits: ``Hit``; the rules: ``RULES``).
Certify
    ``certify`` (a chat template's report card over ``battery()``'s ``Case`` values and
    ``cases_from_source``'s).
Search
    ``build_index`` (a dataset's Parquet index, built by the drift scan), ``search_rollouts`` (hits worst
    first, facets: ``viewer.search.SearchResult``), ``QueryError`` (a query), ``SearchError`` (a source).
Export
    ``export_rollout``, ``export_deck`` (one HTML file's text that opens offline).
The app's token views
    ``decode_payload`` (what a ``gradio_client`` script gets from ``/select_turn``, as per-position lists).
"""

# (module, names) in the order the docstring documents them. A name is imported from its module the
# first time it is read (module __getattr__, PEP 562), then kept here as a plain attribute.
_API = (
    ("viewer.sources", "load_source open_dataset DatasetSource SourceError SourceNotFound"),
    ("viewer.drift.corpus", "iter_rollouts scan_source ScanInputError"),
    ("viewer.config", "Settings SAMPLE_DIR"),
    ("viewer.rollout", "Rollout Turn Problem"),
    ("viewer.tokenizer", "tokenizer_for resolve_tokenizer TokenizerChoice token_table"),
    ("viewer.drift", "roundtrip template_check prefix_audit turn_report TurnReport scan repro CAUSES "
                     "trainer_rows choose_spec TrainerSpec TrainerRows"),
    ("viewer.comparison", "compare Comparison"),
    ("viewer.rescore", "rescore_rollout RescoreResult TorchMissing torch_available"),
    ("viewer.rescore.dataset", "rescore_dataset RescoreOptions"),
    ("viewer.lint", "lint_rollout lint_source RULES Hit"),
    ("viewer.drift.certify", "certify"),
    ("viewer.drift.certify_cases", "battery Case"),
    ("viewer.drift.certify_input", "cases_from_source"),
    ("viewer.search", "build_index search_rollouts QueryError SearchError"),
    ("viewer.talk.export", "export_rollout export_deck"),
    ("viewer.render.payload", "decode_payload"),
)
# Public names spelled otherwise in their module: ``viewer.rescore`` is the subpackage (``import
# viewer.rescore`` binds it here), so its ``rescore`` function is ``rescore_rollout``, beside ``rescore_dataset``; ``viewer.search``'s ``search`` is
# ``search_rollouts``.
_SPELLED = {"rescore_rollout": "rescore", "search_rollouts": "search"}

_WHERE = {name: module for module, names in _API for name in names.split()}
__all__ = list(_WHERE)


def __getattr__(name: str):
    """A public name, imported from its module the first time it is read (the module's own object)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'viewer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), _SPELLED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names with what is already here (the REPL's completion and ``help()`` read it)."""
    return sorted(set(globals()) | set(__all__))
