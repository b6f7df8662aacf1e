"""Special token texts the library treats alike across model families (the one list).

``END_OF_TURN``: the tokens that end a model's turn or sequence in the chat templates we meet
(Qwen/ChatML ``<|im_end|>`` and ``<|endoftext|>``, Phi ``<|end|>``, gpt-oss ``<|return|>``, Llama 3
``<|eot_id|>`` / ``<|eom_id|>``, Gemma ``<end_of_turn>``). Derivation cuts a derived reply after one;
drift classification treats a swap or loss of one at a boundary as ``eos_newline``.
"""
from __future__ import annotations

__all__ = ["END_OF_TURN"]

END_OF_TURN: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>", "<|end|>", "<|return|>", "<|eot_id|>", "<|eom_id|>",
                                "<end_of_turn>")
