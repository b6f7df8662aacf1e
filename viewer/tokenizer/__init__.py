"""Tokenizers: find one for a rollout, load it offline, and show each token exactly.

* :mod:`.bundled`: the real Qwen3 tokenizer + chat template, offline;
* :mod:`.choice`: **choosing** a tokenizer for a rollout (:func:`tokenizer_for`, the one owner);
* :mod:`.files`: a tokenizer folder's files and the check of a capture's against its recorded sha256s;
* :mod:`.table` / :mod:`.display`: **showing** each token exactly (:class:`TokenTable`, :func:`visible`);
* :mod:`.template`: **re-rendering** a prompt the way vLLM does (:func:`render_prompt_ids`).
"""
from .bundled import QWEN3_DIR, QWEN3_TOKENIZER_SHA256, load_qwen3, qwen3_dir
from .choice import (TokenizerChoice, TokenizerSource, capture_dir_of, derived_with, load_local, resolve_tokenizer,
                     tokenizer_for, tokenizer_name_for)
from .files import verify_capture_tokenizer
from .display import display_bytes, texts_from_output_bytes, texts_without_tokenizer, visible
from .table import TokenTable, byte_decoder, token_table
from .template import chat_template_hash, normalize_messages, render_prompt_ids, render_prompt_text

__all__ = ["QWEN3_DIR", "QWEN3_TOKENIZER_SHA256", "TokenTable", "TokenizerChoice", "TokenizerSource", "byte_decoder",
           "capture_dir_of", "chat_template_hash", "derived_with", "display_bytes", "load_local", "load_qwen3", "normalize_messages",
           "qwen3_dir", "render_prompt_ids", "render_prompt_text", "resolve_tokenizer", "texts_from_output_bytes",
           "texts_without_tokenizer", "token_table", "tokenizer_for", "tokenizer_name_for", "verify_capture_tokenizer",
           "visible"]
