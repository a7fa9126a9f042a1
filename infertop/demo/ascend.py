"""The Ascend flavour of the demo: the same simulated nodes, read through npu-exporter.

`infertop demo --platform ascend` serves, per node, an npu-exporter page (current label
generation: ``id``, ``model_name``, ``vdie_id``, ``pcie_bus_info``, …) in place of
dcgm-exporter, and a node_exporter page without InfiniBand HCAs: on an Ascend server
the scale-out network is the NPUs' own RoCE ports, which npu-exporter reports.

Scripted trouble: the node that has two IB ports down in the NVIDIA demo has one NPU
(`BROKEN_NPU`) whose RoCE link is down, flapped a few times, and counts RoCE error and
out-of-order packets; that node shows as link-starved.
"""

from __future__ import annotations

from collections.abc import Callable

from infertop.demo.render import engine_page, node_exporter_page
from infertop.demo.scenario import GPUS_PER_NODE, SimNode

NPU_MODEL = "Ascend950-Ascend-V1"
NPU_HBM_MB = 131072  # 128 GiB a chip
NPU_ROCE_GBPS = 400.0
BROKEN_NPU = 3
BROKEN_FLAPS = 5
BROKEN_ERRORS_PER_S = 40.0

_FAMILIES = (  # name, HELP text (as npu-exporter writes them)
    ("npu_chip_info_utilization", "the ai core utilization"),
    ("npu_chip_info_overall_utilization", "the overall utilization of npu"),
    ("npu_chip_info_hbm_used_memory", "the npu hbm used memory, unit is 'MB'"),
    ("npu_chip_info_hbm_total_memory", "the npu hbm total memory, unit is 'MB'"),
    ("npu_chip_info_power", "the npu power"),
    ("npu_chip_info_temperature", "the npu temperature"),
    ("npu_chip_info_aicore_current_freq", "the npu ai core current frequency, unit is 'MHz'"),
    ("npu_chip_info_health_status", "the npu health status"),
    ("npu_chip_info_link_status", "the npu link status"),
    ("npu_chip_link_speed", "the npu interface receive link speed, unit is 'Mb/s'"),
    ("npu_chip_link_up_num", "the npu interface receive link-up num"),
    ("npu_chip_info_bandwidth_rx", "the npu interface receive speed, unit is 'MB/s'"),
    ("npu_chip_info_bandwidth_tx", "the npu interface transport speed, unit is 'MB/s'"),
    ("npu_chip_roce_rx_err_pkt_num", "the npu interface receive roce-rx-err-pkt-num"),
    ("npu_chip_roce_tx_err_pkt_num", "the npu interface receive roce-tx-err-pkt-num"),
    ("npu_chip_roce_out_of_order_num", "the npu interface receive roce-out-of-order-num"),
)


def _broken(node: SimNode, npu: int) -> bool:
    return node.plan.trouble == "ports_down" and npu == BROKEN_NPU


def npu_exporter_page(node: SimNode, now: float) -> str:
    g = node.advance(now)
    uptime = max(now - node.started_at, 0.0)
    fabric_bytes_per_s = sum(v for k, v in node.link_bytes_per_s(g).items() if k.startswith("mlx5_"))
    rows: dict[str, list[str]] = {name: [] for name, _ in _FAMILIES}
    hbm_used = 0.03 * NPU_HBM_MB if node.plan.trouble == "idle" else 0.91 * NPU_HBM_MB
    for npu in range(GPUS_PER_NODE):
        util = node.gpu_util(g, npu)
        broken = _broken(node, npu)
        errors = BROKEN_ERRORS_PER_S * uptime if broken else 0.0
        mb_per_s = 0.0 if broken else fabric_bytes_per_s / GPUS_PER_NODE / 1e6
        values = {
            "npu_chip_info_utilization": round(util),
            "npu_chip_info_overall_utilization": round(min(100.0, util + 3)),
            "npu_chip_info_hbm_used_memory": round(hbm_used),
            "npu_chip_info_hbm_total_memory": NPU_HBM_MB,
            "npu_chip_info_power": round(180.0 + 4.2 * util, 1),
            "npu_chip_info_temperature": round(35 + 0.4 * util),
            "npu_chip_info_aicore_current_freq": 1650,
            "npu_chip_info_health_status": 1,
            "npu_chip_info_link_status": 0 if broken else 1,
            "npu_chip_link_speed": int(NPU_ROCE_GBPS * 1000),
            "npu_chip_link_up_num": BROKEN_FLAPS if broken else 1,
            "npu_chip_info_bandwidth_rx": round(mb_per_s, 1),
            "npu_chip_info_bandwidth_tx": round(mb_per_s, 1),
            "npu_chip_roce_rx_err_pkt_num": round(errors),
            "npu_chip_roce_tx_err_pkt_num": round(errors * 0.1),
            "npu_chip_roce_out_of_order_num": round(errors * 0.05),
        }
        labels = (
            f'container_name="",id="{npu}",model_name="{NPU_MODEL}",namespace="",'
            f'pcie_bus_info="0000:{0xC1 + npu:02X}:00.0",pod_name="",'
            f'vdie_id="{node.plan.index:08X}-{npu:08X}-950A0000-00000000-00000000"'
        )
        for name, value in values.items():
            rows[name].append(f"{name}{{{labels}}} {value}")
    out = [
        "# HELP machine_npu_nums Amount of npu installed on the machine.",
        "# TYPE machine_npu_nums gauge",
        f"machine_npu_nums {GPUS_PER_NODE}",
    ]
    for name, help_ in _FAMILIES:
        out += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", *rows[name]]
    return "\n".join(out) + "\n"


def ascend_node_exporter_page(node: SimNode, now: float) -> str:
    """node_exporter as on an Ascend server: host Ethernet and bond, no InfiniBand HCAs."""
    text = node_exporter_page(node, now)
    return "\n".join(line for line in text.splitlines() if 'device="mlx5_' not in line) + "\n"


ASCEND_ENDPOINTS: dict[str, Callable[[SimNode, float], str]] = {
    "engine": engine_page,
    "npu": npu_exporter_page,
    "node": ascend_node_exporter_page,
}


def ascend_nics_toml() -> str:
    """The layout's expected ports on an Ascend node: host Ethernet, the bond, NPU RoCE."""
    ports = [f'{{ name = "npu{i}-roce", expected_gbps = {NPU_ROCE_GBPS:g} }}' for i in range(GPUS_PER_NODE)]
    return ", ".join(ports)
