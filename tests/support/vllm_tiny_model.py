"""A tiny random-weight Llama and a tokenizer trained here, for a real vLLM to serve.

Run with the vLLM venv's python (it needs torch, transformers, tokenizers):
``python tests/support/vllm_tiny_model.py OUT_DIR``. Nothing is downloaded: the tokenizer is a
byte-level BPE trained on a few generated sentences, the weights are seeded random.
vLLM's CPU attention needs head_dim ≥ 32 (here 128 / 4 heads = 32).
"""

from __future__ import annotations

import sys
from pathlib import Path

WORDS = (
    "the engine decodes tokens while the cluster waits for a draft of the next step and "
    "every node reports its queue its cache and its power to the monitor that reads them"
).split()
VOCAB_SIZE = 512


def corpus() -> list[str]:
    # deterministic sentences: word n-grams the BPE merges into a small vocabulary
    lines = []
    for i in range(400):
        lines.append(" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12)))
    return lines


def build(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out)

    torch.manual_seed(33)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=128, intermediate_size=256,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=32,
        max_position_embeddings=1024, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
        tie_word_embeddings=False, torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    build(Path(sys.argv[1]))
    print(sys.argv[1])
