"""The DGX B200 layout as NVIDIA's own user guide lists it ("Introduction to NVIDIA DGX B200
Systems", docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html): 8 B200
GPUs; 2 Xeon 8570 of 56 cores; 2 fifth-generation NVLink switches; 8 single-port
ConnectX-7; 2 TB of DIMMs as shipped (upgradable to 4 TB); 10 U; 14.3 kW max. `myriad init`
writes the layout's memory into the profile, so it must be what a system arrives with."""

from __future__ import annotations

from myriad.spec.loader import shipped_catalog


def test_dgx_b200_is_what_the_user_guide_lists() -> None:
    server = shipped_catalog().servers["DGX-B200"]
    assert (server.gpu_model, server.gpu_count) == ("B200-SXM-180GB", 8)
    assert (server.cpu.sockets, server.cpu.cores_per_socket) == (2, 56)
    assert server.nvswitch == 2
    assert (server.compute_nics.model, server.compute_nics.count) == ("ConnectX-7", 8)
    assert server.memory_gib == 2048
    assert (server.rack_units, server.max_power_kw) == (10, 14.3)
    assert "dgxb200-user-guide" in server.source
