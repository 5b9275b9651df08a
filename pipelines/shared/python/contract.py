"""The behavioural contract between a source checkpoint and a converted artifact.

    python contract.py --source DIR --artifact PATH --reader gguf|mlc|folder --corpus FILE
                       [--source-gguf FILE] [--llama-tokenize PATH]

Each check reports what the source says, what the artifact says, and passed or failed; a check
that cannot apply (a source without a tokenizer, a chat template or an EOS) is skipped with the
reason, never passed:
  * tokenizer: every corpus text (each non-empty line of --corpus, and the whole corpus as one
    text, runs of blank lines included) gets the same ids from the artifact's tokenizer as from
    the source's, no special tokens added, and the artifact decodes its ids back to the text byte
    for byte (to what the source's own tokenizer decodes, where that is not the text: the detail
    then names the lines the source itself loses). The source's tokenizer is transformers'
    AutoTokenizer on the checkpoint. The artifact's: for a GGUF, llama.cpp's own (one llama-tokenize
    run a text gives its ids and its pieces, joined for the decode; llama_detokenize drops the
    space an SPM vocabulary puts first, so that one space is dropped here too); for MLC, the tokenizers
    library on the tokenizer.json the folder ships (what MLC's runtime reads); for the other
    folders, transformers on the folder. An artifact that ships no tokenizer fails;
  * source_gguf, for a GGUF source: llama.cpp's tokenizer on the source's own GGUF against the
    checkpoint the source step rebuilt from it, text by text the same way (a rebuilt tokenizer
    that lost its pre-tokenizer shows here, before any artifact inherits it);
  * eos, the stop set: the source's config.json eos_token_id, generation_config.json
    eos_token_id (an id or a list) and the tokenizer's eos token, together. The artifact's: a
    GGUF's tokenizer.ggml.eos_token_id, eot_token_id and eom_token_id (an id of the source's
    missing there still passes when llama.cpp stops on it anyway: llama.cpp prints the end-of-
    generation set it uses when it loads the file, and adds tokens to it by their text); MLC's
    mlc-chat-config.json eos_token_id and its conversation template's stop_token_ids; a folder's
    same three files. Fails when the artifact lacks one of the source's ids or declares another;
  * bos: the ids encoding puts before a text (the tokenizer's own choice: a BOS, or nothing) and
    the BOS id declared (the tokenizer's, else config.json's). A GGUF: llama-tokenize with and
    without --no-bos, and tokenizer.ggml.bos_token_id; MLC: its conversation template's
    system_prefix_token_ids (its runtime encodes without special tokens) and bos_token_id;
  * chat_template: the source's (chat_template.jinja, else tokenizer_config.json's chat_template:
    a string, or a list of named templates) against the artifact's (a GGUF's
    tokenizer.chat_template and tokenizer.chat_template.NAME; a folder's same files), byte for
    byte, with the sha256 of each. MLC's runtime formats a chat with the conversation template
    mlc-chat-config.json writes out, not with Jinja: there the source's template (through
    transformers) and the conversation template (as mlc_llm's Conversation.as_prompt renders it)
    must render the same conversation to the same text.
Its report is report() below (reports/contract.json).
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile

import edgepipe_env
import edgepipe_report

# The files a folder's tokenizer is made of; tokenizer_config.json alone configures one but is none.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json", "vocab.txt", "tekken.json")
# The differing texts a report lists, and the ids around the first difference it shows of each.
MAX_DIFFERING = 5
ID_WINDOW = 16


class ContractError(Exception):
    """An input the contract cannot read (a GGUF llama.cpp refuses, a JSON file that is not)."""


def read_json(folder, name):
    path = os.path.join(folder, name)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ContractError(f"{path}: {e}") from e


def read_text(folder, name):
    try:
        with open(os.path.join(folder, name), encoding="utf-8", newline="") as f:
            return f.read()
    except FileNotFoundError:
        return None


def id_list(v):
    """An eos_token_id value (an id, a list of ids, or null) as a list of ids."""
    if v is None:
        return []
    if isinstance(v, bool):
        return []
    if isinstance(v, int):
        return [v]
    if isinstance(v, list):
        return [i for i in v if isinstance(i, int) and not isinstance(i, bool)]
    return []


def has_tokenizer(folder):
    return any(os.path.isfile(os.path.join(folder, f)) for f in TOKENIZER_FILES)


def corpus_texts(path):
    """The corpus's texts: (line, text) for each non-empty line, and (0, the whole corpus)."""
    with open(path, encoding="utf-8", newline="") as f:
        whole = f.read()
    texts = [(i + 1, line) for i, line in enumerate(whole.split("\n")) if line]
    return texts + [(0, whole)]


def sha(s):
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


# ---- tokenizers ----------------------------------------------------------------------------

class HFTokenizer:
    """transformers' AutoTokenizer on a folder (the source checkpoint, a folder artifact)."""

    def __init__(self, folder):
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(folder)
        self.what = f"transformers {type(self.tok).__name__} on {os.path.basename(os.path.normpath(folder))}/"

    def encode(self, text):
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, text, ids):
        return self.tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def prefix(self, text):
        return added_prefix(list(self.tok(text, add_special_tokens=True)["input_ids"]), self.encode(text))

    def bos_id(self):
        return self.tok.bos_token_id

    def eos(self):
        """The tokenizer's eos token as (id, text), or None."""
        if self.tok.eos_token_id is None:
            return None
        return self.tok.eos_token_id, str(self.tok.eos_token)


class RawTokenizer:
    """The tokenizers library on a tokenizer.json, as MLC's and ORT GenAI's runtimes read it."""

    def __init__(self, path):
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(path)
        self.what = f"tokenizers on {os.path.basename(os.path.dirname(path))}/tokenizer.json"

    def encode(self, text):
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def decode(self, text, ids):
        return self.tok.decode(ids, skip_special_tokens=False)


def added_prefix(with_special, without):
    """The ids encoding with special tokens puts before the text's own ids."""
    n = len(without)
    for start in range(len(with_special) - n + 1):
        if with_special[start:start + n] == without:
            return with_special[:start]
    return with_special


class LlamaCppTokenizer:
    """llama.cpp's own tokenizer on a GGUF: llama-tokenize, which loads only the vocabulary. One
    run per text gives both its ids and its pieces (decoded together, as llama_detokenize joins
    them)."""

    def __init__(self, exe, path, meta):
        self.exe, self.path, self.meta = exe, path, meta
        self.what = f"llama.cpp (llama-tokenize) on {os.path.basename(path)}"
        self.eog = None
        # Removed when the tokenizer is: the prompt file of each run.
        self._tmp = tempfile.TemporaryDirectory(prefix="contract-")
        self.tmp = self._tmp.name
        self.last = None

    def run(self, text, bos=False, verbose=False):
        prompt = os.path.join(self.tmp, "prompt.txt")
        with open(prompt, "wb") as f:
            f.write(text.encode("utf-8"))
        # -f reads the file verbatim; --no-escape keeps a "\n" written in code as two characters.
        argv = [self.exe, "-m", self.path, "-f", prompt, "--no-escape", "--show-count"]
        argv += [] if bos else ["--no-bos"]
        # -v prints what llama.cpp made of the vocabulary, its end-of-generation set included.
        argv += ["-v"] if verbose else ["--log-disable"]
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
        if p.returncode != 0:
            tail = p.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise ContractError(f"llama-tokenize could not tokenize with {os.path.basename(self.path)} "
                                f"(exit {p.returncode}): {' / '.join(tail)}")
        return parse_pieces(p.stdout), p.stderr

    def encode(self, text):
        (ids, pieces), _ = self.run(text)
        self.last = (text, pieces)
        return ids

    def decode(self, text, ids):
        if self.last is None or self.last[0] != text:
            self.encode(text)
        b = self.last[1]
        # llama_detokenize drops the space an SPM vocabulary's first piece starts with.
        if self.meta.get("tokenizer.ggml.add_space_prefix", self.meta.get("tokenizer.ggml.model") == "llama") and b.startswith(b" "):
            b = b[1:]
        return b.decode("utf-8", "replace")

    def prefix(self, text):
        (ids, _), err = self.run(text, bos=True, verbose=True)
        self.eog = parse_eog(err)
        return added_prefix(ids, self.encode(text))


PIECE_HEAD = re.compile(rb" *(-?\d+) -> '")
PIECE_END = re.compile(rb"'\n(?= *-?\d+ -> '|Total number of tokens: \d+\n)")
COUNT = re.compile(rb"Total number of tokens: (\d+)\n")


def parse_pieces(out):
    """The ids and the joined pieces of llama-tokenize's `%6d -> 'PIECE'` lines. A piece may hold a
    quote or a newline; it ends at the first quote and newline that the next line's head (or the
    count --show-count prints) follows, and the count checks the cut."""
    pos, ids, pieces = 0, [], []
    while True:
        m = COUNT.match(out, pos)
        if m:
            if int(m.group(1)) != len(ids):
                raise ContractError(f"llama-tokenize counted {m.group(1)} tokens, its lines {len(ids)}: they cannot be read apart")
            return ids, b"".join(pieces)
        m = PIECE_HEAD.match(out, pos)
        end = PIECE_END.search(out, m.end()) if m else None
        if not end:
            raise ContractError(f"llama-tokenize's output cannot be read at byte {pos}: {out[pos:pos + 80]!r}")
        ids.append(int(m.group(1)))
        pieces.append(out[m.end():end.start()])
        pos = end.end()


EOG_LINE = re.compile(r"print_info: EOG token\s+=\s+(-?\d+) ")


def parse_eog(err):
    ids = [int(m.group(1)) for m in EOG_LINE.finditer(err.decode("utf-8", "replace"))]
    return sorted(set(ids)) if ids else None


def gguf_meta(path):
    """The GGUF's tokenizer.* keys but the vocabulary arrays, read with gguf-py."""
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:  # gguf-py raises ValueError, OSError, struct errors...
        raise ContractError(f"{path} cannot be read as a GGUF: {e}") from e
    meta = {}
    for key, field in reader.fields.items():
        if key.startswith("tokenizer.") and key not in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                                                        "tokenizer.ggml.merges", "tokenizer.ggml.scores"):
            meta[key] = field.contents()
    return meta


# ---- checks ------------------------------------------------------------------------------

def check(status, source, artifact, detail, differing=None):
    return {"status": status, "source": source, "artifact": artifact, "detail": detail, "differing": differing or []}


def window(ids, start):
    return ids[start:start + ID_WINDOW] if start else ids[:max(ID_WINDOW, 48)]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare_tokenizers(texts, source, artifact):
    """Tokenize every text with both sides; the texts they disagree on, and the detail."""
    differing, bad, lossy, tokens = [], 0, [], 0
    for line, text in texts:
        s_ids = source.encode(text)
        a_ids = artifact.encode(text)
        tokens += len(s_ids)
        s_text = source.decode(text, s_ids)
        want = text
        if s_text != text:
            lossy.append(line)
            want = s_text
        a_text = artifact.decode(text, a_ids) if a_ids == s_ids or len(differing) < MAX_DIFFERING else None
        if a_ids == s_ids and a_text == want:
            continue
        bad += 1
        if len(differing) < MAX_DIFFERING:
            # Short texts show every id; long ones those from just before the first difference.
            start = 0 if max(len(s_ids), len(a_ids)) <= 48 else max(0, first_difference(s_ids, a_ids) - 4)
            shown = text[:200] if line else "the whole corpus"
            if start:
                shown += f" (ids from token {start})"
            differing.append({"line": line, "text": shown, "source_ids": window(s_ids, start),
                              "artifact_ids": window(a_ids, start), "decoded": None if a_text is None else a_text[:200]})
    note = ""
    if lossy:
        note = (f"; the source's own tokenizer does not give back {len(lossy)} of them "
                f"({describe_lines(lossy)}): the artifact is held to what the source decodes")
    if bad:
        first = differing[0]
        how = "tokenizes" if first["source_ids"] != first["artifact_ids"] else "decodes"
        return "failed", (f"{bad} of {len(texts)} corpus texts differ: the artifact {how} "
                          f"{describe_lines([first['line']])} differently{note}"), differing
    return "passed", f"{len(texts)} corpus texts ({tokens} tokens): the same ids, and the same text back{note}", []


def describe_lines(lines):
    words = ["the whole corpus" if n == 0 else f"line {n}" for n in lines[:6]]
    return ", ".join(words) + (", ..." if len(lines) > 6 else "")


def tokenizer_check(texts, source, artifact, artifact_error):
    if source is None:
        return check("skipped", "no tokenizer", "not compared",
                     "the source ships no tokenizer (no " + ", ".join(TOKENIZER_FILES) + "): there is nothing to compare")
    if artifact is None:
        return check("failed", source.what, "no tokenizer", artifact_error)
    try:
        status, detail, differing = compare_tokenizers(texts, source, artifact)
    except ContractError as e:
        return check("failed", source.what, artifact.what, str(e))
    return check(status, source.what, artifact.what, detail, differing)


def source_stop_set(folder, tok):
    found = []
    for name in ("config.json", "generation_config.json"):
        cfg = read_json(folder, name) or {}
        for i in id_list(cfg.get("eos_token_id")):
            found.append((i, f"{name} eos_token_id {i}"))
    if tok is not None and tok.eos() is not None:
        i, text = tok.eos()
        found.append((i, f"the tokenizer's eos_token {text!r} = {i}"))
    return found


def describe_set(found):
    ids = sorted({i for i, _ in found})
    return "{" + ", ".join(str(i) for i in ids) + "}" + (" (" + ", ".join(w for _, w in found) + ")" if found else "")


def eos_check(src_found, art_found, runtime=None, runtime_what=""):
    src = {i for i, _ in src_found}
    declared = {i for i, _ in art_found}
    artifact = describe_set(art_found) if art_found else "no EOS declared"
    if runtime is not None:
        artifact += f"; {runtime_what} stops on " + "{" + ", ".join(str(i) for i in sorted(runtime)) + "}"
    if not src:
        return check("skipped", "no EOS declared", artifact,
                     "the source declares no EOS (no eos_token_id in config.json or generation_config.json, no eos_token in the tokenizer): there is no stop set to keep")
    stops = set(runtime) if runtime is not None else declared
    missing, extra = sorted(src - stops), sorted(declared - src)
    problems = []
    if missing:
        problems.append("the artifact does not stop on " + ", ".join(str(i) for i in missing) + ", which the source stops on")
    if extra:
        problems.append("the artifact declares " + ", ".join(str(i) for i in extra) + " as EOS, which the source does not")
    if problems:
        return check("failed", describe_set(src_found), artifact, "; ".join(problems))
    detail = "the same stop set"
    if runtime is not None and set(runtime) - src:
        detail += f"; {runtime_what} also stops on " + ", ".join(str(i) for i in sorted(set(runtime) - src)) + " by its own rules (end-of-turn and fill-in-the-middle tokens it finds by their text)"
    return check("passed", describe_set(src_found), artifact, detail)


def describe_bos(prefix, declared, where):
    added = "adds no BOS" if not prefix else "adds " + str(prefix) + " before a text"
    return f"{added}; BOS id {declared if declared is not None else 'none'}" + (f" ({where})" if where else "")


def bos_check(src_prefix, src_bos, src_where, art_prefix, art_bos, art_where):
    s = describe_bos(src_prefix, src_bos, src_where)
    a = describe_bos(art_prefix, art_bos, art_where)
    problems = []
    if src_prefix != art_prefix:
        problems.append(f"encoding a text puts {art_prefix or 'nothing'} before it in the artifact, {src_prefix or 'nothing'} in the source")
    if src_bos is not None and art_bos != src_bos:
        problems.append(f"the artifact declares BOS id {art_bos if art_bos is not None else 'none'}, the source {src_bos}")
    if problems:
        return check("failed", s, a, "; ".join(problems))
    return check("passed", s, a, "the same BOS handling")


def folder_templates(folder):
    """A folder's chat templates by name ("default" for the single one) and where they are."""
    jinja = read_text(folder, "chat_template.jinja")
    if jinja is not None:
        return {"default": jinja}, "chat_template.jinja"
    cfg = read_json(folder, "tokenizer_config.json") or {}
    t = cfg.get("chat_template")
    if isinstance(t, str):
        return {"default": t}, "tokenizer_config.json chat_template"
    if isinstance(t, list):
        return {d.get("name", "default"): d.get("template", "") for d in t if isinstance(d, dict)}, "tokenizer_config.json chat_template (named)"
    return {}, ""


def gguf_templates(meta):
    out = {}
    if isinstance(meta.get("tokenizer.chat_template"), str):
        out["default"] = meta["tokenizer.chat_template"]
    for name in meta.get("tokenizer.chat_templates") or []:
        if isinstance(meta.get(f"tokenizer.chat_template.{name}"), str):
            out[name] = meta[f"tokenizer.chat_template.{name}"]
    return out, "tokenizer.chat_template" if out else ""


def describe_templates(templates, where):
    if not templates:
        return "no chat template"
    parts = [f"{name}: sha256 {sha(t)[:16]} ({len(t.encode('utf-8'))} bytes)" for name, t in sorted(templates.items())]
    return "; ".join(parts) + f" ({where})"


def template_check(src, src_where, art, art_where, art_note=""):
    s = describe_templates(src, src_where)
    a = describe_templates(art, art_where) + art_note
    if not src:
        return check("skipped", s, a, "the source has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json): there is none to keep")
    problems = []
    for name in sorted(set(src) | set(art)):
        if name not in art:
            problems.append(f"the artifact has no {name!r} chat template: the source's is lost")
        elif name not in src:
            problems.append(f"the artifact has a {name!r} chat template the source does not")
        elif src[name] != art[name]:
            at = first_difference(src[name], art[name])
            problems.append(f"the {name!r} chat template differs from character {at}: source {src[name][at:at + 40]!r}, artifact {art[name][at:at + 40]!r}")
    if problems:
        return check("failed", s, a, "; ".join(problems))
    return check("passed", s, a, "the same chat template, byte for byte")


# The conversation both sides render for MLC: a system message, a turn each, and the prompt for
# the next answer (MLC's runtime fills its own system message when an app gives none, so one is
# given here).
CONVERSATION = [("system", "You answer briefly."), ("user", "Hi there!"), ("assistant", "Hello. How can I help?"),
                ("user", "Name a colour.")]


def render_jinja(tok):
    messages = [{"role": r, "content": c} for r, c in CONVERSATION]
    return tok.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def render_mlc(conv):
    """mlc_llm's Conversation.as_prompt (protocol/conversation_protocol.py) for a conversation
    template written out in mlc-chat-config.json: the system template with the system message,
    then each message as role, role_content_sep, the role's template and the separator (seps[0]
    after a user's, seps[-1] after the assistant's), and the empty assistant's role and
    role_empty_sep last."""
    system = next(c for r, c in CONVERSATION if r == "system")
    sys_text = conv.get("system_template", "").replace("{system_message}", system)
    seps = list(conv.get("seps") or [""])
    out = [sys_text] if sys_text else []
    turns = [(r, c) for r, c in CONVERSATION if r != "system"] + [("assistant", None)]
    for i, (role, content) in enumerate(turns):
        if content is None:
            out.append(conv["roles"][role] + conv.get("role_empty_sep", ""))
            continue
        prefix = "" if (not conv.get("add_role_after_system_message", True) and sys_text and i == 0) \
            else conv["roles"][role] + conv.get("role_content_sep", "")
        body = conv.get("role_templates", {}).get(role, "{" + role + "_message}").replace("{" + role + "_message}", content)
        out.append(prefix + body + seps[-1 if role == "assistant" else 0])
    return "".join(out)


def mlc_template_check(src, src_where, source, art):
    """MLC's runtime formats a chat with the conversation template in mlc-chat-config.json, not with
    a Jinja template: the two must render the same conversation the same way. A Jinja template the
    folder ships besides must be the source's too."""
    s = describe_templates(src, src_where)
    conv = art.conv
    if not src:
        return check("skipped", s, describe_templates(art.templates, art.templates_where) + art.template_note,
                     "the source has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json): there is none to keep")
    if not isinstance(conv, dict) or "roles" not in conv:
        return check("skipped", s, f"conv_template {conv!r}",
                     "mlc-chat-config.json names its conversation template without writing it out: it is mlc_llm's registry's, "
                     "which edgepipe does not have, so how it renders a chat was not compared")
    if source is None:
        return check("failed", s, f"conv_template {conv.get('name')!r}", "the source ships no tokenizer to render its chat template with")
    want, got = render_jinja(source), render_mlc(conv)
    a = f"conv_template {conv.get('name')!r}: renders sha256 {sha(got)[:16]}"
    s += f"; renders sha256 {sha(want)[:16]}"
    problems = []
    if want != got:
        at = first_difference(want, got)
        problems.append(f"the conversation template renders a chat differently from character {at}: "
                        f"source {want[at:at + 60]!r}, artifact {got[at:at + 60]!r}")
    if art.templates:
        for name in sorted(set(src) | set(art.templates)):
            if src.get(name) != art.templates.get(name):
                problems.append(f"the folder's {name!r} Jinja template is not the source's")
    if problems:
        return check("failed", s, a, "; ".join(problems))
    return check("passed", s, a, "the conversation template renders a chat as the source's chat template does")


# ---- the artifact's side -----------------------------------------------------------------

class Artifact:
    """What the contract reads of an artifact: its tokenizer (or why it has none), its declared
    stop set (and the one its runtime really uses, where that runtime says), its BOS, its chat
    templates. fixed_prefix is what its runtime puts before a text when that is not the
    tokenizer's choice (MLC: the conversation template's)."""

    def __init__(self):
        self.tokenizer, self.tokenizer_error = None, ""
        self.stops, self.runtime_stops, self.runtime_what = [], None, ""
        self.bos, self.bos_where = None, ""
        self.templates, self.templates_where, self.template_note = {}, "", ""
        self.fixed_prefix = None
        self.conv = None

    def prefix(self, text):
        if self.fixed_prefix is not None:
            return self.fixed_prefix
        return self.tokenizer.prefix(text)


def no_tokenizer():
    return "the artifact ships no tokenizer (its folder holds none of " + ", ".join(TOKENIZER_FILES) + "): an app cannot tokenize with it"


def declared_bos(tok, cfg):
    """The BOS id a folder declares, and where: its tokenizer's, else its config.json's."""
    if tok is not None and tok.bos_id() is not None:
        return tok.bos_id(), "the tokenizer"
    if isinstance(cfg.get("bos_token_id"), int):
        return cfg["bos_token_id"], "config.json"
    return None, ""


def folder_artifact(folder):
    a = Artifact()
    if has_tokenizer(folder):
        try:
            a.tokenizer = HFTokenizer(folder)
        except Exception as e:  # transformers raises many kinds for a folder it cannot load
            a.tokenizer_error = f"transformers cannot load the artifact's tokenizer: {type(e).__name__}: {e}"
    else:
        a.tokenizer_error = no_tokenizer()
    a.stops = source_stop_set(folder, a.tokenizer)
    a.bos, a.bos_where = declared_bos(a.tokenizer, read_json(folder, "config.json") or {})
    a.templates, a.templates_where = folder_templates(folder)
    return a


def mlc_artifact(folder):
    a = Artifact()
    chat = read_json(folder, "mlc-chat-config.json")
    if chat is None:
        raise ContractError(f"{folder} has no mlc-chat-config.json: it is not an MLC model folder")
    path = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(path):
        try:
            a.tokenizer = RawTokenizer(path)
        except Exception as e:  # tokenizers raises its own Exception subclass
            a.tokenizer_error = f"the tokenizers library cannot load the artifact's tokenizer.json: {e}"
    elif has_tokenizer(folder):
        a.tokenizer = HFTokenizer(folder)
    else:
        a.tokenizer_error = no_tokenizer()
    conv = a.conv = chat.get("conv_template")
    a.stops = [(i, f"mlc-chat-config.json eos_token_id {i}") for i in id_list(chat.get("eos_token_id"))]
    a.fixed_prefix = []
    if isinstance(conv, dict):
        a.stops += [(i, f"conv_template {conv.get('name')!r} stop_token_ids {i}") for i in id_list(conv.get("stop_token_ids"))]
        a.fixed_prefix = id_list(conv.get("system_prefix_token_ids"))
        a.template_note = f"; mlc-chat-config.json's conv_template is {conv.get('name')!r}"
    elif conv is not None:
        a.template_note = f"; mlc-chat-config.json's conv_template names {conv!r}"
    a.bos = chat.get("bos_token_id")
    a.bos_where = "mlc-chat-config.json; its runtime encodes without special tokens and puts the conversation template's system_prefix_token_ids first"
    a.templates, a.templates_where = folder_templates(folder)
    return a


def gguf_artifact(path, exe):
    a = Artifact()
    meta = gguf_meta(path)
    if "tokenizer.ggml.model" not in meta:
        a.tokenizer_error = f"{os.path.basename(path)} holds no tokenizer (no tokenizer.ggml.model): an app cannot tokenize with it"
    elif not exe:
        raise ContractError("a GGUF artifact is read with llama-tokenize: pass --llama-tokenize")
    else:
        a.tokenizer = LlamaCppTokenizer(exe, path, meta)
    for kind in ("eos", "eot", "eom"):
        v = meta.get(f"tokenizer.ggml.{kind}_token_id")
        if isinstance(v, int):
            a.stops.append((v, f"tokenizer.ggml.{kind}_token_id {v}"))
    a.bos = meta.get("tokenizer.ggml.bos_token_id")
    add = meta.get("tokenizer.ggml.add_bos_token")
    a.bos_where = "tokenizer.ggml.bos_token_id" + (f", tokenizer.ggml.add_bos_token {str(add).lower()}" if add is not None else "")
    a.templates, a.templates_where = gguf_templates(meta)
    a.runtime_what = "llama.cpp"
    return a


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="the source step's Hugging Face checkpoint folder")
    ap.add_argument("--artifact", required=True, help="the artifact: its .gguf file, or its folder")
    ap.add_argument("--reader", required=True, choices=["gguf", "mlc", "folder"], help="how the artifact is read")
    ap.add_argument("--corpus", required=True, help="the corpus: one text a line (UTF-8)")
    ap.add_argument("--source-gguf", help="the source's own GGUF, for a GGUF source")
    ap.add_argument("--llama-tokenize", help="llama.cpp's llama-tokenize, for a GGUF")
    args = ap.parse_args()

    edgepipe_env.offline()
    os.environ.setdefault("RAYON_NUM_THREADS", str(edgepipe_env.threads()))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        r = run(args)
    except ContractError as e:
        print(f"contract: {e}", file=sys.stderr)
        return 2
    edgepipe_report.emit(r)
    return 0


def run(args):
    texts = corpus_texts(args.corpus)
    source = HFTokenizer(args.source) if has_tokenizer(args.source) else None
    if args.reader == "gguf":
        art = gguf_artifact(args.artifact, args.llama_tokenize)
    elif args.reader == "mlc":
        art = mlc_artifact(args.artifact)
    else:
        art = folder_artifact(args.artifact)

    tok = tokenizer_check(texts, source, art.tokenizer, art.tokenizer_error)
    src_gguf = source_gguf_check(texts, args, source) if args.source_gguf else None
    bos = bos_of(texts[0][1], args.source, source, art)
    eos = eos_check(source_stop_set(args.source, source), art.stops, art.runtime_stops, art.runtime_what)
    src_t, src_where = folder_templates(args.source)
    if args.reader == "mlc":
        chat = mlc_template_check(src_t, src_where, source, art)
    else:
        chat = template_check(src_t, src_where, art.templates, art.templates_where, art.template_note)
    return report(args.reader, args.artifact, len(texts), tok, src_gguf, eos, bos, chat)


def source_gguf_check(texts, args, source):
    if not args.llama_tokenize:
        raise ContractError("a GGUF source is read with llama-tokenize: pass --llama-tokenize")
    name = os.path.basename(args.source_gguf)
    meta = gguf_meta(args.source_gguf)
    if "tokenizer.ggml.model" not in meta:
        return check("failed", f"{name}: no tokenizer", source.what if source else "no tokenizer",
                     "the source's GGUF holds no tokenizer (no tokenizer.ggml.model)")
    g = LlamaCppTokenizer(args.llama_tokenize, args.source_gguf, meta)
    if source is None:
        return check("failed", g.what, "no tokenizer", "the checkpoint made from the source's GGUF has no tokenizer: it was lost on the way")
    # Here the GGUF is the reference: the checkpoint must tokenize as llama.cpp reads the GGUF.
    try:
        status, detail, differing = compare_tokenizers(texts, g, source)
    except ContractError as e:
        return check("failed", g.what, source.what, str(e))
    return check(status, g.what, source.what, detail, differing)


def bos_of(probe, folder, source, art):
    """The BOS check; reading the artifact's BOS behaviour also gives llama.cpp's EOG set."""
    src_bos, src_where = declared_bos(source, read_json(folder, "config.json") or {})
    if source is None:
        return check("skipped", "no tokenizer", describe_bos([], art.bos, art.bos_where),
                     "the source ships no tokenizer: how it encodes BOS is unknown")
    src = source.prefix(probe)
    if art.tokenizer is None:
        return check("failed", describe_bos(src, src_bos, src_where), "no tokenizer", art.tokenizer_error)
    try:
        art_prefix = art.prefix(probe)
    except ContractError as e:
        return check("failed", describe_bos(src, src_bos, src_where), art.tokenizer.what, str(e))
    if isinstance(art.tokenizer, LlamaCppTokenizer):
        art.runtime_stops = art.tokenizer.eog
    return bos_check(src, src_bos, src_where, art_prefix, art.bos, art.bos_where)


def report(reader, path, texts, tokenizer, source_gguf, eos, bos, chat_template):
    """Each check is check()'s dict; source_gguf is None without a GGUF source."""
    return {"artifact": reader, "path": path, "corpus_texts": texts, "tokenizer": tokenizer, "source_gguf": source_gguf,
            "eos": eos, "bos": bos, "chat_template": chat_template}


if __name__ == "__main__":
    sys.exit(main())
