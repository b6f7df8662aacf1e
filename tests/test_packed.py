"""viewer.packed and viewer.sources.logprob_entries: packed columns behave like the lists they replace;
top-k alternatives and token bytes are packed exactly."""
from __future__ import annotations

import copy
import pickle

from viewer.packed import Packed, pack_floats, pack_ids, pack_mask
from viewer.rollout import TopLogprob, Turn
from viewer.sources.logprob_entries import bytes_column, topk_column


def test_packed_compares_slices_and_concatenates_like_a_list():
    ids = pack_ids([5, 6, 7, 8])
    assert ids == [5, 6, 7, 8] and ids == (5, 6, 7, 8) and ids != [5, 6, 7]
    assert not (ids == [5, 6, 7, 9])
    assert isinstance(ids[1:3], Packed) and ids[1:3] == [6, 7]
    assert ids[-1] == 8 and list(ids) == [5, 6, 7, 8] and tuple(ids) == (5, 6, 7, 8)
    assert [1] + ids == [1, 5, 6, 7, 8] and ids + [9] == [5, 6, 7, 8, 9]
    assert isinstance(ids + pack_ids([9]), Packed)
    for clone in (pickle.loads(pickle.dumps(ids)), copy.deepcopy(ids), copy.copy(ids)):
        assert type(clone) is Packed and clone == [5, 6, 7, 8]
    assert ids.nbytes == 16  # 4 bytes an id


def test_pack_floats_keeps_a_list_with_missing_values_and_masks_are_0_1():
    assert pack_floats([-0.5, -1]) == [-0.5, -1.0] and isinstance(pack_floats([-0.5]), Packed)
    kept = [-0.5, None]
    assert pack_floats(kept) is kept
    assert pack_mask([True, 0, 2.5, False]) == [1, 0, 1, 0]
    assert pack_ids([2 ** 40]) == [2 ** 40]  # does not fit 32 bits: a wider array, same value


def _entry(tops, b=None):
    e = {"token": "token_id:1", "logprob": -0.1, "top_logprobs": tops}
    if b is not None:
        e["bytes"] = b
    return e


def test_topk_from_token_id_entries():
    entries = [_entry([{"token": "token_id:5", "logprob": -0.1}, {"token": "token_id:17", "logprob": -2}]),
               _entry([{"token": "token_id:151643", "logprob": -0.25}])]
    col = topk_column(entries, 3)  # 3 tokens, 2 entries: the last has no alternatives
    assert len(col) == 3
    assert col[0] == [TopLogprob(5, None, -0.1), TopLogprob(17, None, -2.0)]
    assert col[1] == [TopLogprob(151643, None, -0.25)] and col[2] == [] and col[-1] == []
    assert list(col)[:2] == [col[0], col[1]] and col[0:2] == [col[0], col[1]]


def test_topk_text_tokens_and_malformed_items_are_read_item_by_item():
    entries = [_entry([{"token": "Hello", "logprob": -0.5, "token_id": 9707},
                       {"token": "token_id:x", "logprob": -1.0},  # not a number after the prefix: text
                       {"token": "token_id:-5", "logprob": -1.5},  # a sign is not "token_id:N" (openai_wire)
                       {"token": "a", "logprob": "bad"},  # no numeric logprob: skipped
                       "junk",  # not an object: skipped
                       {"logprob": True}]),  # a bool is not a logprob: skipped
               {"no": "tops"},
               _entry([{"token": "token_id:12token_id:3", "logprob": -3}])]  # prefix twice: text, not 123
    col = topk_column(entries, 3)
    assert col[0] == [TopLogprob(9707, "Hello", -0.5), TopLogprob(None, "token_id:x", -1.0),
                      TopLogprob(None, "token_id:-5", -1.5)]
    assert col[1] == []
    assert col[2] == [TopLogprob(None, "token_id:12token_id:3", -3.0)]


def test_topk_fast_path_refuses_what_token_id_refuses():
    # a well-formed column but one signed / spaced id: the item-by-item rules keep it as text
    for bad in ("token_id:-5", "token_id: 5", "token_id:"):
        entries = [_entry([{"token": "token_id:5", "logprob": -0.1}]), _entry([{"token": bad, "logprob": -0.2}])]
        col = topk_column(entries, 2)
        assert col[0] == [TopLogprob(5, None, -0.1)] and col[1] == [TopLogprob(None, bad, -0.2)]


def test_bytes_column():
    entries = [_entry([], [104, 105]), _entry([], [300]), _entry([]), _entry([], [0xE4, 0xBD])]
    col = bytes_column(entries, 5)
    assert list(col) == [b"hi", None, None, b"\xe4\xbd", None]


def test_turn_nbytes_is_small_for_packed_columns():
    n = 10_000
    packed = Turn(0, 1, prompt_ids=pack_ids(range(n)), output_ids=pack_ids(range(n)),
                  logprobs=pack_floats([-0.5] * n), mask=pack_mask([1] * n))
    lists = Turn(0, 1, prompt_ids=list(range(n)), output_ids=list(range(n)), logprobs=[-0.5] * n, mask=[1] * n)
    # 4 + 4 + 8 + 1 bytes a token, plus a fixed overhead under 1 KB
    assert 17 * n <= packed.nbytes <= 17 * n + 1000
    assert lists.nbytes > 4 * packed.nbytes
    assert packed.loss_mask == [1] * n and packed.trained_tokens == n
