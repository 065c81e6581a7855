#!/usr/bin/env python3
"""Trains helium's embedded default: a small Qwen3-architecture code model and its drafter.

Reproducible end to end on one H200 (the GPU machine has torch, transformers and tokenizers):
  python3 tools/train/train_code_models.py OUT_DIR [--quick]

1. Corpus: the .py files of the Python installation (standard library and site-packages) and the C/C++
   headers under /usr/include, deduplicated by content, split into train and held-out by a hash of the
   content (about 1.5% held out), capped in size.
2. Tokenizer: byte-level BPE (NFC; the Qwen2 Split regex then ByteLevel, as the Qwen tokenizers do) with
   VOCAB entries including <|endoftext|>, <|im_start|>, <|im_end|>; tokenizer.json + tokenizer_config.json
   with a ChatML chat_template.
3. Target (Qwen3, ~12M parameters) trained with AdamW in bf16 autocast on random windows; drafter (Qwen3,
   ~2M) trained on the same windows with 0.5 * cross-entropy + 0.5 * KL to the target's distribution.
4. Held-out loss (nats/token), bits/byte, perplexity; the drafter's greedy top-1 agreement with the target
   on held-out windows (teacher-forced positions).
5. Exports each as a Hugging Face checkpoint in bf16 (config.json, generation_config.json,
   model.safetensors, tokenizer files) plus goldens.safetensors: reference logits from transformers in
   float32 over the exported weights (same format as tools/goldens/make_tiny_models.py).
Writes OUT_DIR/report.json with every figure.
"""
import glob
import hashlib
import json
import math
import os
import random
import sys
import sysconfig
import site
import time

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

OUT = sys.argv[1]
QUICK = "--quick" in sys.argv
SEED = 20261129
VOCAB = 8192
SEQ = 1024
BATCH = 32
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TARGET = dict(name="helium-code-12m", hidden_size=384, num_hidden_layers=6, num_attention_heads=6,
              num_key_value_heads=2, head_dim=64, intermediate_size=896,
              steps=300 if QUICK else 3600, lr=3e-3, max_seconds=60 if QUICK else 240)
DRAFTER = dict(name="helium-code-draft-2m", hidden_size=192, num_hidden_layers=2, num_attention_heads=3,
               num_key_value_heads=1, head_dim=64, intermediate_size=512,
               steps=200 if QUICK else 2400, lr=4e-3, max_seconds=40 if QUICK else 120)
GOLDEN_PROMPTS = ["def fibonacci(n):", "#include <stdio.h>\n\nint main(void) {\n"]
report = {"seed": SEED, "quick": QUICK, "torch": torch.__version__, "transformers": transformers.__version__}
T0 = time.time()


def log(*args):
    print(f"[{time.time() - T0:7.1f}s]", *args, flush=True)


def collect_corpus():
    roots_py = sorted({sysconfig.get_paths()["stdlib"], *site.getsitepackages()})
    files = []
    for root in roots_py:
        files += [(p, "python") for p in glob.glob(os.path.join(root, "**", "*.py"), recursive=True)]
    files += [(p, "c") for ext in ("h", "hpp", "hh") for p in glob.glob(f"/usr/include/**/*.{ext}", recursive=True)]
    files.sort()
    seen, train, held = set(), [], []
    caps = {"python": 40e6 if QUICK else 240e6, "c": 10e6 if QUICK else 60e6}
    sizes = {"python": 0, "c": 0}
    random.Random(SEED).shuffle(files)
    for path, kind in files:
        try:
            if os.path.islink(path):
                continue
            raw = open(path, "rb").read()
        except OSError:
            continue
        if not (200 <= len(raw) <= 300_000) or sizes[kind] >= caps[kind]:
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        digest = hashlib.sha1(raw).digest()
        if digest in seen:
            continue
        seen.add(digest)
        sizes[kind] += len(raw)
        (held if digest[0] < 4 else train).append(text)  # 4/256 = 1.6% held out, by content
    report["corpus"] = {"train_files": len(train), "heldout_files": len(held),
                        "train_bytes": sum(len(t.encode()) for t in train),
                        "heldout_bytes": sum(len(t.encode()) for t in held),
                        "python_bytes": sizes["python"], "c_header_bytes": sizes["c"], "roots": roots_py + ["/usr/include"]}
    log("corpus", report["corpus"])
    return train, held


def train_tokenizer(train, path):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    sample = train[:: max(1, len(train) // 6000)]  # a few thousand files suffice for the merges
    tok.train_from_iterator(sample, trainer=trainer)
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                   "model_max_length": 2048, "chat_template": CHAT_TEMPLATE,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=1)
    return tok


def tokenize(tok, texts):
    eot = tok.token_to_id("<|endoftext|>")
    ids = []
    for i in range(0, len(texts), 2000):
        for enc in tok.encode_batch(texts[i:i + 2000]):
            ids.extend(enc.ids)
            ids.append(eot)
    return torch.tensor(ids, dtype=torch.int32)


def make_config(spec, tok):
    return transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=spec["hidden_size"], num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"], num_key_value_heads=spec["num_key_value_heads"],
        head_dim=spec["head_dim"], intermediate_size=spec["intermediate_size"], max_position_embeddings=2048,
        rope_theta=100000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=0.02,
        bos_token_id=None, eos_token_id=tok.token_to_id("<|endoftext|>"), pad_token_id=tok.token_to_id("<|endoftext|>"))


def batches(data, steps, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=g)
        idx = starts[:, None] + torch.arange(SEQ + 1)[None, :]
        yield data[idx].to("cuda", non_blocking=True).long()


def lr_at(step, steps, peak):
    warm = max(1, steps // 20)
    if step < warm:
        return peak * (step + 1) / warm
    progress = (step - warm) / max(1, steps - warm)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(spec, tok, data, teacher=None):
    torch.manual_seed(SEED)
    cfg = make_config(spec, tok)
    model = transformers.Qwen3ForCausalLM(cfg).cuda()
    params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=spec["lr"], betas=(0.9, 0.95), fused=True)
    model.train()
    start, step, losses = time.time(), 0, []
    for step, batch in enumerate(batches(data, spec["steps"], SEED + len(spec["name"]))):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, spec["steps"], spec["lr"])
        x, y = batch[:, :-1], batch[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits.float()
            ce = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))
            loss = ce
            if teacher is not None:
                with torch.no_grad():
                    t_logits = teacher(input_ids=x).logits.float()
                kl = F.kl_div(F.log_softmax(logits, -1).view(-1, VOCAB), F.log_softmax(t_logits, -1).view(-1, VOCAB),
                              log_target=True, reduction="batchmean")
                loss = 0.5 * ce + 0.5 * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0:
            losses.append((step, round(ce.item(), 4)))
            log(spec["name"], "step", step, "ce", round(ce.item(), 4))
        if time.time() - start > spec["max_seconds"]:
            log(spec["name"], "time budget reached at step", step)
            break
    torch.cuda.synchronize()
    seconds = time.time() - start
    model.eval()
    return model, {"parameters": params, "steps": step + 1, "planned_steps": spec["steps"], "seconds": round(seconds, 1),
                   "tokens_seen": (step + 1) * BATCH * SEQ, "batch": BATCH, "seq_len": SEQ, "peak_lr": spec["lr"],
                   "train_ce_curve": losses}


@torch.no_grad()
def evaluate(model, held, bytes_per_token, teacher=None, windows=256):
    g = torch.Generator(device="cpu").manual_seed(SEED + 1)
    total, count, agree = 0.0, 0, 0
    for i in range(0, windows, 16):
        starts = torch.randint(0, len(held) - SEQ - 1, (16,), generator=g)
        batch = held[starts[:, None] + torch.arange(SEQ + 1)[None, :]].cuda().long()
        x, y = batch[:, :-1], batch[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits.float()
            if teacher is not None:
                t = teacher(input_ids=x).logits.float()
                agree += (logits.argmax(-1) == t.argmax(-1)).sum().item()
        total += F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    loss = total / count
    out = {"heldout_loss_nats_per_token": round(loss, 4), "heldout_perplexity": round(math.exp(loss), 3),
           "heldout_bits_per_byte": round(loss / math.log(2) / bytes_per_token, 4), "heldout_tokens": count}
    if teacher is not None:
        out["greedy_top1_agreement_with_target"] = round(agree / count, 4)
    return out


def export(model, spec, tok, tok_dir):
    path = os.path.join(OUT, spec["name"])
    model.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    gen = transformers.GenerationConfig(eos_token_id=[tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")],
                                        pad_token_id=tok.token_to_id("<|endoftext|>"), do_sample=True,
                                        temperature=0.7, top_p=0.95, top_k=40)
    gen.save_pretrained(path)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(tok_dir, f)) as src, open(os.path.join(path, f), "w") as dst:
            dst.write(src.read())
    # Goldens: transformers in float32 over the exported bf16 weights, eager attention.
    ref = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()
    tensors, samples = {}, {}
    with torch.no_grad():
        for i, prompt in enumerate(GOLDEN_PROMPTS):
            seq = torch.tensor([tok.encode(prompt).ids])
            n = seq.shape[1]
            for _ in range(32):
                seq = torch.cat([seq, ref(seq).logits[0, -1].argmax().view(1, 1)], dim=1)
            logits = ref(seq).logits[0].float().contiguous()
            assert torch.equal(logits[n - 1:-1].argmax(-1), seq[0, n:])
            tensors[f"p{i}.ids"], tensors[f"p{i}.prompt_len"], tensors[f"p{i}.logits"] = seq[0].clone(), torch.tensor([n]), logits
            samples[prompt] = tok.decode(seq[0].tolist())
    save_file(tensors, os.path.join(path, "goldens.safetensors"),
              metadata={"prompts": json.dumps(GOLDEN_PROMPTS), "transformers": transformers.__version__})
    return samples


def main():
    torch.backends.cuda.matmul.allow_tf32 = True
    os.makedirs(OUT, exist_ok=True)
    train_texts, held_texts = collect_corpus()
    tok_dir = os.path.join(OUT, "_tokenizer")
    tok = train_tokenizer(train_texts, tok_dir)
    log("tokenizer trained", tok.get_vocab_size())
    train_ids, held_ids = tokenize(tok, train_texts), tokenize(tok, held_texts)
    bytes_per_token = report["corpus"]["train_bytes"] / len(train_ids)
    report["tokenizer"] = {"vocab_size": tok.get_vocab_size(), "train_tokens": len(train_ids),
                           "heldout_tokens": len(held_ids), "bytes_per_token": round(bytes_per_token, 3)}
    log("tokenized", report["tokenizer"])
    held_bpt = report["corpus"]["heldout_bytes"] / len(held_ids)
    target, report["target"] = train(TARGET, tok, train_ids)
    report["target"].update(evaluate(target, held_ids, held_bpt))
    log("target", report["target"])
    drafter, report["drafter"] = train(DRAFTER, tok, train_ids, teacher=target)
    report["drafter"].update(evaluate(drafter, held_ids, held_bpt, teacher=target))
    log("drafter", report["drafter"])
    report["samples"] = export(target, TARGET, tok, tok_dir)
    export(drafter, DRAFTER, tok, tok_dir)
    report["total_seconds"] = round(time.time() - T0, 1)
    with open(os.path.join(OUT, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    log("done", json.dumps(report["samples"], indent=1))


if __name__ == "__main__":
    main()
