"""posviz.io.config_json: config.json's bytes parsed as an object, bounded in size and depth
before parsing, non-finite numbers kept for the scheme to refuse."""

from __future__ import annotations

import json

import pytest

from posviz.embedding import LoadError
from posviz.io.config_json import parse_config
from posviz.schemes.config import position_scheme


def test_bad_config_files_refused():
    nan = parse_config(b'{"rope_theta": NaN, "hidden_size": 64, "num_attention_heads": 4}')
    with pytest.raises(LoadError, match="finite"):
        position_scheme(nan)
    with pytest.raises(LoadError, match="50,000,0"):
        parse_config(b" " * 50_000_000)
    with pytest.raises(LoadError, match="deeper than 32"):
        parse_config(b'{"a": ' * 10_000 + b"1" + b"}" * 10_000)
    assert parse_config(json.dumps({"s": "[[[[" * 20}).encode()) == {"s": "[[[[" * 20}
    with pytest.raises(LoadError, match="not valid JSON"):
        parse_config(b"{")
    with pytest.raises(LoadError, match="JSON list"):
        parse_config(b"[1]")
