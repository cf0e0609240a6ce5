"""Workload sizes per node type, and the memory check that refuses a size before submitting (pure).

Presets (the spec's ``benchmark.train|infer|data`` keys override any of them):
- GPU nodes: a 16-layer, d_model 1024 decoder with a 32k vocabulary (about 234 M parameters: a
  few hundred MB in bf16), 1024-token sequences, one rank per GPU, NCCL, bf16;
- CPU and container nodes: 2 layers, d_model 128, a 4k vocabulary (about 0.9 M parameters: a few
  MB), 64-token sequences, one rank per node with gloo. Container nodes share the host's cores,
  so a rank gets one thread: a 2-node run on a 2-core machine must not halve each rank's CPU.

Device memory a rank needs (DDP with AdamW, fp32 parameters, bf16 activations on GPUs):
- 20 bytes per parameter: the parameter, its gradient, Adam's two moments (4 bytes each) and
  DDP's gradient bucket copy;
- activations per layer ``s b h (34 + 5 a s / h)`` bytes (Korthikanti et al. 2022, "Reducing
  Activation Recomputation in Large Transformer Models", eq. 1, 16-bit activations; doubled
  for fp32), plus the logits and their fp32 copy for the loss (``s b V x 6`` bytes);
against 90 % of one GPU's memory (the catalogue), or of the node's memory on CPU nodes. A size
that does not fit is refused with the largest micro-batch that does (or, when not even one
sequence fits, the most layers that would).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterforge.catalog.hardware import InstanceType

GPU_PRESET: dict[str, dict[str, Any]] = {
    "model": {"vocab": 32000, "d_model": 1024, "layers": 16, "heads": 16, "seq_len": 1024},
    "train": {"micro_batch": 8, "steps": 40, "warmup_steps": 10, "checkpoint_every": 20, "loader_workers": 4,
              "threads": 0},
    "infer": {"batch_sizes": [1, 4, 16, 64, 256], "prompt_tokens": 128, "new_tokens": 128, "repeats": 5},
    "data": {"sample_kib": 512, "shards": 16, "samples_per_shard": 256, "workers": [1, 2, 4, 8, 16], "seconds": 5.0},
}  # fmt: skip
CPU_PRESET: dict[str, dict[str, Any]] = {
    "model": {"vocab": 4096, "d_model": 128, "layers": 2, "heads": 4, "seq_len": 64},
    "train": {"micro_batch": 8, "steps": 12, "warmup_steps": 3, "checkpoint_every": 12, "loader_workers": 1,
              "threads": 0},
    "infer": {"batch_sizes": [1, 2, 4, 8, 16], "prompt_tokens": 16, "new_tokens": 16, "repeats": 4},
    "data": {"sample_kib": 64, "shards": 8, "samples_per_shard": 64, "workers": [1, 2, 4], "seconds": 2.0},
}  # fmt: skip
MEMORY_FRACTION = 0.9
BYTES_PER_PARAM = 20


class SizeError(Exception):
    """The workload cannot run as sized; the message says what would."""


@dataclass(frozen=True)
class Sizes:
    model: dict[str, int]
    train: dict[str, Any]
    infer: dict[str, Any]
    data: dict[str, Any]
    device: str  # "cuda" | "cpu"
    dtype: str  # "bf16" | "fp32"
    ranks_per_node: int
    device_memory_bytes: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "train": self.train, "infer": self.infer, "data": self.data,
            "device": self.device, "dtype": self.dtype, "ranks_per_node": self.ranks_per_node,
        }  # fmt: skip


def parameter_count(model: dict[str, int]) -> int:
    """Parameters of the benchmark decoder (validators/workloads/benchmark/model.py, same formula)."""
    d, layers, vocab, seq = model["d_model"], model["layers"], model["vocab"], model["seq_len"]
    return vocab * d + seq * d + layers * (12 * d * d + 13 * d) + 2 * d


def flops_per_token(model: dict[str, int]) -> float:
    d, layers, vocab, seq = model["d_model"], model["layers"], model["vocab"], model["seq_len"]
    return 6.0 * layers * 12 * d * d + 12.0 * layers * d * seq + 6.0 * d * vocab


def train_memory_bytes(model: dict[str, int], micro_batch: int, fp32_activations: bool) -> int:
    s, b, h, a = model["seq_len"], micro_batch, model["d_model"], model["heads"]
    per_layer = s * b * h * (34 + 5 * a * s / h)
    act = per_layer * model["layers"] * (2 if fp32_activations else 1)
    logits = s * b * model["vocab"] * 6
    return int(BYTES_PER_PARAM * parameter_count(model) + act + logits)


def _merge(preset: dict[str, Any], override: Any) -> dict[str, Any]:
    out = dict(preset)
    for key, value in override.model_dump().items():
        if value is not None:
            out[key] = value
    return out


def sizes_for(spec_benchmark: Any, it: InstanceType) -> Sizes:
    """The sizes for nodes of ``it`` with the spec's overrides; SizeError when they cannot run."""
    gpu = it.gpu is not None and it.gpu.count > 0
    preset = GPU_PRESET if gpu else CPU_PRESET
    train_over = spec_benchmark.train
    model_keys = ("vocab", "d_model", "layers", "heads", "seq_len")
    model = dict(preset["model"])
    for key in model_keys:
        value = getattr(train_over, key)
        if value is not None:
            model[key] = value
    train = {k: v for k, v in _merge(preset["train"], train_over).items() if k not in model_keys}
    notes: list[str] = []
    if not gpu and it.container and not train_over.threads:
        train["threads"] = 1
        notes.append("container nodes share the host's cores: one torch thread per rank")
    infer = _merge(preset["infer"], spec_benchmark.infer)
    data = _merge(preset["data"], spec_benchmark.data)
    if model["d_model"] % model["heads"]:
        raise SizeError(
            f"benchmark.train: d_model {model['d_model']} is not a multiple of heads {model['heads']}: "
            f"give heads that divide it, e.g. {_divisor(model['d_model'], model['heads'])}"
        )
    if infer["prompt_tokens"] + infer["new_tokens"] > model["seq_len"]:
        raise SizeError(
            f"benchmark.infer: prompt_tokens {infer['prompt_tokens']} + new_tokens {infer['new_tokens']} exceed the "
            f"model's seq_len {model['seq_len']}: at most {model['seq_len']} tokens in all"
        )
    sample_bytes = data["sample_kib"] * 1024
    if sample_bytes < 2 * (model["seq_len"] + 1):
        need = -(-2 * (model["seq_len"] + 1) // 4096) * 4
        raise SizeError(
            f"benchmark.data: a {data['sample_kib']} KiB sample holds fewer than the {model['seq_len'] + 1} tokens a "
            f"training sequence takes (2 bytes each): sample_kib {need} would"
        )
    if gpu:
        assert it.gpu is not None
        memory = it.gpu.memory_mib * (1 << 20)
        where = f"one {it.gpu.model} of {it.name} ({it.gpu.memory_mib / 1024:.0f} GiB)"
    else:
        memory = it.memory_mib * (1 << 20)
        where = f"a {it.name} node ({it.memory_mib / 1024:.3g} GiB)"
    check_fit(model, int(train["micro_batch"]), not gpu, memory, where)
    return Sizes(
        model=model,
        train=train,
        infer=infer,
        data={**data, "sample_bytes": sample_bytes},
        device="cuda" if gpu else "cpu",
        dtype="bf16" if gpu else "fp32",
        ranks_per_node=it.gpu.count if gpu and it.gpu is not None else 1,
        device_memory_bytes=memory,
        notes=tuple(notes),
    )


def _divisor(d: int, heads: int) -> int:
    return max(h for h in range(1, heads + 1) if d % h == 0)


def check_fit(model: dict[str, int], micro_batch: int, fp32: bool, memory: int, where: str) -> None:
    budget = MEMORY_FRACTION * memory
    need = train_memory_bytes(model, micro_batch, fp32)
    if need <= budget:
        return
    gib = 1 << 30
    head = (
        f"benchmark.train: {parameter_count(model) / 1e6:,.1f} M parameters ({model['layers']} layers, d_model "
        f"{model['d_model']}) at micro_batch {micro_batch} need about {need / gib:,.1f} GiB per rank; {where} "
        f"allows {budget / gib:,.1f} GiB ({MEMORY_FRACTION:.0%})"
    )
    fits = [b for b in range(micro_batch - 1, 0, -1) if train_memory_bytes(model, b, fp32) <= budget]
    if fits:
        raise SizeError(f"{head}: micro_batch {fits[0]} would fit")
    layers = [n for n in range(model["layers"] - 1, 0, -1)
              if train_memory_bytes({**model, "layers": n}, 1, fp32) <= budget]  # fmt: skip
    if layers:
        raise SizeError(f"{head}: not even micro_batch 1 fits; layers {layers[0]} at micro_batch 1 would")
    step = model["heads"]
    widths = [d for d in range(model["d_model"] - step, 0, -step)
              if train_memory_bytes({**model, "layers": 1, "d_model": d}, 1, fp32) <= budget]  # fmt: skip
    if widths:
        raise SizeError(
            f"{head}: not even one layer fits at this width; d_model {widths[0]} at 1 layer and micro_batch 1 would"
        )
    raise SizeError(f"{head}: not even the smallest width fits: lower vocab or seq_len")
