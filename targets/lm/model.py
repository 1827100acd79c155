"""The tiny GPT-2 of the language-model targets and what is read from it: per-sequence losses and
per-token log-probabilities.

A Hugging Face ``GPT2LMHeadModel`` configured small (2 layers, width 128, 4 heads, 128 positions, no
dropout) over the byte vocabulary of :class:`targets.lm.tokenizer.ByteTokenizer`, trained from scratch (no
hub download). Input and output embeddings are untied (Opacus's ghost clipping refuses tied ones; untied,
every parameter has one per-example gradient); about 0.48 M parameters plus 256 per reserved id.

Two details make per-example clipping valid under Opacus (docs/references.md, "Language models"):
``position_ids`` are passed per example, shape ``(B, L)`` (the default ``(1, L)`` gives the position
embedding a per-example gradient of batch size 1), and the loss is the mean over the batch of each
sequence's mean token loss (:func:`sequence_losses`), not Hugging Face's ``labels=`` loss, which averages
over all tokens of the batch and so couples the examples (one example's gradient then depends on the
others' lengths). Sequences are right-padded and need no attention mask: causal attention never lets a
real token see the padding after it, and padded positions are left out of the loss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from targets.lm.tokenizer import ByteTokenizer

__all__ = ["build_model", "model_device", "padded_batch", "sequence_losses", "token_logprobs", "token_moments",
           "logprob_function", "N_LAYER", "N_EMBD", "N_HEAD"]

N_LAYER, N_EMBD, N_HEAD = 2, 128, 4


def build_model(tokenizer: ByteTokenizer, seed: int) -> torch.nn.Module:
    """A freshly initialised tiny ``GPT2LMHeadModel`` (module docstring), its weights drawn from ``seed`` on a fork
    of torch's generator: the caller's generator state is left as it was, so a training that seeds torch and then
    builds the model keeps its own seed for what follows (Opacus's noise draws from it; resetting it here made
    the noise the same at every seed, issue 50)."""
    # optional dependency (the lm extra)
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=tokenizer.vocab_size, n_positions=tokenizer.max_length, n_embd=N_EMBD,
                        n_layer=N_LAYER, n_head=N_HEAD, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=tokenizer.bos, eos_token_id=tokenizer.eos,
                        tie_word_embeddings=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return GPT2LMHeadModel(config)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device ``model``'s parameters are on (its batches go there)."""
    return next(model.parameters()).device


def padded_batch(tokenizer: ByteTokenizer, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids ``(N, L)`` right-padded with ``PAD`` and the mask ``(N, L)`` of real tokens."""
    encoded = [tokenizer.encode(t) for t in texts]
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), tokenizer.pad, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.bool)
    for row, e in enumerate(encoded):
        ids[row, : len(e)] = torch.tensor(e)
        mask[row, : len(e)] = True
    return ids, mask


def _token_nll(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Negative log-probability of each next token ``(B, L-1)`` and the mask of those that count."""
    positions = torch.arange(ids.shape[1], device=ids.device).expand(ids.shape[0], -1)  # per example: (B, L)
    logits = model(input_ids=ids, position_ids=positions).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                            reduction="none").reshape(ids.shape[0], -1)
    return nll, mask[:, 1:]


def sequence_losses(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each sequence's mean next-token loss ``(B,)``: one example's loss depends on that example only."""
    nll, counted = _token_nll(model, ids, mask)
    return (nll * counted).sum(dim=1) / counted.sum(dim=1).clamp(min=1)


@torch.no_grad()
def _per_text(model: torch.nn.Module, tokenizer: ByteTokenizer, texts: Sequence[str], batch_size: int,
              moments: bool) -> list[np.ndarray]:
    model.eval()
    device = model_device(model)
    out: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        ids, mask = (t.to(device) for t in padded_batch(tokenizer, texts[start: start + batch_size]))
        if moments:
            positions = torch.arange(ids.shape[1], device=device).expand(ids.shape[0], -1)
            logp = torch.log_softmax(model(input_ids=ids, position_ids=positions).logits[:, :-1].double(), dim=-1)
            mean = (logp.exp() * logp).sum(-1)
            values = torch.stack([mean, ((logp.exp() * logp**2).sum(-1) - mean**2).clamp(min=0).sqrt()], dim=-1)
        else:
            values = -_token_nll(model, ids, mask)[0].double()
        values, counted = values.cpu(), mask[:, 1:].cpu()
        out.extend(values[row][counted[row]].numpy() for row in range(len(ids)))
    return out


def token_logprobs(model: torch.nn.Module, tokenizer: ByteTokenizer, texts: Sequence[str],
                   batch_size: int = 256) -> list[np.ndarray]:
    """For each text, ``log p(token_t | tokens_<t)`` of every token after ``BOS`` (``EOS`` included), float64."""
    return _per_text(model, tokenizer, texts, batch_size, moments=False)


def token_moments(model: torch.nn.Module, tokenizer: ByteTokenizer, texts: Sequence[str],
                  batch_size: int = 256) -> list[np.ndarray]:
    """For each text, ``(T, 2)``: the mean and standard deviation of ``log p(z | tokens_<t)`` over
    ``z ~ p(. | tokens_<t)`` at every position :func:`token_logprobs` scores (what Min-K%++ normalises by,
    Zhang et al. 2025, Eq. 2), float64."""
    return _per_text(model, tokenizer, texts, batch_size, moments=True)


def logprob_function(model: torch.nn.Module, tokenizer: ByteTokenizer) -> Callable[[Sequence[str]], list[np.ndarray]]:
    """The trained model as what an LM audit reads: texts in, per text the array of its tokens'
    log-probabilities out (:func:`token_logprobs`)."""
    def logprobs(texts: Sequence[str]) -> list[np.ndarray]:
        return token_logprobs(model, tokenizer, list(texts))

    return logprobs
