"""Untrained instruction-template probe on the CLINC *val* dev suite (no training): the
prompt layout InBedder / InstEmb start from (untrained LoRA = the backbone, so this is the
step-0 dev score of a fresh run).

    .venv/bin/python scripts/instruction_template_probe.py backbone|alpaca|eol-after|eol-before
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from app.evaluation.dev import DevEvaluator
from embedders.base import PromptConfig
from embedders.baselines import PROMPTEOL, BackbonePromptEOLEmbedder
from embedders.methods.common import ALPACA_TEMPLATE
from embedders.methods.inbedder.config import InBedderConfig
from embedders.methods.inbedder.model import InBedderEmbedder


def _both(template: str, instruction_format: str) -> PromptConfig:
    return PromptConfig(query=template, document=template, instruction_format=instruction_format)


TEMPLATES = {
    "alpaca": _both(ALPACA_TEMPLATE, "{instruction}"),
    "eol-after": _both('This sentence : "{text}"\n{instruction} Answer in one word:"', "{instruction}"),
    "eol-before": _both('{instruction}\nThis sentence : "{text}" means in one word:"', "{instruction}"),
}


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    which = sys.argv[1]
    evaluate = DevEvaluator(Path("../shared/data"), "instruction")
    start = time.time()
    model: BackbonePromptEOLEmbedder | InBedderEmbedder
    if which == "backbone":
        model = BackbonePromptEOLEmbedder("backbone-prompteol", prompts=PROMPTEOL, max_length=96)
    else:
        # A template outside INSTRUCTION_TEMPLATES: set after the config derived its own.
        config = InBedderConfig(max_length=96)
        config.prompts = TEMPLATES[which]
        model = InBedderEmbedder(config)
    print(which, json.dumps(evaluate(model)), round(time.time() - start), flush=True)


if __name__ == "__main__":
    main()
