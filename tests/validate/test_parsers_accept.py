"""Acceptance parsers on real captures: nccl-tests, perftest's ib_write_bw, `dcgmi diag -j`.

The captures are in tests/samples (SOURCES.md names each source). Damaged and truncated
variants are cut from those captures here; every one must fail with a "could not read"
ParseFailure, never parse into something that could pass a gate.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from myriad.node.parsers import (
    ParseFailure,
    parse_dcgmi_diag,
    parse_nccl_tests,
    parse_perftest_bw,
)
from myriad.node.parsers.common import INTERNAL_ERROR

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
ALLREDUCE = (SAMPLES / "nccl-tests/a3mega-h100x8-x2_all_reduce_perf_8B-8G.txt").read_text()
ROCE_BIDIR = (SAMPLES / "perftest/rocm-doc_roce_ib_write_bw_bidir_all-sizes_gbits.txt").read_text()
SPARK = (
    SAMPLES / "perftest/dgx-spark_roce_ib_write_bw_run-infinitely_unterminated.txt"
).read_text()
DCGM_R1 = (SAMPLES / "dcgm-diag/dcgm-3.1.0_8gpu_diag-r1_json.txt").read_text()
DCGM_R3_CUT = (SAMPLES / "dcgm-diag/t400_dcgm-3.x_diag-r3_json_trimmed-and-cut.txt").read_text()


def _refused(parse, text: str) -> str:
    with pytest.raises(ParseFailure) as caught:
        parse(text)
    assert "could not" in caught.value.reason or caught.value.reason == "empty output"
    assert INTERNAL_ERROR not in caught.value.reason
    return caught.value.reason


# --- nccl-tests ------------------------------------------------------------------------------


def test_all_reduce_two_nodes_of_eight_h100() -> None:
    run = parse_nccl_tests(ALLREDUCE)
    assert len(run.ranks) == 16
    assert run.hosts == ("ztan-mig-235z", "ztan-mig-gq73")
    assert run.ranks[8].host == "ztan-mig-gq73" and run.ranks[8].device == 0
    assert run.ranks[0].model == "NVIDIA H100 80GB HBM3"
    # 8 B to 8 GiB by factor 2: 2^3 .. 2^33 is 31 sizes.
    assert len(run.rows) == 31
    largest = run.largest
    assert largest.size_bytes == 8589934592 and largest.count == 2147483648
    assert (largest.dtype, largest.redop, largest.root) == ("float", "sum", -1)
    assert (largest.time_us, largest.algbw_gbs, largest.busbw_gbs) == (47535.0, 180.71, 338.82)
    assert largest.in_place_busbw_gbs == 337.35
    # all_reduce busbw = algbw x 2(n-1)/n with n = 16 ranks: 180.71 x 30/16 = 338.83.
    assert largest.algbw_gbs * 2 * 15 / 16 == pytest.approx(largest.busbw_gbs, abs=0.02)
    assert run.busbw_gbs == 338.82
    assert run.avg_busbw_gbs == 70.742
    assert run.out_of_bounds == 0 and run.wrong_results == 0
    assert run.collective is None  # this release prints no "Collective test concluded"


def test_mpirun_output_tags_are_removed() -> None:
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in ALLREDUCE.splitlines())
    assert parse_nccl_tests(tagged) == parse_nccl_tests(ALLREDUCE)


def _with_rows(rows: str, columns: str) -> str:
    return (
        "# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 1073741824 step: 2(factor)\n"
        f"#       size         count      type   redop    {columns}\n"
        f"{rows}"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 40.1\n"
        "# Collective test concluded: all_gather_perf\n"
    )


def test_all_gather_rows_carry_redop_none() -> None:
    # Two rows of a real all_gather_perf run (bfloat16, 2 GPUs) quoted in NVIDIA/nccl issue
    # #1435; the thread cuts the table, so the header and footer here are the capture's.
    rows = (
        "    16777216       4194304  bfloat16    none      -1    108.8  154.20   77.10      0"
        "    98.19  170.86   85.43      0\n"
        "    33554432       8388608  bfloat16    none      -1    183.0  183.33   91.66      0"
        "    156.1  214.95  107.48      0\n"
    )
    run = parse_nccl_tests(_with_rows(rows, "root time"))
    assert run.collective == "all_gather_perf"
    assert (run.largest.dtype, run.largest.redop, run.largest.root) == ("bfloat16", "none", -1)
    assert run.busbw_gbs == 107.48  # in place beats out of place at 32 MiB
    # all_gather busbw = algbw x (n-1)/n with n = 2: 183.33 / 2 = 91.66.
    assert run.largest.algbw_gbs / 2 == pytest.approx(run.largest.busbw_gbs, abs=0.01)


def test_releases_without_the_root_column_and_with_data_checks_off() -> None:
    row = (
        "  1073741824   268435456     float     sum   6076.9  176.69  331.30    N/A"
        "   6077.2  176.68  331.28    N/A\n"
    )
    run = parse_nccl_tests(_with_rows(row, "time"))
    assert run.largest.root is None and run.largest.wrong is None
    assert run.busbw_gbs == 331.30


def test_nccl_tests_damaged_and_truncated_are_refused() -> None:
    lines = ALLREDUCE.splitlines(keepends=True)
    no_average = "".join(lines[:-1])
    assert "Avg bus bandwidth" in _refused(parse_nccl_tests, no_average)
    # Killed mid-table: the last row cut in the middle of its columns.
    cut_row = "".join(lines[:40]) + lines[40][:60] + "\n"
    assert "columns" in _refused(parse_nccl_tests, cut_row)
    # Only the header: the job never reached the first size.
    assert "result table" in _refused(parse_nccl_tests, "".join(lines[:22]))
    garbled = ALLREDUCE.replace("338.82", "33#.82")
    assert "busbw" in _refused(parse_nccl_tests, garbled)
    _refused(parse_nccl_tests, "")
    _refused(parse_nccl_tests, "srun: error: Unable to create step for job 42: Invalid node name\n")


# --- perftest --------------------------------------------------------------------------------


def test_ib_write_bw_roce_bidirectional_all_sizes() -> None:
    run = parse_perftest_bw(ROCE_BIDIR)
    assert run.test == "RDMA_Write Bidirectional BW Test" and run.bidirectional
    assert (run.link_type, run.roce, run.gid_index, run.mtu_bytes) == ("Ethernet", True, 3, 4096)
    assert (run.qps, run.unit) == (1, "Gb/sec")
    # -a: 2 B to 8 MiB, 2^1 .. 2^23 is 23 sizes.
    assert len(run.rows) == 23
    assert run.largest.message_bytes == 8388608 and run.largest.iterations == 5000
    assert run.largest.average_gbps == 204.59 and run.largest.msg_rate_mpps == 0.003049
    assert run.largest.average_gbs == pytest.approx(25.57, abs=0.01)


def test_ib_write_bw_unterminated_run_is_refused() -> None:
    # DGX Spark's --run_infinitely capture: rows keep coming and no closing rule is printed,
    # exactly what a run killed mid-table looks like.
    assert "cut short" in _refused(parse_perftest_bw, SPARK)
    closed = parse_perftest_bw(SPARK + "-" * 87 + "\n")
    assert (closed.device, closed.link_type, closed.gid_index, closed.mtu_bytes) == (
        "rocep1s0f0",
        "Ethernet",
        3,
        1024,
    )
    assert closed.rows[0].peak_gbps == 0.0 and closed.rows[0].average_gbps == 92.57


def test_ib_write_bw_in_mebibytes_becomes_gigabits() -> None:
    # The same table without --report_gbits: MB/sec is 2^20 bytes per second.
    # 24389.2 MiB/s x 1,048,576 B x 8 b / 1e9 = 204.59 Gb/s.
    text = ROCE_BIDIR.replace("[Gb/sec]", "[MB/sec]").replace(
        "8388608    5000             204.59             204.59",
        "8388608    5000             24389.20           24389.20",
    )
    run = parse_perftest_bw(text)
    assert run.unit == "MB/sec"
    assert run.largest.average_gbps == pytest.approx(204.59, abs=0.01)


def test_ib_write_bw_infiniband_link_type() -> None:
    # No InfiniBand-mode capture with provenance was found (SOURCES.md, Gaps): the RoCE
    # capture's header edited to what perftest prints on IB (Link type IB, no GID index).
    text = ROCE_BIDIR.replace("Link type       : Ethernet", "Link type       : IB").replace(
        "GID index       : 3\n", ""
    )
    run = parse_perftest_bw(text)
    assert (run.link_type, run.roce, run.gid_index) == ("IB", False, None)


def test_ib_write_bw_damaged_and_truncated_are_refused() -> None:
    lines = ROCE_BIDIR.splitlines(keepends=True)
    header_only = "".join(lines[:22])
    assert "result" in _refused(parse_perftest_bw, header_only)
    cut = "".join(lines[:30])
    assert "cut short" in _refused(parse_perftest_bw, cut)
    mangled = ROCE_BIDIR.replace("204.57             204.57", "204.57             20x.57")
    assert "result row" in _refused(parse_perftest_bw, mangled)
    refused = (
        " Couldn't connect to 192.168.200.12:12000\n"
        "Unable to open file descriptor for socket connection"
        " Unable to init the socket connection\n"
    )
    _refused(parse_perftest_bw, refused)


# --- dcgmi diag -j ---------------------------------------------------------------------------


def test_dcgm_level_1_eight_gpus() -> None:
    diag = parse_dcgmi_diag(DCGM_R1)
    assert diag.version == "3.1.0"
    assert diag.categories == ("Deployment", "Custom")
    names = [test.name for test in diag.tests]
    assert names[:3] == ["Denylist", "NVML Library", "CUDA Main Library"]
    assert len(names) == 10  # nine deployment checks and "software"; the nulls skipped
    assert diag.tests[0].results[0].gpus == tuple(range(8))
    software = diag.tests[-1]
    assert [r.gpus for r in software.results] == [(gpu,) for gpu in range(8)]
    assert diag.passed and diag.failing_gpus() == ()


def test_dcgm_failure_names_the_gpu() -> None:
    # The capture with GPU 5's "software" result turned to Fail, as DCGM 3.x spells it.
    text = re.sub(r'("gpu_ids" : 5,\s*"status" : )"PASS"', r'\1"FAIL"', DCGM_R1)
    assert text != DCGM_R1
    diag = parse_dcgmi_diag(text)
    assert not diag.passed
    assert [test.name for test in diag.failed] == ["software"]
    assert diag.failing_gpus() == (5,)


def test_dcgm_4x_root_and_entities() -> None:
    # DCGM 4.x names the root "DCGM Diagnostic" and a result's GPU entity_id (NvvsJsonStrings.h
    # at 4.6.0; DCGM's test_dcgm_diag.py reads these keys). Built from the 3.1 capture's shape.
    text = (
        '{"DCGM Diagnostic": {"version": "4.6.0", "test_categories": [{"category": "Hardware",'
        ' "tests": [{"name": "memory", "test_summary": {"status": "Fail"}, "results": ['
        '{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},'
        '{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3, "status": "Fail",'
        ' "warnings": [{"warning": "Memory error  found", "error_id": 42}]}]}]}]}}'
    )
    diag = parse_dcgmi_diag(text)
    assert diag.version == "4.6.0" and diag.failing_gpus() == (3,)
    assert diag.failed[0].results[1].warnings == ("Memory error found",)


def test_dcgm_damaged_and_truncated_are_refused() -> None:
    # A real level-3 document, trimmed by its author and cut where the index stops: invalid.
    assert "JSON" in _refused(parse_dcgmi_diag, DCGM_R3_CUT)
    assert "JSON" in _refused(parse_dcgmi_diag, DCGM_R1[: len(DCGM_R1) // 2])
    unknown = DCGM_R1.replace('"status" : "PASS"', '"status" : "MAYBE"', 1)
    assert "status" in _refused(parse_dcgmi_diag, unknown)
    no_tests = '{"DCGM GPU Diagnostic": {"test_categories": [], "version": "3.1.0"}}'
    assert "any test" in _refused(parse_dcgmi_diag, no_tests)
    error = '{"DCGM GPU Diagnostic": {"runtime_error": "Unable to connect to host engine"}}'
    assert "could not run" in _refused(parse_dcgmi_diag, error)
    _refused(
        parse_dcgmi_diag,
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n",
    )
    _refused(parse_dcgmi_diag, '{"something": "else"}')


# --- every cut and garbage: fail cleanly, never an internal error or a wrong part ----------


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_nccl_tests, ALLREDUCE),
        (parse_perftest_bw, ROCE_BIDIR),
        (parse_dcgmi_diag, DCGM_R1),
    ],
    ids=["nccl-tests", "perftest", "dcgmi-diag"],
)
def test_truncations_fail_or_give_the_complete_result(check_truncations, parse, text) -> None:
    # Each format ends with a line that says the run finished (the average, the closing
    # rule, the document's last brace): a cut before it is refused, so no cut may parse
    # to less than the whole; cuts inside that last line may shorten its value.
    check_truncations(parse, text)
    lines = text.splitlines(keepends=True)
    for end in range(1, len(lines)):
        with pytest.raises(ParseFailure):
            parse("".join(lines[:end]))


@pytest.mark.parametrize("parse", [parse_nccl_tests, parse_perftest_bw, parse_dcgmi_diag])
def test_garbage_is_refused(garbage, parse) -> None:
    for text in garbage:
        _refused(parse, text)
