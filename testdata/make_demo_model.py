"""Builds ``testdata/bert_tiny.pb``: the small BERT-like model ``make demo`` converts.

A TF1-style BERT encoder (2 layers, hidden 64, 4 heads, vocabulary 512, sequence 32) with the scope names
google-research/bert uses (``bert/encoder/layer_0/attention/self/...``), frozen to a GraphDef with seeded
random weights. Run with the project's venv: ``.venv/bin/python testdata/make_demo_model.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.models.tf_models import bert_encoder_tf1  # noqa: E402

CONFIG = dict(num_layers=2, hidden=64, heads=4, intermediate=256, vocab=512, seq=32, max_position=64)


def main() -> None:
    target = HERE / "bert_tiny.pb"
    target.write_bytes(bert_encoder_tf1(**CONFIG))
    print(f"wrote {target} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
