"""Peak FLOP/s and the training-time estimate."""

from __future__ import annotations

import pytest

from myriad.plan.compute import plan_compute
from myriad.plan.pipeline import plan_loaded

from spec_builder import cluster, gpu_profile, load_example


def test_70b_on_15t_tokens_with_1024_h100_at_40_percent_mfu() -> None:
    # 128 nodes x 8 = 1,024 H100 at 989 dense BF16 TFLOP/s: 1,012.736 PFLOP/s peak.
    loaded = cluster(nodes=128)
    compute = plan_compute(loaded.spec, loaded.catalog)
    assert compute.gpus == 1024
    assert compute.peak_bf16_pflops == pytest.approx(1012.736)
    # FP8: 1,024 x 1,979 = 2,026.496 PFLOP/s.
    assert compute.peak_fp8_pflops == pytest.approx(2026.496)
    # 6 x 70e9 params x 15e12 tokens = 6.3e24 FLOPs.
    assert compute.training_flops == pytest.approx(6.3e24)
    # 6.3e24 / (1,012.736e15 x 0.40) = 6.3e24 / 4.050944e17 = 15,551,934 s
    # = 15,551,934 / 86,400 = 179.999 days: about six months.
    assert compute.training_days == pytest.approx(6.3e24 / 4.050944e17 / 86_400)
    assert compute.training_days == pytest.approx(180.0, abs=0.01)
    assert (compute.params_billion, compute.tokens_billion, compute.mfu) == (70, 15000, 0.4)


def test_fp8_halves_the_days_on_gpus_that_have_it() -> None:
    workload = {"params_billion": 70, "tokens_billion": 15000, "mfu": 0.4, "precision": "fp8"}
    loaded = cluster(nodes=128, workload=workload)
    compute = plan_compute(loaded.spec, loaded.catalog)
    # 6.3e24 / (2,026.496e15 x 0.4) / 86,400 = 89.9996 days.
    assert compute.precision == "fp8"
    assert compute.training_days == pytest.approx(6.3e24 / (2026.496e15 * 0.4) / 86_400)


def test_fp8_needs_every_gpu_to_have_it() -> None:
    profiles = {"h100": gpu_profile(), "a100": gpu_profile("A100-SXM4-80GB", nic="ConnectX-6")}
    pools = [
        {"name": "new", "profile": "h100", "count": 2, "role": "compute"},
        {"name": "old", "profile": "a100", "count": 2, "role": "compute"},
    ]
    workload = {"precision": "fp8"}
    loaded = cluster(profiles=profiles, pools=pools, workload=workload)
    compute = plan_compute(loaded.spec, loaded.catalog)
    # BF16: 16 x 989 + 16 x 312 = 20,816 TFLOP/s; A100 has no FP8, so no FP8 peak and no
    # FP8 training estimate.
    assert compute.peak_bf16_pflops == pytest.approx(20.816)
    assert compute.peak_fp8_pflops is None
    assert compute.training_days is None
    # ... and the plan says why there is no figure: a finding at workload.precision.
    assert compute.unsupported_precision == ("A100-SXM4-80GB",)
    [finding] = [f for f in plan_loaded(loaded).findings if f.id == "workload-precision"]
    assert finding.path == ("workload", "precision") and "A100-SXM4-80GB" in finding.message


def test_training_counts_the_gpus_of_compute_pools_only() -> None:
    # 2 compute nodes of 8 H100 (16 GPUs) and a login pool of 4 nodes with 8 H100 each:
    # the login GPUs do not train. Peak 16 x 989 = 15.824 PFLOP/s, not 48 x 989.
    profiles = {"h100": gpu_profile()}
    pools = [
        {"name": "gpu", "profile": "h100", "count": 2, "role": "compute"},
        {"name": "login", "profile": "h100", "count": 4, "role": "login"},
    ]
    loaded = cluster(profiles=profiles, pools=pools, workload={"params_billion": 7})
    compute = plan_compute(loaded.spec, loaded.catalog)
    assert compute.gpus == 16
    assert compute.peak_bf16_pflops == pytest.approx(15.824)
    # 6 x 7e9 x 15e12 = 6.3e23 FLOPs at 15.824e15 x 0.4: 6.3e23 / 6.3296e15 s / 86,400.
    assert compute.training_days == pytest.approx(6.3e23 / 6.3296e15 / 86_400)
    # The plan's own GPU total still counts all 48.
    assert plan_loaded(loaded).plan.gpus == 48  # type: ignore[union-attr]


def test_the_plan_says_when_the_workload_is_the_default() -> None:
    assert not plan_compute(cluster().spec, cluster().catalog).workload_from_spec
    loaded = cluster(workload={"params_billion": 7})
    assert plan_compute(loaded.spec, loaded.catalog).workload_from_spec


def test_no_gpus_no_estimate() -> None:
    loaded = load_example("local")
    compute = plan_compute(loaded.spec, loaded.catalog)
    assert (compute.gpus, compute.peak_bf16_pflops) == (0, 0.0)
    assert compute.peak_fp8_pflops is None
    assert compute.training_days is None
    assert compute.training_flops == pytest.approx(6.3e24)
