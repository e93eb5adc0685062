#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/.

Small valid inputs of each format (and a few near misses), so fuzzing starts
from inputs that reach deep into the readers. Rerun after changing a format.
"""
import json
import pathlib
import struct

root = pathlib.Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    path = root / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=True):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":"))
    if pad:
        text += " " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text.encode() + data


write("safetensors", "mixed", safetensors([
    ("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
    ("step", "I64", [], struct.pack("<q", 7)),
    ("half", "F16", [2], struct.pack("<2H", 0x3C00, 0x4000)),
    ("bf", "BF16", [1], struct.pack("<H", 0x3F80)),
    ("mask", "BOOL", [3], bytes([1, 0, 1])),
    ("empty", "F32", [0, 4], b""),
], {"format": "pt"}))
write("safetensors", "ints", safetensors([
    ("a", "I32", [2], struct.pack("<2i", -1, 5)), ("b", "I16", [1], struct.pack("<h", 3)),
    ("c", "I8", [2], struct.pack("<2b", -2, 2)), ("d", "U8", [1], bytes([255])), ("e", "F64", [1], struct.pack("<d", 0.5)),
], pad=False))
write("safetensors", "empty_header", safetensors([]))
write("safetensors", "unknown_dtype", safetensors([("w", "F8_E4M3", [4], bytes(4))]))

write("jsonl", "prompt_completion", "\n".join(json.dumps({"prompt": f"{i}+{i}=", "completion": str(2 * i)})
                                              for i in range(4)) + "\n")
write("jsonl", "chat", json.dumps({"messages": [{"role": "system", "content": "be brief"},
                                                {"role": "user", "content": "héllo"},
                                                {"role": "assistant", "content": "hi 👋"}]}) + "\r\n\n")
write("jsonl", "preference", json.dumps({"prompt": "1+1=", "chosen": "2", "rejected": "3"}) + "\n[1]\n{\"a\": \n")

write("config", "minimal", 'plugin = "sft"\n[data]\ntrain = "t.jsonl"\n[batch]\nglobal_size = 8\n[train]\nmax_steps = 10\n')
write("config", "full", '''plugin = "sft"
seed = 3
output_dir = "runs/x"
[model]
vocab_size = 300
hidden_size = 64
num_heads = 4
num_kv_heads = 2
tie_word_embeddings = false
[tokenizer]
kind = "bytes"
chat_template = "custom"
chat_user_prefix = "U: "
chat_assistant_prefix = "A: "
chat_assistant_suffix = "{eos}"
[data]
train = "data/train.jsonl"
max_length = 128
on_error = "skip"
[batch]
global_size = 16
micro_tokens = 256
[optim]
name = "sgd"
lr = 1e-3
momentum = 0.9
[schedule]
name = "linear"
warmup_steps = 2
[train]
max_steps = 20
log_every = 5
max_consecutive_skips = 3
loss_spike_factor = 4.0
[checkpoint]
every_steps = 5
[module]
loss_agg = "sum"
beta = 0.5
group_size = 2
normalize = false
''')
write("config", "errors", 'plugin = 3\n[data]\ntrain = ["a"]\n[batch]\nglobal_size = 0\nmicro_szie = 1\n[optimizer]\n')

# A tiny byte-level BPE: the 256 GPT-2 byte symbols, two merges, one added token.
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


symbols = bytes_to_unicode()
vocab = {s: i for i, s in enumerate(symbols)}
vocab["Ġt"] = 256
vocab["Ġth"] = 257
tokenizer = {
    "version": "1.0",
    "added_tokens": [{"id": 258, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
              "merges": ["Ġ t", "Ġt h"]},
}
write("tokenizer", "byte_level_bpe.json", json.dumps(tokenizer, ensure_ascii=False))
nfc = dict(tokenizer, normalizer={"type": "NFC"},
           pre_tokenizer={"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]})
write("tokenizer", "sequence_nfc.json", json.dumps(nfc, ensure_ascii=False))

# SentencePiece-style (Llama 2 / Mistral v0.1 layout): characters, <0xNN> byte fallback, decoder chain.
sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
sp_vocab.update({"<0x%02X>" % b: 3 + b for b in range(256)})
sp_vocab.update({"\u2581": 259, "t": 260, "h": 261, "\u2581t": 262, "\u2581th": 263})
sentencepiece = {
    "version": "1.0",
    "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": None,
    "post_processor": None,
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "vocab": sp_vocab,
              "merges": [["\u2581", "t"], ["\u2581t", "h"]]},
}
write("tokenizer", "sentencepiece_bpe.json", json.dumps(sentencepiece, ensure_ascii=False))
metaspace = dict(sentencepiece, normalizer=None, pre_tokenizer={
    "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True})
write("tokenizer", "sentencepiece_metaspace.json", json.dumps(metaspace, ensure_ascii=False))
