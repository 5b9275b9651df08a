"""The logits check the validators share: a converted model's logits on one chunk against the
unconverted checkpoint's in PyTorch (float32, computed in float64)."""

import sys


def against_reference(hf_dir, inputs, logits, torch, np):
    """logits: the converted model's [positions, vocab] for `inputs` (float64 numpy). Loads the
    checkpoint, runs the same inputs, frees it, prints a summary to stderr and returns the check's
    fields: max and mean |difference|, the share of positions with the same top-1 token, the
    number of positions."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    model.eval()
    with torch.inference_mode():
        ref = model(torch.tensor([inputs])).logits[0].double().numpy()
    del model
    diff = np.abs(logits - ref)
    check = {"max_abs_logit_diff": float(diff.max()), "mean_abs_logit_diff": float(diff.mean()),
             "top1_agreement": float((logits.argmax(-1) == ref.argmax(-1)).mean()),
             "logit_positions": int(logits.shape[0])}
    print(f"logits vs PyTorch on chunk 1: max |diff| {check['max_abs_logit_diff']:.6g}, "
          f"mean {check['mean_abs_logit_diff']:.6g}, same top-1 {check['top1_agreement']:.4f}",
          file=sys.stderr, flush=True)
    return check
