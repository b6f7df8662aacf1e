"""Plotly figures over Rollout / Turn values (no gradio here): ``logprob`` (a rollout's logprobs),
``drift`` (scan results), ``delta`` (rescore: trainer − sampler logprobs), ``costs`` (the fork-threshold sweep), ``style`` (the shared look).

Conventions shared by every figure:

* explicit ``height``, transparent paper and plot backgrounds, mid-grey font and grid
  lines, so a figure reads in both light and dark themes (docs/GRADIO.md §3.2);
* hover text is built here and HTML-escaped (plotly renders a subset of HTML in hover
  labels), token text goes through :func:`viewer.tokenizer.visible` first;
* ``customdata`` of every point is a plain int the UI can act on when the point is
  clicked: the output position for :func:`logprob_figure`, the turn index for
  :func:`turns_figure`;
* an input without logprobs gives a figure with a "no logprobs recorded" annotation,
  never an exception.
"""
from .costs import gradient_sweep_figure
from .delta import delta_figure, ratio_histogram
from .drift import drift_cause_figure, drift_rollout_figure
from .logprob import histogram_figure, logprob_figure, trained_runs, turn_mask, turns_figure
from .style import MAX_POINTS, MAX_SHADED_RUNS, NO_LOGPROBS

__all__ = ["MAX_POINTS", "NO_LOGPROBS", "MAX_SHADED_RUNS", "histogram_figure", "logprob_figure", "trained_runs",
           "turns_figure", "turn_mask", "drift_cause_figure", "drift_rollout_figure", "delta_figure", "ratio_histogram",
           "gradient_sweep_figure"]
