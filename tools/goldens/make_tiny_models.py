#!/usr/bin/env python3
"""Builds the tiny random-weight golden checkpoints with Hugging Face transformers (the reference).

For each family (qwen3, qwen2, llama) it writes, under OUT/<name>/:
  config.json, generation_config.json, weights (bf16 / f16 / f32; qwen3 sharded with an index),
  tokenizer.json + tokenizer_config.json (a small byte-level BPE trained here), and
  goldens.safetensors: for every fixed prompt, `p{i}.ids` (I64: prompt then 32 greedy tokens),
  `p{i}.prompt_len` (I64 scalar), `p{i}.logits` (F32 (len, vocab): logits at every position from one
  full forward in float32 over the stored, rounded weights, eager attention).
Run on the GPU machine (torch/transformers exist only there); the outputs are committed under
tests/data/models/.  Usage: python3 tools/goldens/make_tiny_models.py OUT_DIR
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = sys.argv[1]
GREEDY_STEPS = 32
VOCAB = 512

PROMPTS = [
    "def fibonacci(n):",
    "The quick brown fox",
    "int main(void) {\n    return",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
]

TRAIN_TEXT = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "int main(void) {\n    printf(\"hello, world\\n\");\n    return 0;\n}\n",
    "for i in range(10):\n    print(i, i * i)\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n",
    "import os\nimport sys\nfrom typing import List, Optional\n",
]


def make_tokenizer(path):
    """A byte-level BPE with ChatML specials, like the real Qwen tokenizers but with VOCAB entries."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(specials), special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(TRAIN_TEXT * 20, trainer=trainer)
    tok.add_special_tokens(specials)
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                                    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}, f, indent=1)
    return tok


FAMILIES = {
    # name: (config class kwargs, storage dtype, shard size)
    "tiny-qwen3": dict(
        model_type="qwen3", dtype=torch.bfloat16, max_shard_size="60KB",
        config=dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6, rope_theta=1000000.0,
                    tie_word_embeddings=True, max_position_embeddings=4096)),
    "tiny-qwen2": dict(
        model_type="qwen2", dtype=torch.float16, max_shard_size=None,
        config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                    max_position_embeddings=256,
                    rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=64))),
    "tiny-llama": dict(
        model_type="llama", dtype=torch.float32, max_shard_size=None,
        config=dict(hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=6,
                    num_key_value_heads=3, rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
                    max_position_embeddings=8192,
                    rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                      original_max_position_embeddings=32))),
}


def build(name, spec, tok):
    path = os.path.join(OUT, name)
    cfg = transformers.AutoConfig.for_model(spec["model_type"], vocab_size=VOCAB, initializer_range=0.08,
                                            bos_token_id=None, eos_token_id=tok.token_to_id("<|im_end|>"),
                                            **spec["config"])
    torch.manual_seed(1234)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():  # norms at 1 make every layer look alike; perturb them so a swapped weight shows
        for n, p in model.named_parameters():
            if "norm" in n or n.endswith(".bias"):
                p.add_(torch.randn_like(p) * 0.1)
    model = model.to(spec["dtype"])
    kwargs = {"max_shard_size": spec["max_shard_size"]} if spec["max_shard_size"] else {}
    model.save_pretrained(path, safe_serialization=True, **kwargs)
    # Reload exactly what was stored, compute in float32.
    ref = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    ref.eval()
    tensors = {}
    with torch.no_grad():
        for i, prompt in enumerate(PROMPTS):
            ids = tok.encode(prompt).ids
            seq = torch.tensor([ids], dtype=torch.long)
            for _ in range(GREEDY_STEPS):  # plain greedy, full forward each step (no cache)
                nxt = ref(seq).logits[0, -1].argmax()
                seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
            logits = ref(seq).logits[0].float().contiguous()
            tensors[f"p{i}.ids"] = seq[0].clone()
            tensors[f"p{i}.prompt_len"] = torch.tensor([len(ids)], dtype=torch.long)
            tensors[f"p{i}.logits"] = logits
            # Sanity: the greedy tokens agree with the full-forward logits.
            assert torch.equal(logits[len(ids) - 1:-1].argmax(-1), seq[0, len(ids):]), name
    save_file(tensors, os.path.join(path, "goldens.safetensors"),
              metadata={"prompts": json.dumps(PROMPTS), "transformers": transformers.__version__,
                        "torch": torch.__version__})
    for f in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(OUT, "_tok", f)) as src, open(os.path.join(path, f), "w") as dst:
            dst.write(src.read())
    print(name, "files:", sorted(os.listdir(path)))
    print(open(os.path.join(path, "config.json")).read())


def main():
    torch.use_deterministic_algorithms(True)
    tok = make_tokenizer(os.path.join(OUT, "_tok"))
    for name, spec in FAMILIES.items():
        build(name, spec, tok)


if __name__ == "__main__":
    main()
