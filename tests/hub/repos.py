"""The small GPT-2 repo the Hub's tests serve from the fake Hub: its tables, its config.json,
and the bytes a load may send."""

from __future__ import annotations

import json
import struct

import numpy as np
from safetensors.numpy import save

from tests.fakehub import FakeHub

RNG = np.random.default_rng(0)
WPE = RNG.standard_normal((64, 16)).astype(np.float32)
WTE = RNG.standard_normal((100, 16)).astype(np.float32)
GPT2 = {"transformer.wpe.weight": WPE, "transformer.wte.weight": WTE}
CONFIG = json.dumps({"model_type": "gpt2", "n_positions": 64}).encode()
#: The revision API's answer and request headers' worth of slack in the bytes-sent budget.
OVERHEAD = 1024


def header_bytes(data: bytes) -> int:
    return 8 + struct.unpack("<Q", data[:8])[0]


def gpt2_repo(fake_hub: FakeHub, name: str = "acme/gpt2", **faults) -> bytes:
    weights = save(GPT2)
    fake_hub.add(name, {"config.json": CONFIG, "model.safetensors": weights}, **faults)
    return weights
