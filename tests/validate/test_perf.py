"""--perf: nccl-tests and perftest commands, their output parsed, gated against the plan.

The outputs below are representative text written to each tool's documented format (the
nccl-tests result table with its `# Avg bus bandwidth` line; perftest's `#bytes #iterations
BW peak[...] BW average[...]` table); no GPU or HCA runs here.
"""

from __future__ import annotations

import pytest

from myriad.node.parsers import ParseFailure
from myriad.plan.pipeline import PlanResult, plan_loaded
from myriad.render.inventory import build_inventory
from myriad.validate.perf import (
    GATE_FRACTION,
    MARK,
    PerfPlan,
    allreduce_mpirun,
    allreduce_script,
    allreduce_srun,
    gate,
    ib_client_script,
    ib_server_script,
    ib_write_bw,
    parse_ib_write_bw,
    parse_nccl_tests,
    perf_plan,
    results_from_output,
    sections,
)

from spec_builder import load_example


def _row(size: int, time_us: str, algbw: float, busbw: float, ip_busbw: float, wrong: str) -> str:
    """One result row as nccl-tests prints it (see its common.cu: %12li %12li %8s ...)."""
    count = size // 4
    out_of_place = f"{time_us:>7} {algbw:6.2f} {busbw:6.2f} {wrong:>6}"
    in_place = f"{time_us:>7} {algbw:6.2f} {ip_busbw:6.2f} {wrong:>6}"
    columns = f"{size:>12}  {count:>12}  {'float':>8}  {'sum':>6}  {-1:>6}"
    return f"{columns}  {out_of_place}  {in_place}\n"


HEADER = (
    "# nThread 1 nGpus 1 minBytes 8589934592 maxBytes 17179869184 step: 2(factor)"
    " warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n"
    "#\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid  41017 on    gpu0001 device  0 [0x18] NVIDIA A800-SXM4-80GB\n"
    "#  Rank  8 Group  0 Pid  39811 on    gpu0002 device  0 [0x18] NVIDIA A800-SXM4-80GB\n"
    "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
)
ROWS = _row(8589934592, "91520", 93.86, 175.98, 176.26, "0") + _row(
    17179869184, "182311", 94.23, 176.68, 176.42, "0"
)
FOOTER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 176.335
#
"""
ALLREDUCE = HEADER + ROWS + FOOTER
IB_WRITE = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_0
 Number of qps   : 4            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
 Link type       : Ethernet
 GID index       : 3
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
Conflicting CPU frequency values detected: 2000.000000 != 3400.000000. CPU Frequency is not max.
 1048576    227000           190.52             190.31                0.022687
---------------------------------------------------------------------------------------
"""


def test_nccl_tests_table_is_read_at_the_largest_size() -> None:
    result = parse_nccl_tests(ALLREDUCE)
    assert len(result.rows) == 2
    assert result.largest.size_bytes == 17179869184
    assert result.busbw_gbs == 176.68  # the better of out-of-place and in-place
    assert result.avg_busbw_gbs == 176.335
    assert result.out_of_bounds == 0
    assert result.rows[0].wrong == 0 and result.rows[0].in_place_busbw_gbs == 176.26


def test_nccl_tests_without_root_column_or_with_validation_off() -> None:
    old = ROWS.replace("      -1  ", "  ")  # releases before the root column
    unchecked = ROWS.replace("      0 ", "    N/A ").replace("      0\n", "    N/A\n")
    assert "-1" not in old
    assert parse_nccl_tests(HEADER + old + FOOTER).busbw_gbs == 176.68
    rows = parse_nccl_tests(HEADER + unchecked + FOOTER).rows
    assert rows[0].wrong is None and rows[1].in_place_wrong is None


def test_nccl_log_lines_between_rows_are_ignored() -> None:
    noisy = HEADER + "gpu0001:41017:41017 [0] NCCL INFO Channel 00/02 : 0 1\n" + ROWS + FOOTER
    assert parse_nccl_tests(noisy).busbw_gbs == 176.68


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (HEADER, "could not read a result table"),
        (HEADER + ROWS, "stopped before it finished"),
        ("srun: error: Unable to allocate resources: Invalid node name\n", "result table"),
        (HEADER + ROWS.replace("176.68", "17x.68") + FOOTER, "busbw is not a number"),
    ],
)
def test_nccl_tests_failures_are_parse_failures(text: str, reason: str) -> None:
    with pytest.raises(ParseFailure, match=reason):
        parse_nccl_tests(text)


def test_ib_write_bw_result_line_in_gbits_and_mbytes() -> None:
    result = parse_ib_write_bw(IB_WRITE)
    assert (result.message_bytes, result.iterations) == (1048576, 227000)
    assert result.average_gbps == 190.31
    assert result.average_gbs == pytest.approx(23.79, abs=0.01)
    mbytes = IB_WRITE.replace("Gb/sec", "MB/sec").replace("190.31", "22690.00")
    assert parse_ib_write_bw(mbytes).average_gbps == pytest.approx(190.34, abs=0.01)


@pytest.mark.parametrize(
    "text",
    [
        "Couldn't connect to 10.0.0.12:18515\nUnable to init the socket connection\n",
        IB_WRITE.split(" 1048576")[0],
    ],
)
def test_ib_write_bw_without_a_result_fails_to_parse(text: str) -> None:
    with pytest.raises(ParseFailure):
        parse_ib_write_bw(text)


def test_commands() -> None:
    pair = allreduce_srun(["gpu0001", "gpu0002"], 8, ring=True)
    assert pair == [
        "srun",
        "--nodes=2",
        "--nodelist=gpu[0001-0002]",
        "--ntasks-per-node=8",
        "--gpus-per-node=8",
        "--mpi=pmix",
        "--export=ALL,NCCL_ALGO=Ring",
        "all_reduce_perf",
        "-b",
        "8G",
        "-e",
        "16G",
        "-f",
        "2",
        "-g",
        "1",
    ]
    assert "--export=ALL" in allreduce_srun(["a", "b", "c"], 8, ring=False)
    mpirun = allreduce_mpirun(["gpu1", "gpu2"], 4, ring=True)
    assert mpirun[:5] == ["mpirun", "-np", "8", "-H", "gpu1:4,gpu2:4"]
    assert "NCCL_ALGO=Ring" in mpirun
    server = ib_write_bw("mlx5_3", 18518, gid_index=3)
    assert server[:3] == ["ib_write_bw", "-d", "mlx5_3"]
    assert server[-2:] == ["-x", "3"]
    assert ib_write_bw("mlx5_0", 18515, gid_index=None, server="10.0.0.12")[-1] == "10.0.0.12"


def test_gate_at_ninety_percent_of_the_plan() -> None:
    assert GATE_FRACTION == 0.9
    good = gate("a+b", "perf.allreduce-pair", 91.0, 100.0, "field")
    bad = gate("a+b", "perf.allreduce-pair", 89.0, 100.0, "field")
    missing = gate("a+b", "perf.allreduce-pair", None, 100.0, "field", problem="timed out")
    assert (good.status, bad.status, missing.status) == ("pass", "fail", "error")
    assert good.expected == ">= 90.0 GB/s (90% of the planned 100.0 GB/s)"
    assert bad.actual == "89.0 GB/s (89% of plan)" and bad.fix
    assert missing.actual == "timed out"


def roce_perf() -> tuple[PlanResult, PerfPlan | None]:
    result = plan_loaded(load_example("roce-10k"))
    assert result.plan is not None
    inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    nodes = ["ctl01", "gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005"]
    perf = perf_plan(result.loaded, result.plan.bandwidth, inventory, nodes)
    return result, perf


def test_perf_plan_for_a_roce_slurm_cluster() -> None:
    _, perf = roce_perf()
    assert perf is not None
    assert perf.launcher == "srun" and perf.launch_host == "ctl01"
    assert perf.nodes == ("gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005")
    assert perf.pairs == (("gpu0001", "gpu0002"), ("gpu0003", "gpu0004"))
    assert perf.rails == ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")
    # The example leaves network.roce.gid_index unset: ib_write_bw gets no -x either.
    assert perf.gid_index is None and perf.gpus_per_node == 8
    assert perf.bandwidth.profile == "a800-node"


def test_scripts_and_their_output_sections_gate_each_measurement() -> None:
    _, perf = roce_perf()
    assert perf is not None
    script = allreduce_script(perf)
    assert script.count("--export=ALL,NCCL_ALGO=Ring") == 2
    assert f"echo '{MARK}allreduce gpu0001+gpu0002 ==='" in script
    assert "18518" in ib_server_script(perf)
    assert ib_client_script(perf, "10.0.0.14").count("10.0.0.14") == 4
    busbw = perf.bandwidth.inter_node_busbw_gbs
    assert busbw is not None
    fast = ALLREDUCE.replace("176.68", f"{busbw:.2f}")
    slow = ALLREDUCE.replace("176.68", f"{busbw * 0.5:.2f}").replace("176.42", "1.00")
    output = (
        f"{MARK}allreduce gpu0001+gpu0002 ===\n{fast}"
        f"{MARK}allreduce gpu0003+gpu0004 ===\n{slow}"
        f"{MARK}allreduce all ===\nsrun: error: Unable to allocate resources\n"
    )
    outputs = sections(output)
    assert set(outputs) == {
        "allreduce gpu0001+gpu0002",
        "allreduce gpu0003+gpu0004",
        "allreduce all",
    }
    per_port = perf.bandwidth.per_nic_rdma_gbs
    ib_fast = IB_WRITE.replace("190.31", f"{per_port * 8:.2f}")
    outputs |= {f"gpu0001 mlx5_{i}": ib_fast for i in range(4)}
    outputs["gpu0003 mlx5_2"] = IB_WRITE.replace("190.31", f"{per_port * 8 * 0.5:.2f}")
    results = {(r.node, r.check): r for r in results_from_output(perf, outputs)}
    assert results[("gpu0001+gpu0002", "perf.allreduce-pair")].status == "pass"
    assert results[("gpu0003+gpu0004", "perf.allreduce-pair")].status == "fail"
    everyone = results[("gpu[0001-0005]", "perf.allreduce-all")]
    assert everyone.status == "error" and "could not read" in everyone.actual
    assert results[("gpu0001", "perf.ib-write-bw[mlx5_3]")].status == "pass"
    assert results[("gpu0003", "perf.ib-write-bw[mlx5_2]")].status == "fail"
    assert results[("gpu0003", "perf.ib-write-bw[mlx5_0]")].actual == "the test produced no output"


def test_no_perf_plan_without_two_gpu_nodes() -> None:
    local = plan_loaded(load_example("local"))
    assert local.plan is not None
    inventory = build_inventory(local.loaded.spec, local.loaded.catalog, local.plan)
    assert perf_plan(local.loaded, local.plan.bandwidth, inventory, inventory.hosts) is None
    result, _ = roce_perf()
    assert result.plan is not None
    roce_inventory = build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)
    one = perf_plan(result.loaded, result.plan.bandwidth, roce_inventory, ["ctl01", "gpu0001"])
    assert one is None
