"""Untrained instruction-template probe on the CLINC *val* dev suite (no training): the
prompt layout InBedder / InstEmb start from (untrained LoRA = the backbone, so this is the
step-0 dev score of a fresh run).

    .venv/bin/python scripts/instruction_template_probe.py backbone|alpaca|eol-after|eol-before \
        [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from app.evaluation.dev import DevEvaluator
from app.settings import get_settings
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", choices=("backbone", *TEMPLATES),
                        help="backbone: backbone-prompteol as it is; otherwise the untrained InBedder "
                             "with that prompt template")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="datasets root (default: the settings' shared_data_dir, FACET_SHARED_DATA_DIR)")
    args = parser.parse_args(argv)
    which = args.which
    torch.set_num_threads(1)
    torch.manual_seed(0)
    # The settings' folder, not ../shared/data (which ignored FACET_SHARED_DATA_DIR and the
    # working directory the script is run from).
    evaluate = DevEvaluator(args.data_dir or get_settings().shared_data_dir, "instruction")
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
