"""Peak compute and the 'how long would this training run take' estimate."""

from __future__ import annotations

from myriad.plan.model import Compute
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Cluster

# Training a dense transformer costs about 6 FLOPs per parameter per token: 2 forward,
# 4 backward (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1).
FLOPS_PER_PARAM_TOKEN = 6
BILLION = 1e9
TFLOPS_PER_PFLOPS = 1000
FLOPS_PER_PFLOPS = 1e15
SECONDS_PER_DAY = 86_400


def training_flops(params_billion: float, tokens_billion: float) -> float:
    return FLOPS_PER_PARAM_TOKEN * params_billion * BILLION * tokens_billion * BILLION


def training_days(flops: float, peak_pflops: float | None, mfu: float) -> float | None:
    """None when there is no peak to run at (no GPUs, or a precision some GPU lacks)."""
    if not peak_pflops:
        return None
    return flops / (peak_pflops * FLOPS_PER_PFLOPS * mfu) / SECONDS_PER_DAY


def plan_compute(spec: Cluster, catalog: Catalog) -> Compute:
    """Peaks and the training estimate over the GPUs of compute pools only: a GPU in a
    login or storage pool does not train (it is counted in the plan's GPU total).

    A low-precision peak (FP8, FP4) exists only when every training GPU has that rate: a
    cluster is as fast as its slowest part at a precision some GPUs cannot run."""
    gpus = 0
    bf16_tflops = 0.0
    low: dict[str, float | None] = {"fp8": 0.0, "fp4": 0.0}
    lacking: dict[str, list[str]] = {"fp8": [], "fp4": []}
    for pool in spec.pools_with_role("compute"):
        profile = spec.profiles[pool.profile]
        if profile.gpu is None:
            continue
        model = catalog.gpus[profile.gpu.model]
        count = pool.count * profile.gpu.count
        gpus += count
        bf16_tflops += count * model.bf16_dense_tflops
        rates = {"fp8": model.fp8_dense_tflops, "fp4": model.fp4_dense_tflops}
        for precision, rate in rates.items():
            total = low[precision]
            low[precision] = None if total is None or rate is None else total + count * rate
            if rate is None and profile.gpu.model not in lacking[precision]:
                lacking[precision].append(profile.gpu.model)
    peaks: dict[str, float | None] = {"bf16": bf16_tflops / TFLOPS_PER_PFLOPS}
    for precision, total in low.items():
        peaks[precision] = total / TFLOPS_PER_PFLOPS if total is not None and gpus else None
    workload = spec.workload
    flops = training_flops(workload.params_billion, workload.tokens_billion)
    return Compute(
        gpus=gpus,
        peak_bf16_pflops=bf16_tflops / TFLOPS_PER_PFLOPS,
        peak_fp8_pflops=peaks["fp8"],
        params_billion=workload.params_billion,
        tokens_billion=workload.tokens_billion,
        mfu=workload.mfu,
        precision=workload.precision,
        training_flops=flops,
        training_days=training_days(flops, peaks[workload.precision], workload.mfu),
        # Without a workload: section the figures are for the model's default run.
        workload_from_spec="workload" in spec.model_fields_set,
        unsupported_precision=tuple(lacking.get(workload.precision, ())),
        peak_fp4_pflops=peaks["fp4"],
    )
