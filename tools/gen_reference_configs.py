"""Writes the full-size configs of each supported MoE family as transformers
defines them (its config classes default to the released model's sizes), with
the exact parameter count of the model transformers builds from each (on the
meta device, so no memory is used). `anymoe info` must reproduce the counts.

Usage: tools/.venv/bin/python tools/gen_reference_configs.py
"""
import json
import pathlib

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden" / "configs"

# Keys where transformers' defaults differ from the released model's config.json.
OVERRIDES = {
    # GLM-4.5-Air ships head_dim 128 (96 heads x 128 != hidden 4096) and theta 1e6.
    "glm4_moe": {"head_dim": 128, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                      "partial_rotary_factor": 0.5}},
}

# model_type -> (file name, published total / active parameters)
MODELS = {
    "glm_moe_dsa": ("glm5", "GLM-5: 744B total, 40B active"),
    "deepseek_v3": ("deepseek_v3", "DeepSeek-V3: 671B total, 37B active"),
    # Glm4MoeConfig defaults to GLM-4.5-Air's sizes (with OVERRIDES above).
    "glm4_moe": ("glm4_5_air", "GLM-4.5-Air: 106B total, 12B active"),
    # Qwen3MoeConfig defaults to a 24-layer, 2048-wide model (no released name).
    "qwen3_moe": ("qwen3_moe_default", "transformers' Qwen3MoeConfig defaults"),
    "mixtral": ("mixtral_8x7b", "Mixtral-8x7B: 46.7B total, 12.9B active"),
}


def count_stored_elements(config):
    """Elements of every tensor a checkpoint of this model stores: parameters plus
    persistent buffers such as e_score_correction_bias (not in parameters())."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    state = model.state_dict()
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    return sum(t.numel() for t in state.values())


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    summary = {"transformers_version": transformers.__version__, "torch_version": torch.__version__,
               "generator": "tools/gen_reference_configs.py", "models": {}}
    for model_type, (name, published) in MODELS.items():
        config = AutoConfig.for_model(model_type, **OVERRIDES.get(model_type, {}))
        config_dict = config.to_dict()
        config_dict["model_type"] = model_type
        (OUT / f"{name}.json").write_text(json.dumps(config_dict, indent=1, sort_keys=True) + "\n")
        total = count_stored_elements(config)
        summary["models"][name] = {"model_type": model_type, "config_file": f"{name}.json",
                                   "transformers_stored_elements": total, "published": published}
        print(f"{name}: {total / 1e9:.2f}B stored elements ({published})")
    (OUT / "parameter_counts.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
