"""nvidia-smi parsers against real captures (tests/samples, see SOURCES.md there).

Expected values below were read from the capture files by hand.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import (
    GpuFabric,
    NvidiaSmiReport,
    NvlinkStatus,
    ParseFailure,
    PcieLink,
    parse_nvidia_smi_text,
    parse_nvidia_smi_xml,
    parse_nvlink_status,
)
from myriad.node.parsers.common import INTERNAL_ERROR

A100_V12 = "nvidia-smi-q-x/a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
T4_V11 = "nvidia-smi-q-x/tesla-t4_v11_drv515.105.01.xml"
A5000_V13 = "nvidia-smi-q-x/rtx-a5000-x2_v13_drv590.44.01.xml"
H100_TEXT = "nvidia-smi-q-text/h100-80gb-hbm3-x8_drv535.161.08_nvidia-smi-q.txt"
A100_NVLINK = "nvidia-smi-nvlink/a100-sxm4-80gb-x8_nvlink-status.txt"

XML_SAMPLES = [A100_V12, T4_V11, A5000_V13]


# --- XML ---------------------------------------------------------------------------------


def test_xml_v12_a100_mig(sample):
    report = parse_nvidia_smi_xml(sample(A100_V12))
    assert report.driver_version == "535.54.03"
    assert report.cuda_version == "12.2"
    assert report.dtd_version == "v12"
    # The capture is trimmed to one of its four GPUs; attached_gpus still says 4, which
    # is exactly the mismatch a GPU-count check must be able to see.
    assert report.attached_gpus == 4
    assert len(report.gpus) == 1
    gpu = report.gpus[0]
    assert gpu.index == 0
    assert gpu.minor_number == 1
    assert gpu.product_name == "NVIDIA A100-SXM4-80GB"
    assert gpu.uuid == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu.pci_bus_id == "00000000:01:00.0"
    assert gpu.memory_total_mib == 81920
    assert gpu.persistence_mode is False
    assert (gpu.mig_current, gpu.mig_pending) == (True, True)
    assert (gpu.ecc_current, gpu.ecc_pending) == (True, True)
    assert gpu.retired_pages_pending is None  # N/A in the capture
    assert gpu.remapped_rows_pending is None  # <remapped_rows>N/A</remapped_rows>
    assert gpu.remapped_rows_failure is None
    assert gpu.pcie == PcieLink(gen_current=4, gen_max=4, width_current=16, width_max=16)


def test_xml_v11_t4_narrow_link(sample):
    report = parse_nvidia_smi_xml(sample(T4_V11))
    assert (report.driver_version, report.cuda_version) == ("515.105.01", "11.7")
    assert report.dtd_version == "v11"
    (gpu,) = report.gpus
    assert gpu.product_name == "Tesla T4"
    assert gpu.uuid == "GPU-d37e67a5-91dd-3774-a5cb-99096249601a"
    assert gpu.pci_bus_id == "00000000:00:1E.0"
    assert gpu.memory_total_mib == 15360
    assert gpu.mig_current is None and gpu.mig_pending is None
    assert gpu.ecc_current is True
    assert gpu.retired_pages_pending is False
    assert gpu.remapped_rows_pending is None
    # A T4 in an x8 slot: the check for "x16 at the slot's generation" must see this.
    assert gpu.pcie == PcieLink(gen_current=3, gen_max=3, width_current=8, width_max=16)


def test_xml_v13_two_gpus_keep_document_order(sample):
    report = parse_nvidia_smi_xml(sample(A5000_V13))
    assert (report.driver_version, report.cuda_version) == ("590.44.01", "13.1")
    assert report.dtd_version == "v13"
    assert report.attached_gpus == 2
    first, second = report.gpus
    # Index is the position in nvidia-smi's listing; minor numbers run the other way.
    assert (first.index, first.minor_number, first.pci_bus_id) == (0, 1, "00000000:81:00.0")
    assert (second.index, second.minor_number, second.pci_bus_id) == (1, 0, "00000000:C1:00.0")
    for gpu in report.gpus:
        assert gpu.product_name == "NVIDIA RTX A5000"
        assert gpu.persistence_mode is True
        assert gpu.ecc_current is False
        assert gpu.memory_total_mib == 24564
        assert gpu.remapped_rows_pending is False
        assert gpu.remapped_rows_failure is False
        assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable) == (0, 0)
        assert gpu.pcie == PcieLink(gen_current=1, gen_max=4, width_current=16, width_max=16)


@pytest.mark.slow
@pytest.mark.parametrize("name", XML_SAMPLES)
def test_xml_truncated_anywhere_fails_cleanly(sample, check_truncations, name):
    # XML is well-formed only when complete, so no cut may parse (bar trailing blanks).
    text = sample(name)
    check_truncations(parse_nvidia_smi_xml, text)
    for cut in (1, len(text) // 3, len(text) // 2, len(text) - 20):
        with pytest.raises(ParseFailure):
            parse_nvidia_smi_xml(text[:cut])


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [
  <!ENTITY a "aaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
]>
<nvidia_smi_log><driver_version>&c;</driver_version></nvidia_smi_log>
"""

EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log [<!ENTITY leak SYSTEM "file:///etc/passwd">]>
<nvidia_smi_log><driver_version>&leak;</driver_version></nvidia_smi_log>
"""

UNDEFINED_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><driver_version>&leak;</driver_version></nvidia_smi_log>
"""


@pytest.mark.parametrize("document", [BILLION_LAUGHS, EXTERNAL_ENTITY, UNDEFINED_ENTITY])
def test_xml_entities_are_refused(document):
    with pytest.raises(ParseFailure, match="refused"):
        parse_nvidia_smi_xml(document)


def test_xml_zero_gpus_is_a_result_not_a_failure():
    document = (
        '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        "<nvidia_smi_log><driver_version>550.54.15</driver_version>"
        "<cuda_version>12.4</cuda_version><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    )
    report = parse_nvidia_smi_xml(document)
    assert report == NvidiaSmiReport("550.54.15", "12.4", 0, "v12", ())


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ("No devices were found", "not XML: 'No devices were found'"),
        ("<other/>", "not <nvidia_smi_log>"),
        ("<nvidia_smi_log></nvidia_smi_log>", "no driver_version"),
        ("<nvidia_smi_log><driver_version>535.</driver_version></nvidia_smi_log>", "535."),
    ],
)
def test_xml_wrong_documents(document, reason):
    with pytest.raises(ParseFailure, match=reason) as failure:
        parse_nvidia_smi_xml(document)
    assert failure.value.tool == "nvidia-smi -q -x"


def test_xml_unexpected_value_is_named(sample):
    text = sample(T4_V11).replace(
        "<persistence_mode>Disabled</persistence_mode>",
        "<persistence_mode>Maybe</persistence_mode>",
    )
    with pytest.raises(ParseFailure, match=r"persistence_mode.*'Maybe'"):
        parse_nvidia_smi_xml(text)


def test_xml_bracketed_unavailable_values_read_as_none(sample):
    text = sample(T4_V11).replace(
        "<current_ecc>Enabled</current_ecc>", "<current_ecc>[N/A]</current_ecc>"
    )
    assert parse_nvidia_smi_xml(text).gpus[0].ecc_current is None


# --- plain text --------------------------------------------------------------------------

H100_BUS_IDS = [
    "00000000:19:00.0",
    "00000000:3B:00.0",
    "00000000:4C:00.0",
    "00000000:5D:00.0",
    "00000000:9B:00.0",
    "00000000:BB:00.0",
    "00000000:CB:00.0",
    "00000000:DB:00.0",
]


def test_text_h100_eight_gpus(sample):
    report = parse_nvidia_smi_text(sample(H100_TEXT))
    assert (report.driver_version, report.cuda_version) == ("535.161.08", "12.2")
    assert report.attached_gpus == 8
    assert report.dtd_version is None
    assert [gpu.pci_bus_id for gpu in report.gpus] == H100_BUS_IDS
    assert [gpu.minor_number for gpu in report.gpus] == list(range(8))
    assert report.gpus[0].uuid == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"
    assert report.gpus[1].uuid == "GPU-47daa2ad-a218-6286-252b-af45f0dfaf00"
    for gpu in report.gpus:
        assert gpu.product_name == "NVIDIA H100 80GB HBM3"
        assert gpu.memory_total_mib == 81559
        assert gpu.persistence_mode is True
        assert (gpu.mig_current, gpu.mig_pending) == (False, False)
        assert (gpu.ecc_current, gpu.ecc_pending) == (True, True)
        assert gpu.retired_pages_pending is None  # "Pending Page Blacklist : N/A"
        assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (False, False)
        assert (gpu.remapped_rows_correctable, gpu.remapped_rows_uncorrectable) == (0, 0)
        assert gpu.pcie == PcieLink(gen_current=5, gen_max=5, width_current=16, width_max=16)


def test_text_and_xml_give_the_same_dataclass(sample):
    # The same facts under both formats: rebuild a text query from the v12 XML capture's
    # values and compare field by field.
    xml_gpu = parse_nvidia_smi_xml(sample(A100_V12)).gpus[0]
    text = (
        "\n==============NVSMI LOG==============\n\n"
        "Driver Version                            : 535.54.03\n"
        "CUDA Version                              : 12.2\n\n"
        "Attached GPUs                             : 1\n"
        "GPU 00000000:01:00.0\n"
        "    Product Name                          : NVIDIA A100-SXM4-80GB\n"
        "    Persistence Mode                      : Disabled\n"
        "    MIG Mode\n"
        "        Current                           : Enabled\n"
        "        Pending                           : Enabled\n"
        "    GPU UUID                              : GPU-513536b6-7d19-9063-b049-1e69664bb298\n"
        "    Minor Number                          : 1\n"
        "    PCI\n"
        "        Bus Id                            : 00000000:01:00.0\n"
        "        GPU Link Info\n"
        "            PCIe Generation\n"
        "                Max                       : 4\n"
        "                Current                   : 4\n"
        "            Link Width\n"
        "                Max                       : 16x\n"
        "                Current                   : 16x\n"
        "    Clocks Event Reasons\n"
        "        Idle                              : Not Active\n"
        "        HW Slowdown                       : Not Active\n"
        "            HW Thermal Slowdown           : Not Active\n"
        "    FB Memory Usage\n"
        "        Total                             : 81920 MiB\n"
        "    ECC Mode\n"
        "        Current                           : Enabled\n"
        "        Pending                           : Enabled\n"
        "    Retired Pages\n"
        "        Pending Page Blacklist            : N/A\n"
        "    Remapped Rows                         : N/A\n"
        "    Fabric\n"
        "        State                             : N/A\n"
        "        Status                            : N/A\n"
    )
    assert parse_nvidia_smi_text(text).gpus[0] == xml_gpu


@pytest.mark.slow
def test_text_truncations(sample, check_truncations):
    assert check_truncations(parse_nvidia_smi_text, sample(H100_TEXT)) > 0


@pytest.mark.parametrize(
    "message",
    [
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.",
        "No devices were found",
    ],
)
def test_text_error_messages_become_the_reason(message):
    with pytest.raises(ParseFailure) as failure:
        parse_nvidia_smi_text(message + "\n")
    assert message[:40] in failure.value.reason


def test_text_gpu_block_without_identity_fails(sample):
    text = sample(H100_TEXT)
    cut = text.index("GPU 00000000:3B:00.0") + len("GPU 00000000:3B:00.0\n")
    with pytest.raises(ParseFailure, match="Product Name"):
        parse_nvidia_smi_text(text[:cut])


# --- nvlink --status ---------------------------------------------------------------------


def test_nvlink_a100_all_links_up(sample):
    status = parse_nvlink_status(sample(A100_NVLINK))
    assert [gpu.index for gpu in status.gpus] == list(range(8))
    assert status.gpus[0].uuid == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert status.gpus[7].uuid == "GPU-754035b4-4708-efcd-b261-623aea38bcad"
    for gpu in status.gpus:
        assert gpu.name == "NVIDIA A100-SXM4-80GB"
        assert [link.link for link in gpu.links] == list(range(12))
        assert {link.speed_gbps for link in gpu.links} == {25.0}
        assert gpu.active_links == 12
        assert not gpu.all_links_inactive


# Format of an inactive link as nvidia-smi prints it (reported in
# Azure/azhpc-diagnostics issue 73, V100 node).
INACTIVE = """GPU 3: Tesla V100-SXM2-32GB (UUID: GPU-0c8a3f2e-1d4b-4e6f-9a7b-2c3d4e5f6a7b)
         Link 0: 25.781 GB/s
         Link 1: 25.781 GB/s
         Link 2: 25.781 GB/s
         Link 3: <inactive>
         Link 4: 25.781 GB/s
         Link 5: <inactive>
"""


def test_nvlink_inactive_links():
    (gpu,) = parse_nvlink_status(INACTIVE).gpus
    assert gpu.index == 3
    assert [link.inactive for link in gpu.links] == [False, False, False, True, False, True]
    assert gpu.links[0].speed_gbps == 25.781
    assert gpu.links[3].speed_gbps is None
    assert gpu.active_links == 4


def test_nvlink_all_inactive_message():
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa)\n"
        "\t NVML: Unable to retrieve NVLink information as all links are inActive\n"
    )
    (gpu,) = parse_nvlink_status(text).gpus
    assert gpu.all_links_inactive and gpu.links == ()


def test_nvlink_truncations(sample, check_truncations):
    assert check_truncations(parse_nvlink_status, sample(A100_NVLINK)) > 0


@pytest.mark.parametrize(
    "text",
    [
        "         Link 0: 25 GB/s\n",  # no GPU header
        "GPU 0: NVIDIA A100 (UUID: GPU-5269b708-678a-b1a8-60f0-c90406537486)\n  Link 0: 25 GB",
        "GPU 0: NVIDIA A100 (UUID: GPU-5269b708\n",
    ],
)
def test_nvlink_malformed(text):
    with pytest.raises(ParseFailure):
        parse_nvlink_status(text)


# --- all three: empty, garbage, fuzz -----------------------------------------------------

PARSERS = [parse_nvidia_smi_xml, parse_nvidia_smi_text, parse_nvlink_status]


@pytest.mark.parametrize("parse", PARSERS)
def test_empty_and_garbage(parse, garbage):
    for text in garbage:
        if parse is parse_nvlink_status and not text.strip():
            continue  # blank nvlink output means "no NVLink": see the test below
        with pytest.raises(ParseFailure):
            parse(text)


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n"])
def test_blank_nvlink_status_is_a_node_without_nvlink(text):
    # nvidia-smi prints nothing on a node without NVLink; the gpu.nvlink check judges that
    # against the profile instead of calling the fact unreadable.
    assert parse_nvlink_status(text).gpus == ()


def test_text_output_cut_at_a_gpu_boundary_is_truncation(sample):
    # Attached GPUs: 8 is nvidia-smi's own count; a capture cut before the fourth GPU block
    # would otherwise read as a healthy node of three GPUs.
    text = sample(H100_TEXT)
    cut = text.index("GPU 00000000:4C:00.0")
    with pytest.raises(ParseFailure, match=r"Attached GPUs says 8 but 2 GPU block"):
        parse_nvidia_smi_text(text[:cut])


def test_a_control_character_in_processes_is_dropped_not_fatal(sample):
    # One control character in a process name (seen when nvidia-smi runs while processes
    # start) makes the XML not well-formed; nothing reads <processes>, so it is dropped
    # there, while the same character anywhere else still refuses the document.
    text = sample(A100_V12)
    closing = text.index("</gpu>")
    processes = "<processes><process_info><process_name>py\x01thon</process_name>"
    processes += "</process_info></processes>"
    dirty = text[:closing] + processes + text[closing:]
    assert parse_nvidia_smi_xml(dirty).gpus == parse_nvidia_smi_xml(text).gpus
    with pytest.raises(ParseFailure, match="not well-formed"):
        parse_nvidia_smi_xml(text.replace("<driver_version>", "<driver_version>\x01", 1))


@pytest.mark.parametrize("parse", PARSERS)
def test_non_text_input(parse):
    with pytest.raises(ParseFailure, match="expected the output as text"):
        parse(b"<nvidia_smi_log/>")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fuzz_never_raises_anything_else(text):
    for parse in PARSERS:
        try:
            result = parse(text)
        except ParseFailure as failure:
            assert not failure.reason.startswith(INTERNAL_ERROR), failure
        else:
            assert isinstance(result, NvidiaSmiReport | NvlinkStatus)


# --- GPU Recovery Action (driver 565 and newer) --------------------------------------------


def test_recovery_action_from_the_v13_xml(sample):
    # Driver 590.44.01 prints <gpu_recovery_action>None</gpu_recovery_action> for each GPU.
    report = parse_nvidia_smi_xml(sample(A5000_V13))
    assert [g.recovery_action for g in report.gpus] == ["None", "None"]


def test_recovery_action_absent_on_older_drivers(sample):
    # 535 predates the field: not reported, which is not the same as "None".
    assert {g.recovery_action for g in parse_nvidia_smi_xml(sample(A100_V12)).gpus} == {None}
    assert {g.recovery_action for g in parse_nvidia_smi_text(sample(H100_TEXT)).gpus} == {None}


@pytest.mark.parametrize(
    ("printed", "read"),
    [
        ("None", "None"),
        ("Reset", "Reset"),
        ("Reboot", "Reboot"),
        ("Drain P2P", "Drain P2P"),
        ("Drain and Reset", "Drain and Reset"),
        ("N/A", None),
        ("[Not Supported]", None),
    ],
)
def test_recovery_action_in_the_text_query(sample, printed, read):
    # Drivers from 565 print the line right after the "GPU Reset Status" block, as in an
    # 8x H100 capture on 565.57.01 (thamada/nvidia-smi, nvsim/H100SXMx8_smi.py); here it is
    # put into the 535 capture at that place, for every GPU.
    text = sample(H100_TEXT).replace(
        "        Drain and Reset Recommended       : No\n",
        "        Drain and Reset Recommended       : No\n"
        f"    GPU Recovery Action                   : {printed}\n",
    )
    assert text.count("GPU Recovery Action") == 8
    report = parse_nvidia_smi_text(text)
    assert [g.recovery_action for g in report.gpus] == [read] * 8


# --- the Fabric section (NVLink fabric registration) ----------------------------------------

# Fabric blocks quoted from real NVLink-network nodes in public threads (SOURCES.md, rows
# "nvidia-smi-q-fabric"). No whole `nvidia-smi -q` of a GB200/GB300 tray was found in public:
# the tests splice a quoted block into the real H100 capture in place of its own (driver
# 535 prints State and Status only), which is how nvidia-smi nests the section in every
# capture here (four spaces for "Fabric", eight for its fields, as in the H100 capture).
FABRIC_UNHEALTHY = "nvidia-smi-q-fabric/mnnvl_clique2_health-unhealthy_dra-driver-issue626.txt"
FABRIC_NO_CLIQUE = (
    "nvidia-smi-q-fabric/azure-nvlink_insufficient-resources_clique0_azhpc-images-pr506.txt"
)
H100_FABRIC = (
    "    Fabric\n"
    "        State                             : Completed\n"
    "        Status                            : Success\n"
)


def with_fabric(capture: str, block: str) -> str:
    """The H100 capture with every GPU's Fabric section replaced by `block`."""
    assert capture.count(H100_FABRIC) == 8
    return capture.replace(H100_FABRIC, block)


def test_text_h100_fabric_completed_without_clique(sample):
    # Driver 535 on an HGX H100 (Fabric Manager): registered, no clique fields printed.
    for gpu in parse_nvidia_smi_text(sample(H100_TEXT)).gpus:
        assert gpu.fabric == GpuFabric(state="Completed", status="Success")


def test_text_fabric_clique_and_cluster_from_a_real_block(sample):
    text = with_fabric(sample(H100_TEXT), sample(FABRIC_UNHEALTHY))
    for gpu in parse_nvidia_smi_text(text).gpus:
        assert gpu.fabric == GpuFabric(
            state="Completed",
            status="Success",
            clique_id=2,
            cluster_uuid="dc6e40c4-d722-4357-9ba6-5291dd461278",
            health_summary="Unhealthy",
        )


def test_text_fabric_status_other_than_success_is_kept(sample):
    text = with_fabric(sample(H100_TEXT), sample(FABRIC_NO_CLIQUE))
    fabric = parse_nvidia_smi_text(text).gpus[0].fabric
    assert (fabric.state, fabric.status) == ("Completed", "Insufficient Resources")
    assert (fabric.clique_id, fabric.cluster_uuid) == (0, "00000000-0000-0000-0000-000000000000")


def test_xml_fabric_not_applicable(sample):
    # Driver 590 on a workstation (v13): every field N/A; driver 535 (v12): State, Status only.
    for gpu in parse_nvidia_smi_xml(sample(A5000_V13)).gpus:
        assert gpu.fabric == GpuFabric(state="N/A", status="N/A", health_summary="N/A")
    assert parse_nvidia_smi_xml(sample(A100_V12)).gpus[0].fabric == GpuFabric("N/A", "N/A")


def test_xml_fabric_fields_by_their_dtd_names(sample):
    # The v13 capture's element names (cliqueId, clusterUuid, health/summary) with values.
    text = sample(A5000_V13)
    for name, value in [
        ("state", "Completed"),
        ("status", "Success"),
        ("cliqueId", "32766"),
        ("clusterUuid", "9c6f5af3-53bf-49b5-a436-b66766c413c3"),
    ]:
        text = text.replace(f"<{name}>N/A</{name}>", f"<{name}>{value}</{name}>")
    fabric = parse_nvidia_smi_xml(text).gpus[0].fabric
    assert fabric == GpuFabric(
        "Completed", "Success", 32766, "9c6f5af3-53bf-49b5-a436-b66766c413c3", "N/A"
    )


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("CliqueId", "two", "CliqueId"),
        ("ClusterUUID", "dc6e40c4-d722", "ClusterUUID"),
    ],
)
def test_text_fabric_damaged_value_is_refused(sample, field, value, reason):
    block = sample(FABRIC_UNHEALTHY)
    lines = [
        line.split(":")[0] + ": " + value if line.strip().startswith(field) else line
        for line in block.splitlines()
    ]
    text = with_fabric(sample(H100_TEXT), "\n".join(lines) + "\n")
    with pytest.raises(ParseFailure, match=reason):
        parse_nvidia_smi_text(text)


# --- clock event reasons -----------------------------------------------------------------


def test_xml_clock_events_v13_idle_gpu(sample):
    # The A5000 capture's first GPU prints clocks_event_reason_gpu_idle Active and the
    # other eight Not Active (lines 110-118).
    report = parse_nvidia_smi_xml(sample(A5000_V13))
    assert report.gpus[0].clock_events == ("gpu_idle",)


def test_xml_clock_events_before_driver_535_are_throttle_reasons(sample):
    # The T4 capture (driver 515) prints <clocks_throttle_reasons>, all nine Not Active.
    report = parse_nvidia_smi_xml(sample(T4_V11))
    assert report.gpus[0].clock_events == ()


def test_text_clock_events_h100_power_brake(sample):
    # The H100 capture prints "HW Slowdown : Active" and, under it, "HW Power Brake
    # Slowdown : Active" for each of its eight GPUs (lines 87 and 89 for GPU 0).
    report = parse_nvidia_smi_text(sample(H100_TEXT))
    for gpu in report.gpus:
        assert gpu.clock_events == ("hw_slowdown", "hw_power_brake_slowdown")


def test_xml_clock_events_unknown_value_is_no_reading(sample):
    text = sample(T4_V11).replace(
        "<clocks_throttle_reason_hw_slowdown>Not Active<",
        "<clocks_throttle_reason_hw_slowdown>Maybe<",
    )
    with pytest.raises(ParseFailure, match="hw_slowdown: 'Maybe'"):
        parse_nvidia_smi_xml(text)


def test_xml_without_clock_events_section_reads_none(sample):
    text = sample(T4_V11)
    start = text.index("<clocks_throttle_reasons>")
    end = text.index("</clocks_throttle_reasons>") + len("</clocks_throttle_reasons>")
    report = parse_nvidia_smi_xml(text[:start] + text[end:])
    assert report.gpus[0].clock_events is None
