"""Encoding each piece between added tokens once (viewer.tokenizer.pieces), as the drift scan does.

The oracle is the real Qwen3 tokenizer's own whole-text encoding through transformers; the
tokenizers that must be refused are real ``tokenizers`` objects whose added tokens or
pre-tokenizer make a piece's ids depend on its neighbours."""
from __future__ import annotations

import copy

from tokenizers import AddedToken
from transformers import PreTrainedTokenizerFast

from viewer import drift
from viewer.config import SAMPLE_DIR
from viewer.sources import load_source
from viewer.tokenizer import render_prompt_text
from viewer.tokenizer.pieces import PieceEncoder, piece_encoder

EDGES = ["", "<|im_start|>", "<|im_start|><|im_end|>", "a<|im_end|>b", "<|im_sta", "<|im_end|>>",
         "<<|im_start|>|im_end|>", "</tool_call><tool_call>", "<think>\n\n</think>\n\n", "e\u0301<|im_end|>\u0301",
         "\n<|im_start|>\n", "  <|endoftext|>  x", "user\n<tool_call>{\"a\": 1}</tool_call><|im_end|>\n",
         "héllo 🦩<|im_end|>héllo 🦩", "<tool_response>\n\r\n</tool_response>", "x" * 5000 + "<|im_end|>" + "y" * 3]


def _whole(tok, texts):
    return [list(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]


def test_piece_encoding_equals_the_tokenizers_whole_text_encoding(qwen3):
    ro = load_source(SAMPLE_DIR / "qwen3-tiny")
    prompts = [render_prompt_text(qwen3, t.messages, tools=t.tools or None) for t in ro.turns if t.messages]
    outputs = [qwen3.decode(list(t.output_ids), skip_special_tokens=False) for t in ro.turns if t.output_ids]
    texts = prompts + outputs + EDGES + prompts  # repeated texts and pieces in one call
    enc = piece_encoder(qwen3)
    assert enc is not None
    assert enc.encode_batch(texts) == _whole(qwen3, texts)


def test_a_conversations_history_is_encoded_once(qwen3):
    """Each turn's prompt repeats the conversation so far: the pieces the backend is asked to encode
    are the distinct ones, not every prompt's whole text."""
    asked: list[str] = []

    class Spy:  # records what reaches the real backend
        def encode_batch(self, texts, add_special_tokens):
            asked.extend(texts)
            return qwen3._tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)

    msgs = [{"role": "system", "content": "You are terse."}]
    prompts = []
    for i in range(4):
        msgs = msgs + [{"role": "user", "content": f"question {i} " * 50}]
        prompts.append(render_prompt_text(qwen3, msgs))
        msgs = msgs + [{"role": "assistant", "content": f"answer {i} " * 50}]
    enc = PieceEncoder(Spy(), piece_encoder(qwen3)._ids)
    assert enc.encode_batch(prompts) == _whole(qwen3, prompts)
    assert len(asked) == len(set(asked))
    assert sum(map(len, asked)) < 0.5 * sum(map(len, prompts))


def _variant(base, change) -> PreTrainedTokenizerFast:
    backend = copy.deepcopy(base._tokenizer)
    change(backend)
    return PreTrainedTokenizerFast(tokenizer_object=backend)


def test_tokenizers_whose_pieces_depend_on_their_neighbours_are_refused():
    """Added tokens that strip the spaces before or after them: cutting at the added tokens would
    change the ids, so no piece encoder (whole texts). A Metaspace that marks only the first piece
    is refused too (the module doc); a byte-level vocabulary cannot show that one. The variants are
    made from SmolLM2's byte-level tokenizer (a piece encoder as it is, like Qwen3's, and a third of
    its size to copy)."""
    from viewer.tokenizer.choice import load_local

    smol = load_local(str(SAMPLE_DIR / "smollm2" / "tokenizer"))
    assert piece_encoder(smol) is not None  # so the refusals below are the added token's doing
    lstrip = _variant(smol, lambda b: b.add_tokens([AddedToken("<mark>", lstrip=True, normalized=False)]))
    rstrip = _variant(smol, lambda b: b.add_tokens([AddedToken("<mark>", rstrip=True, normalized=False)]))
    for tok, text in ((lstrip, "a   <mark>b"), (rstrip, "a<mark>   b")):
        ids = {t.content: i for i, t in tok._tokenizer.get_added_tokens_decoder().items()}
        cut = PieceEncoder(tok._tokenizer, ids).encode_batch([text])
        assert cut != _whole(tok, [text]), "the cut would be exact here: the case proves nothing"
        assert piece_encoder(tok) is None


def test_scan_with_pieces_equals_the_scan_of_whole_texts(qwen3, monkeypatch):
    """The scan's result is the same byte for byte whether prompts are encoded piece by piece or whole."""
    import json

    ro = load_source(SAMPLE_DIR / "qwen3-tiny")
    rollouts = [ro, copy.deepcopy(ro)]
    with_pieces = drift.scan(rollouts, qwen3)
    import importlib

    monkeypatch.setattr(importlib.import_module("viewer.drift.scan"), "piece_encoder", lambda tok: None)
    whole = drift.scan(rollouts, qwen3)
    assert json.dumps(with_pieces, default=str) == json.dumps(whole, default=str)
