"""InstEmb model.

Student input: [prompt(input, instruction); L learnable look-ahead embeddings]. The
look-ahead positions sit where the answer would start, so after training their
states anticipate the answer to the instruction; the embedding pools them with the
last input token (DAAP), in one forward pass and without decoding.

Training (``training_loss``):

* a frozen teacher, the same backbone with the LoRA adapters switched off, reads
  the prompt followed by the gold answer; look-ahead state j is distilled onto the
  teacher's state at answer token j (the last answer token for j beyond the answer),
  with MSE on normalised states (``mse-centered``: after removing each side's batch-mean
  state) or KL between the LM-head distributions;
* a multi-view supervised contrastive loss at the last input token (``contrastive_on``:
  ``served`` moves it onto the pooled embedding), over four views
  of each example (student; student again, under another LoRA-dropout mask; teacher;
  the student reading the answer alone as its input), examples with the same answer
  being positives.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import torch
from torch import nn

from embedders.base import PromptTokenizer, Role, pad_sequences, validate_instruction
from embedders.errors import InvalidInputError
from embedders.losses import distill_kl, distill_mse, supervised_contrastive
from embedders.methods.common import TrainableDecoderEmbedder, text_reader
from embedders.methods.instemb.config import InstEmbConfig
from embedders.pooling import gather_positions, mean_pool


class LookAhead(nn.Module):
    """L learnable input embeddings, initialised near the embedding table's mean."""

    def __init__(self, table: torch.Tensor, count: int, seed: int = 0) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        mean = table.detach().float().mean(dim=0).cpu()
        std = table.detach().float().std().item()
        noise = torch.randn(count, table.shape[1], generator=gen) * std
        self.embeddings = nn.Parameter(mean + noise)

    def forward(self) -> torch.Tensor:
        return self.embeddings


class StudentStates(NamedTuple):
    """The student's states that the poolings draw on."""

    last_input: torch.Tensor  # (batch, hidden), the last prompt token
    look_ahead: torch.Tensor  # (batch, L, hidden)
    hidden: torch.Tensor  # (batch, seq, hidden), every position (all-mean averages them)
    mask: torch.Tensor  # (batch, seq), 1 at prompt and look-ahead positions


class InstEmbEmbedder(TrainableDecoderEmbedder):
    """InstEmb over a LoRA-tuned decoder; ``pooling`` is settable at load time."""

    method = "instemb"
    config_class = InstEmbConfig
    config: InstEmbConfig
    OPTIONS = ("pooling", "max_length", "text_quotes")  # "path[pooling=input-last]"

    def __init__(self, config: InstEmbConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config or InstEmbConfig(), **kwargs)

    def _set_tokenizer(self) -> None:
        tok = self.backbone.tokenizer
        # Room is kept for the look-ahead tokens inside max_length.
        self._tokenize = PromptTokenizer(tok, self.prompts, self.max_length - self.config.look_ahead,
                                         empty_ids=[tok.eos_token_id], text_reading=text_reader(self))

    def _build_heads(self) -> None:
        table = self.backbone.model.get_input_embeddings().weight
        self.heads["look_ahead"] = LookAhead(table, self.config.look_ahead)

    # -- forward -----------------------------------------------------------------------

    def _sequences(self, texts: list[str], instructions: list[str]) -> list[list[int]]:
        """Prompt token ids per text, each under its own instruction."""
        tokens = self._tokenize.each(texts, Role.QUERY, instructions)
        self._warn_truncated(tokens.truncated, len(texts), self.max_length)
        return tokens.sequences

    def student_states(self, texts: list[str], instructions: list[str]) -> StudentStates:
        """The student's states (last input, look-ahead, all positions) for each text under its instruction."""
        seqs = self._sequences(texts, instructions)
        count = self.config.look_ahead
        pad_id = self.backbone.tokenizer.pad_token_id
        ids, mask = pad_sequences([[*s, *([pad_id] * count)] for s in seqs], pad_id, self.padding_side, self.device)
        width = ids.shape[1]
        starts = torch.tensor([(width - len(s) - count if self.padding_side == "left" else 0) + len(s) for s in seqs],
                              device=self.device)  # first look-ahead position per row
        offsets = torch.arange(count, device=self.device)
        look_pos = starts.unsqueeze(1) + offsets  # (batch, L)
        inputs = self.backbone.model.get_input_embeddings()(ids)
        look = self.heads["look_ahead"]().to(device=inputs.device, dtype=inputs.dtype)  # (L, hidden)
        rows = torch.arange(len(seqs), device=self.device).unsqueeze(1)
        inputs = inputs.index_put((rows.expand_as(look_pos), look_pos), look.expand(len(seqs), -1, -1))
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        hidden = self.backbone.base_model()(inputs_embeds=inputs, attention_mask=mask, position_ids=positions,
                                            use_cache=False).last_hidden_state
        return StudentStates(gather_positions(hidden, starts - 1), hidden[rows, look_pos], hidden, mask)

    def pool(self, states: StudentStates) -> torch.Tensor:
        if self.config.pooling == "input-last":
            return states.last_input
        if self.config.pooling == "special-mean":
            return states.look_ahead.mean(dim=1)
        if self.config.pooling == "all-mean":
            return mean_pool(states.hidden, states.mask)
        return 0.5 * (states.last_input + states.look_ahead.mean(dim=1))

    def _document_reading(self) -> tuple[Role, str | None]:
        return Role.QUERY, self.config.default_instruction  # every text as ``_sequences`` reads it

    def rendered_instruction(self, instruction: str | None) -> str | None:
        return validate_instruction(instruction) or self.config.default_instruction

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        if instruction:
            return self.pool(self.student_states(texts, [instruction] * len(texts)))
        default = self.config.default_instruction
        try:
            return self.pool(self.student_states(texts, [default] * len(texts)))
        except InvalidInputError as e:
            if not str(e).startswith("the instruction is too long"):
                raise
            # No instruction was given: "shorten the instruction" named one the caller never
            # gave (instemb[max_length=20]); the default's room is max_length's to give.
            least = self._tokenize.least_max_length(Role.QUERY, default) + self.config.look_ahead
            raise InvalidInputError(
                f"max_length={self.max_length} is too short for {self.name} to read a text under "
                f"its default instruction {default!r} (read when none is given): give max_length "
                f"{least} or more") from None

    # -- training ----------------------------------------------------------------------

    def training_prompt_length(self, instruction: str) -> int:
        """Tokens of ``max_length`` a training text read under ``instruction`` does not get (the
        prompt with the instruction, and the look-ahead tokens): ``facet train`` leaves out a
        question that leaves its text none."""
        return self.max_length - self._tokenize.max_length + self._tokenize.prompt_length(Role.QUERY, instruction)

    def answer_ids(self, answers: list[str]) -> list[list[int]]:
        """Gold answer tokens the teacher reads: " answer" + EOS, at most answer_max_tokens."""
        tok = self.backbone.tokenizer
        out = []
        for answer in answers:
            ids = list(tok(self.config.answer_lead + answer.strip(), add_special_tokens=False)["input_ids"])
            out.append([*ids[: self.config.answer_max_tokens - 1], tok.eos_token_id])
        return out

    def teacher_states(self, texts: list[str], instructions: list[str],
                       answers: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The frozen teacher (adapters off, no gradient) on prompt + gold answer.

        Returns:
            (last input token states (batch, hidden), distillation targets (batch, L, hidden):
            the state at answer token j, or at the last answer token when j is past it,
            and the targets' LM-head logits (batch, L, vocab)).
        """
        prompts = self._sequences(texts, instructions)
        answers_ids = self.answer_ids(answers)
        seqs = [p + a for p, a in zip(prompts, answers_ids, strict=True)]
        pad_id = self.backbone.tokenizer.pad_token_id
        ids, mask = pad_sequences(seqs, pad_id, self.padding_side, self.device)
        width = ids.shape[1]
        count = self.config.look_ahead
        starts, targets = [], []
        for p, a, s in zip(prompts, answers_ids, seqs, strict=True):
            base = (width - len(s) if self.padding_side == "left" else 0) + len(p)
            starts.append(base)
            targets.append([base + min(j, len(a) - 1) for j in range(count)])
        start_t = torch.tensor(starts, device=self.device)
        target_t = torch.tensor(targets, device=self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        peft_model = self.backbone.model
        # With --lora-r 0 there is no adapter (only the look-ahead embeddings train): the frozen
        # backbone is the teacher as it is ("no attribute 'disable_adapter'" at the first step).
        no_adapter = getattr(peft_model, "disable_adapter", contextlib.nullcontext)
        with torch.no_grad(), no_adapter():
            hidden = self.backbone.base_model()(input_ids=ids, attention_mask=mask, position_ids=positions,
                                                use_cache=False).last_hidden_state
            rows = torch.arange(len(seqs), device=self.device).unsqueeze(1)
            target_states = hidden[rows, target_t]
            logits = peft_model.get_output_embeddings()(target_states)
        return gather_positions(hidden, start_t - 1), target_states, logits

    def training_loss(self, batch: Any) -> tuple[torch.Tensor, dict[str, float]]:
        texts, instructions, answers = batch.inputs, batch.instructions, batch.answers
        first = self.student_states(texts, instructions)
        second = self.student_states(texts, instructions)  # another LoRA-dropout mask
        answer = self.student_states(answers, instructions)
        teacher_last, target_states, target_logits = self.teacher_states(texts, instructions, answers)
        look_1 = first.look_ahead
        if self.config.distill == "kl":
            student_logits = self.backbone.model.get_output_embeddings()(look_1)
            distill = distill_kl(student_logits, target_logits)
        else:
            distill = distill_mse(look_1, target_states, center=self.config.distill == "mse-centered")
        label_ids = {a: i for i, a in enumerate(dict.fromkeys(answers))}
        labels = torch.tensor([label_ids[a] for a in answers], device=self.device).repeat(4)
        teacher_last = teacher_last.to(look_1.dtype)
        if self.config.contrastive_on == "served":
            targets = target_states.to(look_1.dtype)
            # The teacher keeps only its last input state and the targets, so under all-mean its
            # view averages those L + 1 states rather than every prompt position.
            kept = torch.cat([teacher_last.unsqueeze(1), targets], dim=1)
            ones = torch.ones(kept.shape[:2], device=kept.device)
            teacher_view = self.pool(StudentStates(teacher_last, targets, kept, ones))
            views = torch.cat([self.pool(first), self.pool(second), teacher_view, self.pool(answer)], dim=0)
        else:
            views = torch.cat([first.last_input, second.last_input, teacher_last, answer.last_input], dim=0)
        contrastive = supervised_contrastive(views, labels, temperature=self.config.temperature)
        loss = self.config.distill_weight * distill + self.config.contrastive_weight * contrastive
        return loss, {"loss": float(loss.detach()), "distill": float(distill.detach()),
                      "contrastive": float(contrastive.detach())}
