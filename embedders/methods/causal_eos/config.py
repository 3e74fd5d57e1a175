"""Configuration of the Causal-EOS baseline."""

from __future__ import annotations

from dataclasses import dataclass

from embedders.methods.corpus import CorpusConfig


@dataclass
class CausalEOSConfig(CorpusConfig):
    """Causal-EOS: the decoder pooled at its last token, the papers' fair baseline.

    With ``template="prompteol"`` (default) the last token is the template's closing
    quote; with ``template="eos"`` it is an appended EOS. ``temperature`` is the InfoNCE
    tau (the same as Causal2Vec's, so the comparison is fair).
    """
