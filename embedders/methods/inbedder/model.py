"""InBedder model.

Training makes the decoder answer ``(input, instruction)`` with a short answer
(causal-LM loss on the answer tokens only). Because the answers are short and free of
stopwords, the state that predicts the first answer token has to carry what the
answer will be about: that state, conditioned on the instruction, is the embedding
(``1st-gen``). ``avg-gen`` also averages the states of a few greedily generated
answer tokens (one prefill plus one cached step per token). The same greedy decoding
produces the answers that explain clusters (``embedders.explain``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from embedders.backbone import cache_argument, returned_cache
from embedders.base import (
    PromptTokenizer,
    Role,
    TokenBatch,
    pad_sequences,
    validate_instruction,
    validate_texts,
)
from embedders.contract import BlendsInstruction
from embedders.errors import InvalidInputError
from embedders.methods.common import TrainableDecoderEmbedder, quotes_text, text_reader, without_double_quotes
from embedders.methods.inbedder.config import POOLINGS, InBedderConfig
from embedders.pooling import blend_instruction, last_token_pool, pooled_pairs

if TYPE_CHECKING:  # only a type here: importing the method must not pull in the training data code
    from embedders.training.instruct_data import TripleBatch

IGNORE_INDEX = -100  # label of tokens the loss skips (cross_entropy's default ignore_index)


class InBedderEmbedder(BlendsInstruction, TrainableDecoderEmbedder):
    """InBedder over a LoRA-tuned decoder; ``pooling`` and ``gen_tokens`` are inference options.
    Read bare, a text is read under ``default_instruction``: its vectors under another
    instruction blend those in (``InBedderConfig.instruction_weight``), so given them it computes
    them reading each text under the instruction only (``encode_from_plain``)."""

    method = "inbedder"
    config_class = InBedderConfig
    # settable at load time: "path[pooling=avg-gen]"
    OPTIONS = ("pooling", "gen_tokens", "max_length", "instruction_weight", "text_quotes")
    config: InBedderConfig

    def __init__(self, config: InBedderConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config or InBedderConfig(), **kwargs)

    def _set_tokenizer(self) -> None:
        super()._set_tokenizer()
        self._tokenize.text_reading = text_reader(self)
        # Training sequences are prompt + answer + EOS and must fit max_length, so the
        # prompt gets what the answer budget leaves (the config guarantees at least half).
        self._train_tokenize = PromptTokenizer(
            self.backbone.tokenizer, self.prompts, self.max_length - self.config.answer_max_tokens - 1,
            text_reading=text_reader(self),
        )

    # -- inference options -------------------------------------------------------------

    @property
    def pooling(self) -> str:
        return self.config.pooling

    @pooling.setter
    def pooling(self, value: str) -> None:
        if value not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {value!r}")
        self.config.pooling = value

    @property
    def gen_tokens(self) -> int:
        return self.config.gen_tokens

    @gen_tokens.setter
    def gen_tokens(self, k: int) -> None:
        if k < 1:
            raise ValueError(f"gen_tokens must be >= 1, got {k}")
        self.config.gen_tokens = k

    def _instruction(self, instruction: str | None) -> str:
        """The instruction to render: the model was trained with one, so never none."""
        return validate_instruction(instruction) or self.config.default_instruction

    # -- embedding -----------------------------------------------------------------------

    def _document_reading(self) -> tuple[Role, str | None]:
        return Role.DOCUMENT, self.config.default_instruction  # ``_instruction(None)``

    def rendered_instruction(self, instruction: str | None) -> str | None:
        return self._instruction(validate_instruction(instruction))

    def reads_bare(self, instruction: str | None) -> bool:
        """No instruction, or the default one, is read as the default."""
        return self._instruction(validate_instruction(instruction)) == self.config.default_instruction

    def _embed_batch(self, texts: list[str], role: Role, instruction: str | None) -> torch.Tensor:
        instruction_ = self._instruction(instruction)
        default = self.config.default_instruction
        if instruction_ == default:
            return self._answer_state(texts, role, instruction_)
        # A blend reads each text under both instructions, both in shared passes.
        def both() -> tuple[torch.Tensor, torch.Tensor]:
            plain = self._tokenize(texts, role, default)
            under = self._tokenize(texts, role, instruction_)
            # Each text counts once in the truncation warning ("12 of 16 texts" for 6 of 8): as
            # cut under the longer of the two prompts, which cuts every text the other does.
            self._warn_truncated(max(plain.truncated, under.truncated), len(texts), self.max_length)
            return pooled_pairs(plain.sequences, under.sequences, self._pooled_answer)
        return blend_instruction(self.config.instruction_weight,
                                 lambda: self._answer_state(texts, role, default),
                                 lambda: self._answer_state(texts, role, instruction_), both)

    def _answer_state(self, texts: list[str], role: Role, instruction_: str) -> torch.Tensor:
        """The pooled answer state of ``texts`` under one (rendered) instruction."""
        return self._pooled_answer(self._prompt_ids(texts, role, instruction_))

    def _prompt_ids(self, texts: list[str], role: Role, instruction_: str) -> list[list[int]]:
        tokens = self._tokenize(texts, role, instruction_)
        self._warn_truncated(tokens.truncated, len(texts), self.max_length)
        return tokens.sequences

    def _pooled_answer(self, sequences: Sequence[Sequence[int]]) -> torch.Tensor:
        """The pooled answer states of tokenised prompts (one prefill, plus decoding for avg-gen)."""
        pad = self.backbone.tokenizer.pad_token_id
        if self.config.pooling == "1st-gen":
            ids, mask = pad_sequences(sequences, pad, self.padding_side, self.device)
            return last_token_pool(self.hidden_states(TokenBatch(ids, mask)), mask)
        # Rows that finish early only wait for the others: their later states do not count.
        ids, mask = pad_sequences(sequences, pad, "left", self.device)
        states, counted, _ = self.greedy_decode(TokenBatch(ids, mask), self.config.gen_tokens)
        weights = counted.to(states.dtype).unsqueeze(-1)  # (batch, steps + 1, 1)
        return (states * weights).sum(dim=1) / weights.sum(dim=1)

    def _left_batch(self, texts: list[str], role: Role, instruction: str) -> TokenBatch:
        """Prompts padded on the left whatever ``padding_side`` says: generation appends
        tokens at the end of every row, which needs every row to end in the last column."""
        tokens = self._tokenize(texts, role, instruction)
        self._warn_truncated(tokens.truncated, len(texts), self.max_length)
        ids, mask = pad_sequences(tokens.sequences, self.backbone.tokenizer.pad_token_id, "left", self.device)
        return TokenBatch(ids, mask, tokens.truncated)

    def greedy_decode(self, batch: TokenBatch, steps: int, *, final_state: bool = True,
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Greedily generate up to ``steps`` tokens after left-padded prompts, with the KV cache.

        Args:
            batch: left-padded prompts.
            steps: tokens to generate (>= 1).
            final_state: also run the last generated token through the model to get its
                state (``avg-gen`` needs it; answer generation does not).

        Returns:
            states: (batch, n, hidden) last-layer states; column 0 is the last prompt token,
                column i the i-th generated token. ``n`` is at most ``steps + 1``: decoding
                stops early once every row has produced EOS.
            counted: (batch, n) bool, True where the state belongs to the answer: the
                prompt state and generated tokens before the row's EOS.
            tokens: (batch, m) generated ids; after a row's EOS, EOS again.
        """
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        body = self.backbone.base_model()
        lm_head = self.backbone.model.get_output_embeddings()
        eos = self.backbone.tokenizer.eos_token_id
        mask = batch.attention_mask
        positions = batch.position_ids()
        out = body(input_ids=batch.input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
        cache = returned_cache(out)
        state = last_token_pool(out.last_hidden_state, mask)  # (batch, hidden)
        next_pos = positions.max(dim=1).values  # (batch,) position of each row's last prompt token
        ones = mask.new_ones(mask.shape[0], 1)
        done = torch.zeros(mask.shape[0], dtype=torch.bool, device=mask.device)
        states, counted, tokens = [state], [~done], []
        for step in range(steps):
            token = lm_head(state).argmax(dim=-1)  # (batch,)
            token = torch.where(done, torch.full_like(token, eos), token)
            tokens.append(token)
            done = done | (token == eos)
            # Stopping when all rows are done changes nothing: later states would not count.
            if bool(done.all()) or (step == steps - 1 and not final_state):
                break
            mask = torch.cat([mask, ones], dim=1)
            next_pos = next_pos + 1
            out = body(input_ids=token.unsqueeze(1), attention_mask=mask, position_ids=next_pos.unsqueeze(1),
                       use_cache=True, **cache_argument(body, cache))
            cache = returned_cache(out)
            state = out.last_hidden_state[:, -1]
            states.append(state)
            counted.append(~done)
        return torch.stack(states, dim=1), torch.stack(counted, dim=1), torch.stack(tokens, dim=1)

    def generate_answers(self, texts: Sequence[str], instruction: str | None, max_new_tokens: int | None = None,
                         batch_size: int = 16) -> list[str]:
        """Greedy short answers to ``instruction`` about each text (what explanations are made of).

        Args:
            texts: the inputs.
            instruction: the question asked of every text; None uses ``default_instruction``.
            max_new_tokens: answer length cap; None uses ``answer_max_tokens``.
            batch_size: texts decoded together.

        Returns:
            One decoded, stripped answer per text, in input order (empty if the model
            answers with EOS at once).

        Raises:
            InvalidInputError: texts not a list of strings, or a bad length / batch size.
        """
        items = validate_texts(texts)
        if quotes_text(self.prompts):
            # A template that quotes the text (PromptEOL's ``"{text}" means in one word:"``):
            # a double quote inside the text closes the template's own, and the model answered
            # EOS at once: 17 of the 32 CLINC test texts with one (`tell mom "i love you`) had
            # an empty answer, said nowhere. Read without them, each of those was answered,
            # whatever ``text_quotes`` the embeddings read with.
            items = [without_double_quotes(t) for t in items]
        instruction_ = self._instruction(validate_instruction(instruction))
        steps = self.config.answer_max_tokens if max_new_tokens is None else max_new_tokens
        if not isinstance(steps, int) or steps < 1:
            raise InvalidInputError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInputError(f"the batch size must be a positive whole number, got {batch_size!r}")
        tokenizer = self.backbone.tokenizer
        eos = tokenizer.eos_token_id
        answers = [""] * len(items)
        # Longest first, as in encode: similar lengths share a batch and need less padding.
        order = sorted(range(len(items)), key=lambda i: -len(items[i]))
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                batch = self._left_batch([items[i] for i in idx], Role.DOCUMENT, instruction_)
                _, _, generated = self.greedy_decode(batch, steps, final_state=False)
                for row, i in zip(generated.tolist(), idx, strict=True):
                    ids = row[: row.index(eos)] if eos in row else row
                    answers[i] = tokenizer.decode(ids, skip_special_tokens=True).strip()
        return answers

    # -- training ------------------------------------------------------------------------

    def training_prompt_length(self, instruction: str) -> int:
        """Tokens of ``max_length`` a training input read under ``instruction`` does not get (the
        prompt with the instruction, and the answer's room): ``facet train`` leaves out a
        question that leaves its input none."""
        return (self.max_length - self._train_tokenize.max_length
                + self._train_tokenize.prompt_length(Role.DOCUMENT, self._instruction(instruction)))

    def build_lm_batch(self, inputs: Sequence[str], instructions: Sequence[str],
                       answers: Sequence[str]) -> TokenBatch:
        """Token ids of ``prompt + " " + answer + EOS`` with labels in ``extras["labels"]``.

        Labels copy the answer tokens and the EOS (so the model learns to stop);
        prompt tokens and padding get -100 and cost nothing. The answer is cut to
        ``answer_max_tokens``; the input text to what is left of ``max_length``.

        Raises:
            ValueError: the three lists are empty or of different lengths.
        """
        n = len(inputs)
        if n == 0:
            raise ValueError("an InBedder training batch needs at least one (input, instruction, answer) triple")
        if len(instructions) != n or len(answers) != n:
            raise ValueError(
                f"inputs, instructions and answers must have the same length, got "
                f"{n}, {len(instructions)} and {len(answers)}"
            )
        tokenizer = self.backbone.tokenizer
        eos = tokenizer.eos_token_id
        # Training batches mix instructions: each input is read under its own.
        tokens = self._train_tokenize.each(inputs, Role.DOCUMENT, [self._instruction(i) for i in instructions])
        prompts, truncated = tokens.sequences, tokens.truncated
        self._warn_truncated(truncated, n, self._train_tokenize.max_length)
        sequences: list[list[int]] = []
        labels: list[list[int]] = []
        for prompt, answer in zip(prompts, answers, strict=True):
            # The answer starts right after the prompt, led as the template wants (a space
            # after "Response:", nothing after PromptEOL's opening quote).
            text = answer.strip()
            answer_ids = (list(tokenizer(self.config.answer_lead + text, add_special_tokens=False)["input_ids"])
                          if text else [])
            target = [*answer_ids[: self.config.answer_max_tokens], eos]
            sequences.append(prompt + target)
            labels.append([IGNORE_INDEX] * len(prompt) + target)
        ids, mask = pad_sequences(sequences, tokenizer.pad_token_id, self.padding_side, self.device)
        label_ids, _ = pad_sequences(labels, IGNORE_INDEX, self.padding_side, self.device)
        return TokenBatch(ids, mask, truncated, extras={"labels": label_ids})

    def training_loss(self, batch: TripleBatch) -> tuple[torch.Tensor, dict[str, float]]:
        """Causal-LM cross-entropy over the answer tokens (+ EOS) of every triple in the batch."""
        lm_batch = self.build_lm_batch(batch.inputs, batch.instructions, batch.answers)
        hidden = self.hidden_states(lm_batch)  # (batch, seq, hidden)
        # The state at position t predicts token t + 1; only answer targets are scored, so the
        # vocabulary-sized logits are computed for those few positions alone.
        targets = lm_batch.extras["labels"][:, 1:]
        scored = targets != IGNORE_INDEX
        lm_head = self.backbone.model.get_output_embeddings()
        logits = lm_head(hidden[:, :-1][scored]).float()  # (answer tokens, vocab)
        loss = torch.nn.functional.cross_entropy(logits, targets[scored])
        return loss, {"loss": float(loss.detach())}
