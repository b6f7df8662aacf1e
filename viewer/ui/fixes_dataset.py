"""Correction methods across a dataset, under the rescore panel: upload the per-token parquet of a dataset
rescore and see, per method (TRL, verl, prime-rl's IcePop-style and DPPO masks), the tokens and sequences
kept / clipped / masked and where methods disagree; the thresholds are inputs (no model runs, only
:func:`viewer.rescore.dataset_fixes.dataset_corrections`). The upload goes through the app's upload gate.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from ..render.fixes_dataset import dataset_corrections_html
from ..rescore.corrections import DEFAULTS
from ..rescore.dataset_fixes import dataset_corrections

__all__ = ["build", "counts_html"]

# (method, parameter, label): the thresholds offered, each starting at its project's default
KNOBS = [("trl", "clip_max", "TRL clip max"), ("verl", "is_threshold", "verl IS threshold"),
         ("prime_rl_icepop", "token_mask_low", "IcePop low"), ("prime_rl_icepop", "token_mask_high", "IcePop high"),
         ("prime_rl_dppo", "dppo_mask_low", "DPPO low"), ("prime_rl_dppo", "dppo_mask_high", "DPPO high")]


def counts_html(path: str | None, advantage: float, *values: float | None) -> str:
    """The dataset view of the parquet at ``path`` with these thresholds (:data:`KNOBS` order)."""
    if not path:
        return dataset_corrections_html(None)
    params: dict[str, dict] = {}
    for (m, k, _), v in zip(KNOBS, values):
        if v is not None:
            params.setdefault(m, {})[k] = float(v)
    try:
        doc = dataset_corrections(path, params, advantage=float(advantage))
    except (ValueError, TypeError) as e:
        return dataset_corrections_html(None, error=str(e))
    return dataset_corrections_html(doc, Path(path).name)


def build() -> None:
    """The accordion, inside the current block (the Tokens tab, after the rescore panel)."""
    with gr.Accordion("Corrections across a dataset (per-token parquet)", open=False, elem_id="fx-dataset"):
        with gr.Row(equal_height=True):
            upload = gr.UploadButton("Upload per-token parquet", size="sm", file_types=[".parquet"],
                                     elem_id="fx-dataset-upload")
            advantage = gr.Radio([1.0, -1.0], value=1.0, label="advantage sign (DPPO; the parquet has none)",
                                 elem_id="fx-dataset-adv")
        with gr.Row(equal_height=True):
            knobs = [gr.Number(DEFAULTS[m][k], label=label, elem_id=f"fx-dataset-{m}-{k}".replace("_", "-"),
                               min_width=90) for m, k, label in KNOBS]
        view = gr.HTML(dataset_corrections_html(None), elem_id="fx-dataset-html")
    path = gr.State(None)

    def on_upload(f, adv, *vals):
        p = getattr(f, "name", f)
        return p, counts_html(p, adv, *vals)

    upload.upload(on_upload, [upload, advantage, *knobs], [path, view], api_name="fx_dataset_upload",
                  api_visibility="private")
    # one event for every threshold: the view again from the uploaded file (server-side State), no model
    gr.on([c.change for c in (advantage, *knobs)], counts_html, [path, advantage, *knobs], view,
          api_name="fx_dataset_params", api_visibility="private", show_progress="hidden")
