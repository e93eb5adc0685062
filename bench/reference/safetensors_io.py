"""Reads a .safetensors file into torch tensors without the safetensors package
(Debian's python3-torch has none), for the parity scripts."""
import json
import struct
from pathlib import Path

import torch

DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64}


def read_safetensors(path):
    data = Path(path).read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_size])
    body = data[8 + header_size :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[info["dtype"]]).view(info["shape"])
    return tensors
