"""A tiny random-weight DeepseekV3ForCausalLM (MLA + MoE) with one MTP layer, for a real
vLLM to serve with MTP speculative decoding — the closest to DeepInfer that runs here.

Run with the vLLM venv's python: ``python tests/support/vllm_tiny_deepseek.py OUT_DIR``. Nothing is
downloaded (the tokenizer is trained here, `vllm_tiny_model.corpus`). vLLM's CPU MLA
backend takes one head size only: kv_lora_rank + qk_rope_head_dim = 512 + 64.

The MTP layer's weights sit under ``model.layers.{num_hidden_layers}.*`` (enorm, hnorm,
eh_proj, shared_head, a MoE block). Random weights would accept no draft; the layer is
made close to identity instead — eh_proj passes the previous hidden state through, the
block's output projections are zero (its residual carries the input), the shared head is
the model's own norm and head — so its draft is the main model's own next guess, which a
random model's repetitive output often confirms.

With ``--disagree`` the MTP layer's eh_proj scrambles the hidden state it passes on (a
fixed random permutation of its dimensions, sign-flipped): vLLM shares the target's
lm_head with the MTP layer (`_maybe_share_lm_head`), so the head cannot be changed, but a
scrambled hidden state makes its draft an unrelated token, which the target rarely
confirms — a drafter that stopped matching its target (issue 43).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.vllm_tiny_model import VOCAB_SIZE, corpus

LAYERS = 2


def build(out: Path, disagree: bool = False) -> None:
    import torch
    from safetensors.torch import load_file, save_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out)

    torch.manual_seed(33)
    common = dict(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=256, intermediate_size=512,
        moe_intermediate_size=128, num_attention_heads=4, num_key_value_heads=4,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1,
        first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=512, qk_rope_head_dim=64,
        qk_nope_head_dim=64, v_head_dim=64, max_position_embeddings=1024, rope_scaling=None,
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, tie_word_embeddings=False,
    )
    # one layer more than served: transformers builds it, it becomes the MTP layer's block
    model = DeepseekV3ForCausalLM(DeepseekV3Config(num_hidden_layers=LAYERS + 1, **common))
    model.save_pretrained(out, safe_serialization=True)
    weights_path = next(out.glob("*.safetensors"))
    weights = load_file(weights_path)
    hidden = common["hidden_size"]
    mtp = f"model.layers.{LAYERS}."
    for name in list(weights):
        if name.startswith(mtp) and (name.endswith("o_proj.weight") or name.endswith("down_proj.weight")):
            weights[name] = torch.zeros_like(weights[name])  # the block adds ~nothing
    weights[mtp + "enorm.weight"] = torch.ones(hidden)
    weights[mtp + "hnorm.weight"] = torch.ones(hidden)
    passed = torch.eye(hidden)
    if disagree:
        passed = -passed[torch.randperm(hidden, generator=torch.Generator().manual_seed(43))]
    weights[mtp + "eh_proj.weight"] = torch.cat([torch.zeros(hidden, hidden), passed], dim=1)
    weights[mtp + "shared_head.norm.weight"] = weights["model.norm.weight"].clone()
    weights[mtp + "shared_head.head.weight"] = weights["lm_head.weight"].clone()
    save_file({k: v.contiguous() for k, v in weights.items()}, str(weights_path), metadata={"format": "pt"})
    for index in out.glob("*.index.json"):
        index.unlink()  # one shard: no index
    config = json.loads((out / "config.json").read_text())
    # DeepSeek-V3 routing: sigmoid scores with a bias (the gate's e_score_correction_bias)
    config.update(num_hidden_layers=LAYERS, num_nextn_predict_layers=1, topk_method="noaux_tc", scoring_func="sigmoid")
    (out / "config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    build(Path(sys.argv[1]), disagree="--disagree" in sys.argv[2:])
    print(sys.argv[1])
