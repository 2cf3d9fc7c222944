"""The gpu-check's torch stage: PyTorch + transformers (+ peft) on the GPU, eager, on the shapes of
the project's own GPU benchmarks (random Qwen3-0.6B shape, bf16), in the same call:

  decode   batch 1/64/256, 16-token prompts, 32 new tokens, greedy (HF generate;
           kernels/cuda BenchmarkDecode)
  prefill  8 x 512 tokens, one forward (BenchmarkPrefill)
  train    one LoRA r16 step over 4 x 512 tokens: forward, log-softmax gather, backward,
           AdamW (BenchmarkProfileTrainStep, which the ncu stage profiles)
  grpo     8 prompts x 8 samples, 64 prompt + 448 new tokens at T=1 (HF generate, what TRL
           uses without vLLM), then forward and backward of all 64 x 512 tokens into LoRA r16
           on every projection (peft) in micro-batches of 16, one AdamW step (grpo's
           BenchmarkGRPOStepMemory); peak_mem_gib is torch.cuda.max_memory_allocated

Sections named on the command line run alone (python3 torch_anchor.py decode grpo). Each is
guarded: a failure is recorded and the next one runs. Writes $OUT/torch.json and prints one
line per section.
"""
import json, os, sys, time, traceback

out = os.environ.get("OUT", ".")
res = {"sections": {}}


def section(name):
    def deco(fn):
        if sys.argv[1:] and name not in sys.argv[1:]:  # run only the sections named
            return fn
        t0 = time.time()
        try:
            res["sections"][name] = fn()
        except Exception as e:  # noqa: BLE001
            res["sections"][name] = {"error": repr(e), "trace": traceback.format_exc()[-1500:]}
        res["sections"][name]["wall_s"] = round(time.time() - t0, 2)
        print(name, json.dumps(res["sections"][name])[:600], flush=True)
        return fn
    return deco


import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

res["torch"] = torch.__version__
res["transformers"] = transformers.__version__
res["gpu"] = torch.cuda.get_device_name(0)
dev = torch.device("cuda")
cfg = Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                  num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
                  rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=40960)
torch.manual_seed(0)
with torch.device(dev):
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
model.eval()
res["params"] = sum(p.numel() for p in model.parameters())


def sync():
    torch.cuda.synchronize()


def gen(ids, new, sample):
    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                          min_new_tokens=new, do_sample=sample, temperature=1.0 if sample else None,
                          top_k=0 if sample else None, top_p=1.0 if sample else None,
                          pad_token_id=0, eos_token_id=None)


@section("decode")
def _decode():
    r = {}
    g = torch.Generator(device=dev).manual_seed(5)
    for batch in (1, 64, 256):
        ids = torch.randint(0, cfg.vocab_size, (batch, 16), device=dev, generator=g)
        with torch.no_grad():
            gen(ids, 4, False)  # warm-up
            sync()
            t0 = time.time()
            o = gen(ids, 32, False)
            sync()
        el = time.time() - t0
        r[f"batch{batch}_tok_s"] = round(batch * (o.shape[1] - 16) / el, 1)
    return r


@section("prefill")
def _prefill():
    ids = torch.randint(0, cfg.vocab_size, (8, 512), device=dev)
    with torch.no_grad():
        model(input_ids=ids, logits_to_keep=1)
        sync()
        t0 = time.time()
        for _ in range(3):
            model(input_ids=ids, logits_to_keep=1)
        sync()
    return {"tok_s": round(3 * 8 * 512 / (time.time() - t0), 1)}


@section("train")
def _train():
    from peft import LoraConfig, get_peft_model
    pm = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                          "gate_proj", "up_proj", "down_proj"]))
    opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad], lr=1e-5)
    seqs = torch.randint(0, cfg.vocab_size, (4, 512), device=dev)
    pm.train()
    r = {}
    for rep in range(2):  # the first warms up
        sync(); t0 = time.time()
        opt.zero_grad()
        logits = pm(input_ids=seqs).logits[:, 63:-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, seqs[:, 64:, None]).squeeze(-1)
        (-lp.mean()).backward()
        opt.step()
        sync()
        r = {"rep": rep, "s_step": round(time.time() - t0, 4), "tok_s": round(4 * 512 / (time.time() - t0), 1)}
        del logits, lp
    pm.unload()  # the base model without adapters for the next section
    return r


@section("grpo")
def _grpo():
    from peft import LoraConfig, get_peft_model
    groups, per, prompt, new = 8, 8, 64, 448
    pm = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                          target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                          "gate_proj", "up_proj", "down_proj"]))
    opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad], lr=1e-5)
    prompts = torch.randint(0, cfg.vocab_size, (groups, prompt), device=dev).repeat_interleave(per, 0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    r = {}
    for rep in range(1):  # decode and train warmed the kernels up
        pm.eval()
        sync(); t0 = time.time()
        with torch.no_grad():
            seqs = pm.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new,
                               min_new_tokens=new, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                               pad_token_id=0, eos_token_id=None)
        sync(); tg = time.time() - t0
        pm.train()
        t0 = time.time()
        opt.zero_grad()
        for mb in seqs.split(16):  # micro-batches of 16 x 512
            logits = pm(input_ids=mb).logits[:, prompt - 1:-1].float()
            lp = torch.log_softmax(logits, -1).gather(-1, mb[:, prompt:, None]).squeeze(-1)
            loss = -lp.mean() * mb.shape[0] / seqs.shape[0]
            loss.backward()
            del logits, lp
        sync(); tb = time.time() - t0
        t0 = time.time()
        opt.step()
        sync(); to = time.time() - t0
        r = {"rep": rep, "s_step": round(tg + tb + to, 3), "gen_s": round(tg, 3), "score_backward_s": round(tb, 3),
             "optim_s": round(to, 4), "gen_tok_s": round(seqs.shape[0] * new / tg, 1),
             "peak_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}
    return r


json.dump(res, open(os.path.join(out, "torch.json"), "w"), indent=1)
print(json.dumps({k: v for k, v in res.items() if k != "sections"}))
