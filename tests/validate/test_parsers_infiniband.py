"""ibstat, sysfs and ibv_devinfo parsers against real captures (tests/samples)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import (
    IbReport,
    ParseFailure,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_sysfs_infiniband,
)
from myriad.node.parsers.common import INTERNAL_ERROR

H100 = "ibstat/h100-node_cx7-mt4129-ndr400-ib_all-active.txt"
MIXED = "ibstat/a100-vm_cx-vf-mt4126_mixed-ethernet-infiniband.txt"
IBPANIC = "ibstat/azure-ndv4-a100_cx6-vf-mt4124-hdr200_ibpanic-exit255.txt"
IBV = "ibv_devinfo/connectx3-mlx4-x2_dualport_ibv_devinfo.txt"
IBV_VERBOSE = "ibv_devinfo/connectx3-mlx4_1-port2-down-polling_ibv_devinfo-v.txt"
SYSFS = "sysfs-infiniband/node_exporter-mlx4_0-i40iw0"

H100_IB_CAS = ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]


# --- ibstat ------------------------------------------------------------------------------


def test_ibstat_h100_all_active_ndr400(sample):
    report = parse_ibstat(sample(H100))
    assert report.errors == ()
    assert [d.name for d in report.devices] == [*H100_IB_CAS, "mlx5_bond_0"]
    for device in report.devices[:-1]:
        assert device.ca_type == "MT4129"
        assert device.firmware == "28.41.1000"
        (port,) = device.ports
        assert port.number == 1
        assert port.rate_gbps == 400
        assert port.state == "Active" and port.active
        assert port.phys_state == "LinkUp" and port.link_up
        assert port.link_layer == "InfiniBand"
        assert port.sm_lid == 1
    first = report.devices[0]
    assert first.node_guid == "0x58a2e10300a7820e"
    assert first.ports[0].lid == 128
    # The storage bond is a RoCE device on the same host: Ethernet at 200.
    bond = report.devices[-1]
    assert (bond.ca_type, bond.firmware) == ("MT41692", "32.38.3056")
    assert bond.ports[0].link_layer == "Ethernet"
    assert bond.ports[0].rate_gbps == 200


def test_ibstat_mixed_ethernet_and_infiniband(sample):
    report = parse_ibstat(sample(MIXED))
    assert [d.name for d in report.devices] == [f"mlx5_{i}" for i in range(9)]
    eth = report.devices[0]
    assert eth.firmware == "22.35.2302"
    assert eth.ports[0].link_layer == "Ethernet"
    for device in report.devices[1:]:
        assert device.firmware == "28.37.1014"
        assert device.ports[0].link_layer == "InfiniBand"
        assert device.ports[0].rate_gbps == 200
        assert device.ports[0].sm_lid == 83
    assert report.devices[8].ports[0].lid == 1396


def test_ibstat_ibpanic_keeps_devices_read_before_the_error(sample):
    report = parse_ibstat(sample(IBPANIC))
    assert [d.name for d in report.devices] == [f"mlx5_{i}" for i in range(8)]
    assert all(d.ports[0].rate_gbps == 200 and d.ports[0].active for d in report.devices)
    assert report.errors == (
        "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory",
    )


def test_ibstat_port_states_are_numbered():
    text = (
        "CA 'mlx5_3'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tFirmware version: 20.39.1002\n"
        "\tHardware version: 0\n\tNode GUID: 0x1070fd0300cf9a12\n"
        "\tSystem image GUID: 0x1070fd0300cf9a12\n\tPort 1:\n\t\tState: Down\n"
        "\t\tPhysical state: Polling\n\t\tRate: 10\n\t\tBase lid: 65535\n\t\tLMC: 0\n"
        "\t\tSM lid: 0\n\t\tCapability mask: 0xa651e848\n"
        "\t\tPort GUID: 0x1070fd0300cf9a12\n\t\tLink layer: InfiniBand\n"
    )
    port = parse_ibstat(text).devices[0].ports[0]
    assert (port.state_code, port.phys_state_code) == (1, 2)
    assert not port.active and not port.link_up


@pytest.mark.parametrize("name", [H100, MIXED, IBPANIC])
def test_ibstat_truncations(sample, check_truncations, name):
    assert check_truncations(parse_ibstat, sample(name)) > 0


def test_ibstat_cut_rate_is_not_read_as_a_smaller_rate(sample):
    text = sample(H100)
    cut = text.index("Rate: 400") + len("Rate: 40")
    with pytest.raises(ParseFailure, match="truncated"):
        parse_ibstat(text[:cut])


def test_ibstat_missing_port_block(sample):
    text = sample(MIXED).replace("Number of ports: 1", "Number of ports: 2", 1)
    with pytest.raises(ParseFailure, match="declares 2 ports but lists 1"):
        parse_ibstat(text)


@pytest.mark.parametrize(
    "text",
    [
        "ibpanic: [123] main: can't find any IB device\n",
        "Warning: ibstat is deprecated\nCA 'mlx5_0'\n",
        "CA 'mlx5_0'\n\tNumber of ports: 1\n\tPort 1:\n\t\tState Active\n",
        "CA 'mlx5_0'\n\tNumber of ports: 1\n\tState: Active\n",
        "CA 'mlx5_0'\n\tNode GUID: 0x58a2e103\n\tNumber of ports: 0\n",
    ],
)
def test_ibstat_malformed(text):
    with pytest.raises(ParseFailure):
        parse_ibstat(text)


# --- sysfs -------------------------------------------------------------------------------


def _sysfs_files(root: Path, prefix: str = "") -> dict[str, str]:
    return {
        prefix + str(path.relative_to(root)): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_sysfs_node_exporter_fixture(samples_dir):
    report = parse_sysfs_infiniband(_sysfs_files(samples_dir / SYSFS))
    devices = {d.name: d for d in report.devices}
    assert set(devices) == {"mlx4_0", "i40iw0"}
    mlx = devices["mlx4_0"]
    assert (mlx.ca_type, mlx.firmware, mlx.board_id) == ("MT4099", "2.31.5050", "SM_1141000001000")
    assert [p.number for p in mlx.ports] == [1, 2]
    for port in mlx.ports:
        assert (port.state, port.state_code, port.active) == ("ACTIVE", 4, True)
        assert (port.phys_state, port.phys_state_code) == ("LinkUp", 5)
        assert (port.rate_gbps, port.width) == (40, "4X")
        assert port.link_layer == "InfiniBand"
    (iwarp,) = devices["i40iw0"].ports
    assert (iwarp.rate_gbps, iwarp.width) == (10, "4X")
    assert devices["i40iw0"].board_id == "I40IW Board ID"


def test_sysfs_absolute_paths_and_hex_lids(samples_dir):
    files = _sysfs_files(samples_dir / SYSFS, prefix="/sys/class/infiniband/")
    files["/sys/class/infiniband/mlx4_0/ports/1/lid"] = "0x16\n"
    files["/sys/class/infiniband/mlx4_0/node_guid"] = "0002:c903:0043:5f40\n"
    mlx = next(d for d in parse_sysfs_infiniband(files).devices if d.name == "mlx4_0")
    assert mlx.ports[0].lid == 22
    assert mlx.node_guid == "0x0002c90300435f40"


def test_sysfs_ndr_rate_text():
    files = {
        "mlx5_0/ports/1/state": "4: ACTIVE\n",
        "mlx5_0/ports/1/phys_state": "5: LinkUp\n",
        "mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)\n",
        "mlx5_0/ports/1/link_layer": "InfiniBand\n",
    }
    (port,) = parse_sysfs_infiniband(files).devices[0].ports
    assert (port.rate_gbps, port.width) == (400, "4X")


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"mlx5_0/ports/1/counters/port_rcv_data": "0\n"},
        {"mlx5_0/ports/1/state": "ACTIVE\n", "mlx5_0/ports/1/link_layer": "InfiniBand"},
        {"mlx5_0/ports/1/state": "4: ACTIVE\n"},
        {"mlx5_0/ports/1/state": "4: ACTIVE", "mlx5_0/ports/1/link_layer": "Infini"},
        {
            "mlx5_0/ports/1/state": "4: ACTIVE",
            "mlx5_0/ports/1/link_layer": "Ethernet",
            "mlx5_0/ports/1/rate": "400 Gb/se",
        },
        {"mlx5_0/ports/x/state": "4: ACTIVE"},
        {"mlx5_0/fw_ver": 28},
    ],
)
def test_sysfs_malformed(files):
    with pytest.raises(ParseFailure):
        parse_sysfs_infiniband(files)


@pytest.mark.parametrize("value", [None, "mlx5_0/ports/1/state", ["a"]])
def test_sysfs_not_a_mapping(value):
    with pytest.raises(ParseFailure):
        parse_sysfs_infiniband(value)


# --- ibv_devinfo -------------------------------------------------------------------------


def test_ibv_devinfo_two_dual_port_hcas(sample):
    report = parse_ibv_devinfo(sample(IBV))
    assert [d.name for d in report.devices] == ["mlx4_1", "mlx4_0"]
    mlx4_1, mlx4_0 = report.devices
    assert mlx4_1.firmware == "2.42.5000"
    assert mlx4_1.board_id == "MT_1090120019"
    assert mlx4_1.ca_type == "4099"  # vendor_part_id as printed
    assert mlx4_1.node_guid == "0x7cfe900300a595c0"
    assert mlx4_0.node_guid == "0xe41d2d0300e0c740"
    for device in report.devices:
        up, down = device.ports
        assert (up.number, up.state, up.state_code) == (1, "PORT_ACTIVE", 4)
        assert (down.number, down.state, down.state_code) == (2, "PORT_DOWN", 1)
        assert up.active_mtu == down.active_mtu == 4096
        assert up.link_layer == down.link_layer == "InfiniBand"
    assert (mlx4_1.ports[0].lid, mlx4_1.ports[0].sm_lid) == (22, 1)
    assert (mlx4_0.ports[0].lid, mlx4_0.ports[0].sm_lid) == (32, 18)


def test_ibv_devinfo_verbose_port_polling(sample):
    (device,) = parse_ibv_devinfo(sample(IBV_VERBOSE)).devices
    assert device.name == "mlx4_1"
    assert device.firmware == "2.42.5000"
    (port,) = device.ports
    assert port.number == 2
    assert (port.state_code, port.phys_state, port.phys_state_code) == (1, "POLLING", 2)
    assert not port.link_up
    assert port.width == "4X"


@pytest.mark.parametrize("name", [IBV, IBV_VERBOSE])
def test_ibv_devinfo_truncations(sample, check_truncations, name):
    assert check_truncations(parse_ibv_devinfo, sample(name)) > 0


@pytest.mark.parametrize(
    "text",
    [
        "No IB devices found\n",
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n",
        "hca_id:\tmlx5_0\n\tDevice ports:\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE\n"
        "\t\t\tlink_layer:\t\tInfiniBand\n",
    ],
)
def test_ibv_devinfo_malformed(text):
    with pytest.raises(ParseFailure):
        parse_ibv_devinfo(text)


# --- shared ------------------------------------------------------------------------------

TEXT_PARSERS = [parse_ibstat, parse_ibv_devinfo]


@pytest.mark.parametrize("parse", TEXT_PARSERS)
def test_empty_and_garbage(parse, garbage):
    for text in garbage:
        with pytest.raises(ParseFailure):
            parse(text)


def _lines_dropped(text: str, drop: list[int]) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(line for i, line in enumerate(lines) if i not in set(drop))


@settings(max_examples=200, deadline=None)
@given(text=st.text(), drop=st.lists(st.integers(min_value=0, max_value=200), max_size=5))
def test_fuzz_never_raises_anything_else(sample, text, drop):
    candidates = [text, *(_lines_dropped(sample(path), drop) for path in (H100, IBV_VERBOSE))]
    for candidate in candidates:
        for parse in TEXT_PARSERS:
            try:
                result = parse(candidate)
            except ParseFailure as failure:
                assert not failure.reason.startswith(INTERNAL_ERROR), failure
            else:
                assert isinstance(result, IbReport)
