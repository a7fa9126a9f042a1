"""Exporter pages re-created from the upstream projects' own definitions, driven by a
truth object: what a stock dcgm-exporter, node_exporter or npu-exporter would print for
a machine in that state, byte for byte as far as the format goes.

Versions read (see tests/fixtures/upstream/README.md for where each rule comes from):

- dcgm-exporter 4.5.3-4.8.2 (DCGM 4.5.3): the counters CSV as shipped (a verbatim copy
  lives next to the fixtures); the page is dcgm-exporter's own text template
  (internal/pkg/rendermetrics/render_metrics.go): labels `gpu`, `UUID` (`uuid` with
  --use-old-namespace), `pci_bus_id`, `device`, `modelName`, `Hostname`, then CSV
  "label" fields (DCGM_FI_DRIVER_VERSION) and the XID `err_code`/`err_msg` attributes;
  INT64 fields printed with `%d`, DOUBLE ones with `%f`; no timestamps. Per-link fields
  (entity FE_LINK) are printed with `nvlink`, `gpu`, `gpu_uuid`, …, `hostname`.
- node_exporter 1.12.1: client_golang's text encoder (families sorted by name, labels by
  name, floats as Go `strconv.FormatFloat(f, 'g', -1, 64)`, no timestamps).
- npu-exporter v26.1.0 (Ascend mind-cluster): client_golang's text encoder with
  `NewMetricWithTimestamp` (a millisecond timestamp on every sample), card labels
  `id`, `model_name`, `vdie_id`, `pcie_bus_info`, `namespace`, `pod_name`,
  `container_name` (+ `udie`, `port` on 910A5 per-port network metrics); a failed read
  (`FailedValue`, MaxInt32) printed as -1; NotReport / -1 / MaxUint32 values not printed.

Run `python -m tests.upstream_pages` to rewrite the fixture pages from their truth files.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

UPSTREAM = Path(__file__).parent.parent / "fixtures" / "upstream"
DCGM_VERSION = "4.5.3-4.8.2"
NODE_EXPORTER_VERSION = "1.12.1"
NPU_EXPORTER_VERSION = "v26.1.0"

# --------------------------------------------------------------------------- Go formatting


def go_float(value: float) -> str:
    """client_golang's `writeFloat`: 1, 0 and -1 spelled out, else
    `strconv.AppendFloat(f, 'g', -1, 64)`: the shortest digits, in %e form when the
    exponent is < -4 or >= 6 (Go uses precision 6 for that choice in the shortest form),
    e.g. 1e+06, 1.6656232448e+10, 123456.78, 1e-05."""
    if value == 1:
        return "1"
    if value == 0:
        return "0"
    if value == -1:
        return "-1"
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)) or "0"
    nd = len(text)
    dp = nd + exponent  # position of the decimal point from the left of the digits
    exp = dp - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:
        mantissa = text[0] + ("." + text[1:] if nd > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{text}"
    if dp >= nd:
        return f"{neg}{text}{'0' * (dp - nd)}"
    return f"{neg}{text[:dp]}.{text[dp:]}"


def go_label(value: str) -> str:
    """Label value escaping of the text format (backslash, double quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def go_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


Series = list[tuple[dict[str, str], float]]


def client_golang_page(
    families: dict[str, tuple[str, str, Series]], timestamp_ms: int | None = None
) -> str:
    """client_golang's text exposition: name → (type, help, series). Families sorted by
    name, labels sorted by name, series sorted by their label values."""
    out = []
    for name in sorted(families):
        kind, help_text, series = families[name]
        out.append(f"# HELP {name} {go_help(help_text)}")
        out.append(f"# TYPE {name} {kind}")
        rows = []
        for labels, value in series:
            pairs = sorted(labels.items())
            label_text = ",".join(f'{k}="{go_label(v)}"' for k, v in pairs)
            line = f"{name}{{{label_text}}}" if pairs else name
            line += f" {go_float(value)}"
            if timestamp_ms is not None:
                line += f" {timestamp_ms}"
            rows.append((tuple(v for _, v in pairs), line))
        out.extend(line for _, line in sorted(rows))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- dcgm-exporter

# DCGM 4.5.3 field types (dcgmlib/src/dcgm_fields.cpp) of every field named in the CSVs
_DCGM_DOUBLE = {
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
}
_DCGM_ACTIVITY = {
    "DCGM_FI_PROF_SM_ACTIVE": "sm_active_pct", "DCGM_FI_PROF_SM_OCCUPANCY": "sm_occupancy_pct",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "tensor_active_pct", "DCGM_FI_PROF_DRAM_ACTIVE": "dram_active_pct",
}
_XID_TEXT = {0: "No Error", 13: "Graphics Engine Exception", 79: "GPU has fallen off the bus"}
MIB = 1024 * 1024
# DCGM field 449: (ΔKiB of NVML data TX + RX) / s / 1000, an integer
NVLINK_TOTAL_BYTES_PER_UNIT = 1000 * 1024


def read_counters_csv(path: Path) -> list[tuple[str, str, str]]:
    """(field, prometheus type, help) of the active lines, as dcgm-exporter reads them."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        field, kind, help_text = (part.strip() for part in line.split(",", 2))
        rows.append((field, kind, help_text))
    return rows


def _dcgm_value(field: str, gpu: dict[str, Any]) -> float | str | None:
    """What DCGM reports for `field` on a GPU in the state `gpu` (None: blank, skipped)."""
    t = gpu
    # a figure the page carries that the reader is expected to pass over (a better field
    # wins): kept in the truth under `<figure>_page`
    t = {**t, **{k[: -len("_page")]: v for k, v in t.items() if k.endswith("_page")}}
    table: dict[str, Any] = {
        "DCGM_FI_DEV_SM_CLOCK": t.get("sm_clock_mhz"),
        "DCGM_FI_DEV_GPU_TEMP": t.get("temp_c"),
        "DCGM_FI_DEV_POWER_USAGE": t.get("power_w"),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": None
        if t.get("energy_j_total") is None else t["energy_j_total"] * 1000,  # mJ
        "DCGM_FI_DEV_GPU_UTIL": t.get("util_pct"),
        "DCGM_FI_DEV_XID_ERRORS": t.get("xid_last"),
        "DCGM_FI_DEV_FB_USED": None if t.get("mem_used_bytes") is None else t["mem_used_bytes"] / MIB,
        "DCGM_FI_DEV_FB_FREE": t.get("fb_free_mib"),
        "DCGM_FI_DEV_FB_RESERVED": t.get("fb_reserved_mib"),
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": None if t.get("nvlink_bytes_per_s") is None
        else t["nvlink_bytes_per_s"] / NVLINK_TOTAL_BYTES_PER_UNIT,
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": t.get("clock_event_reasons"),
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": t.get("ecc_uncorrected_total"),
        "DCGM_FI_PROF_NVLINK_TX_BYTES": t.get("nvlink_tx_bytes_per_s"),
        "DCGM_FI_PROF_NVLINK_RX_BYTES": t.get("nvlink_rx_bytes_per_s"),
        "DCGM_FI_DRIVER_VERSION": t.get("driver"),
    }
    # profiling ratios 0–1 on the page, percent in the truth (as infertop keeps them)
    for prof, figure in _DCGM_ACTIVITY.items():
        if figure in t:
            table[prof] = None if t[figure] is None else t[figure] / 100.0  # None: not collected
    if field in table:
        return table[field]
    if field == "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL":
        return t.get("nvlink_errors_total")
    if field.startswith("DCGM_FI_DEV_NVLINK_") and field.endswith("_COUNT_TOTAL"):
        return 0
    return t.get("other", {}).get(field, 0)


def _dcgm_text(field: str, value: float | str) -> str:
    if isinstance(value, str):
        return value
    if field in _DCGM_DOUBLE:
        return f"{value:f}"  # Go %f
    return f"{int(value)}"  # Go %d of an int64


def dcgm_page(truth: dict[str, Any], csv_path: Path) -> str:
    """dcgm-exporter's page for `truth` with the counters of `csv_path`."""
    rows = read_counters_csv(csv_path)
    uuid_label = "uuid" if truth.get("use_old_namespace") else "UUID"
    hostname = truth.get("hostname")
    out = []
    labels_fields = [f for f, kind, _ in rows if kind == "label"]
    for field, kind, help_text in rows:
        if kind == "label":
            continue
        lines = []
        per_link = field in truth.get("per_link", {})
        for gpu in [] if per_link else truth["gpus"]:
            value = _dcgm_value(field, {**gpu, "driver": truth.get("driver")})
            if value is None:
                continue  # blank in DCGM: dcgm-exporter skips the series
            extra = "".join(
                f',{lf}="{_dcgm_value(lf, {**gpu, "driver": truth.get("driver")})}"'
                for lf in sorted(labels_fields)
            )
            if field == "DCGM_FI_DEV_XID_ERRORS":
                code = int(value)
                extra += f',err_code="{code}",err_msg="{_XID_TEXT.get(code, "Unknown Error")}"'
            host = f',Hostname="{hostname}"' if hostname else ""
            lines.append(
                f'{field}{{gpu="{gpu["index"]}",{uuid_label}="{gpu["uuid"]}",'
                f'pci_bus_id="{gpu["pci_bus_id"]}",device="nvidia{gpu["index"]}",'
                f'modelName="{gpu["model"]}"{host}{extra}}} {_dcgm_text(field, value)}'
            )
        for link_gpu in truth.get("per_link", {}).get(field, []):
            lines.extend(_dcgm_link_lines(field, link_gpu, truth))
        if lines:
            out.append(f"# HELP {field} {help_text}")
            out.append(f"# TYPE {field} {kind}")
            out.extend(lines)
    return "\n".join(out) + "\n"


def _dcgm_link_lines(field: str, entry: dict[str, Any], truth: dict[str, Any]) -> list[str]:
    """Per-link series (entity FE_LINK) as the link template prints them."""
    gpu = next(g for g in truth["gpus"] if g["index"] == entry["gpu"])
    host = f',hostname="{truth["hostname"]}"' if truth.get("hostname") else ""
    return [
        f'{field}{{nvlink="{link}",gpu="{gpu["index"]}",gpu_uuid="{gpu["uuid"]}",'
        f'pci_bus_id="{gpu["pci_bus_id"]}",device="nvidia{gpu["index"]}",'
        f'model_name="{gpu["model"]}"{host}}} {_dcgm_text(field, value)}'
        for link, value in enumerate(entry["values"])
    ]


# --------------------------------------------------------------------------- node_exporter

_IB_HELP = {
    "state_id": "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, "
    "4: active, 5: act defer)",
    "physical_state_id": "Physical state of the InfiniBand port (0: no change, 1: sleep, "
    "2: polling, 3: disable, 4: shift, 5: link up, 6: link error recover, 7: phytest)",
    "rate_bytes_per_second": "Maximum signal transfer rate",
    "port_data_received_bytes_total": "Number of data octets received on all links",
    "port_data_transmitted_bytes_total": "Number of data octets transmitted on all links",
    "port_errors_received_total": "Number of packets containing an error that were received on this port",
    "link_error_recovery_total": "Number of times the link successfully recovered from an error state",
    "local_link_integrity_errors_total": "Number of times that the count of local physical "
    "errors exceeded the threshold specified by LocalPhyErrors.",
    "link_downed_total": "Number of times the link failed to recover from an error state and went down",
    "symbol_error_total": "Number of minor link errors detected on one or more physical lanes.",
    "port_transmit_wait_total": "Number of ticks during which the port had data to transmit "
    "but no data was sent during the entire tick",
    "port_discards_received_total": "Number of inbound packets discarded by the port because "
    "the port is down or congested",
    "port_discards_transmitted_total": "Number of outbound packets discarded by the port "
    "because the port is down or congested",
}
_IB_GAUGES = {"state_id", "physical_state_id", "rate_bytes_per_second"}


def node_exporter_page(state: dict[str, Any]) -> str:
    """node_exporter's netdev, netclass and infiniband families for the counters in
    `state` (cumulative values as the kernel holds them at that instant)."""
    fam: dict[str, tuple[str, str, Series]] = {}

    def add(name: str, kind: str, help_text: str, labels: dict[str, str], value: float) -> None:
        fam.setdefault(name, (kind, help_text, []))[2].append((labels, value))

    for dev, d in state["netdev"].items():
        for key in ("receive_bytes", "transmit_bytes", "receive_errs", "transmit_errs",
                    "receive_drop", "transmit_drop", "receive_packets", "transmit_packets"):
            add(f"node_network_{key}_total", "counter", f"Network device statistic {key}.",
                {"device": dev}, d[key])
        add("node_network_up", "gauge", "Value is 1 if operstate is 'up', 0 otherwise.",
            {"device": dev}, 1 if d["operstate"] == "up" else 0)
        add("node_network_speed_bytes", "gauge", "Network device property: speed_bytes",
            {"device": dev}, d["speed_bytes"])
        add("node_network_info", "gauge", "Non-numeric data from /sys/class/net/<iface>, "
            "value is always 1.", {"address": d["address"], "adminstate": "up",
                                   "broadcast": "ff:ff:ff:ff:ff:ff", "device": dev,
                                   "duplex": "full", "ifalias": "", "operstate": d["operstate"]}, 1)
    for (dev, port), p in state["infiniband"].items():
        for key, value in p.items():
            kind = "gauge" if key in _IB_GAUGES else "counter"
            add(f"node_infiniband_{key}", kind, _IB_HELP[key], {"device": dev, "port": port}, value)
    return client_golang_page(fam)


# --------------------------------------------------------------------------- npu-exporter

_NPU_HELP = {
    "npu_chip_info_health_status": "the npu health status",
    "npu_chip_info_power": "the npu power",
    "npu_chip_info_temperature": "the npu temperature",
    "npu_chip_info_utilization": "the ai core utilization",
    "npu_chip_info_hbm_used_memory": "the npu hbm used memory, unit is 'MB'",
    "npu_chip_info_hbm_total_memory": "the npu hbm total memory, unit is 'MB'",
    "npu_chip_info_bandwidth_tx": "the npu interface transport speed, unit is 'MB/s'",
    "npu_chip_info_bandwidth_rx": "the npu interface receive speed, unit is 'MB/s'",
    "npu_chip_link_speed": "the npu interface receive link speed, unit is 'Mb/s'",
    "npu_chip_info_link_status": "the npu link status",
    "npu_chip_link_up_num": "the npu interface receive link-up num",
}
_NPU_PORT_HELP = {
    "npu_chip_info_link_status": "the npu link status on ub port",
    "npu_chip_info_bandwidth_tx": "the npu port transport speed, unit is 'MB/s'",
    "npu_chip_info_bandwidth_rx": "the npu port receive speed, unit is 'MB/s'",
    "npu_chip_info_link_speed": "the npu port link speed, unit is 'G'",
}
FAILED = "failed"  # a DCMI / hccn_tool call that failed: FailedValue → -1 on the page


def _npu_value(value: Any) -> float | None:
    if value == FAILED:
        return -1.0
    return None if value is None else float(value)


def npu_exporter_page(truth: dict[str, Any]) -> str:
    """npu-exporter's page for the chips in `truth` (910B / A3 style one port per chip,
    or 910A5 / Atlas 350 style per-port `udie`/`port` series)."""
    fam: dict[str, tuple[str, str, Series]] = {}

    def add(name: str, labels: dict[str, str], value: float | None, help_text: str | None = None) -> None:
        if value is None:
            return  # not collected / NotReport: npu-exporter prints nothing
        fam.setdefault(name, ("gauge", help_text or _NPU_HELP.get(name, name), []))[2].append(
            (labels, value))

    for chip in truth["chips"]:
        card = {"id": str(chip["id"]), "model_name": chip["model"], "vdie_id": chip["vdie_id"],
                "pcie_bus_info": chip["pcie"], "namespace": "", "pod_name": "", "container_name": ""}
        add("npu_chip_info_health_status", card, _npu_value(
            {True: 1, False: 0}.get(chip["healthy"], chip["healthy"])))
        add("npu_chip_info_power", card, _npu_value(chip.get("power_w")))
        add("npu_chip_info_temperature", card, _npu_value(chip.get("temp_c")))
        add("npu_chip_info_utilization", card, _npu_value(chip.get("util_pct")))
        add("npu_chip_info_hbm_used_memory", card, _npu_value(chip.get("hbm_used_mb")))
        add("npu_chip_info_hbm_total_memory", card, _npu_value(chip.get("hbm_total_mb")))
        net = chip.get("net")
        if net is not None:  # 910B / A3: one RoCE port per chip
            add("npu_chip_info_bandwidth_tx", card, _npu_value(net.get("tx_mb_s")))
            add("npu_chip_info_bandwidth_rx", card, _npu_value(net.get("rx_mb_s")))
            add("npu_chip_link_speed", card, _npu_value(net.get("speed_mbps")))
            add("npu_chip_link_up_num", card, _npu_value(net.get("up_num")))
            status = {"UP": 1, "DOWN": 0, "Unknown": FAILED}[net["status"]]
            add("npu_chip_info_link_status", card, _npu_value(status))
        for port in chip.get("ports", ()):  # 910A5: every (udie, port)
            labels = {**card, "udie": str(port["udie"]), "port": str(port["port"])}
            status = {"UP": 1, "DOWN": 0, "Unknown": FAILED}[port["status"]]
            add("npu_chip_info_link_status", labels, _npu_value(status),
                _NPU_PORT_HELP["npu_chip_info_link_status"])
            add("npu_chip_info_bandwidth_tx", labels, _npu_value(port.get("tx_mb_s")),
                _NPU_PORT_HELP["npu_chip_info_bandwidth_tx"])
            add("npu_chip_info_bandwidth_rx", labels, _npu_value(port.get("rx_mb_s")),
                _NPU_PORT_HELP["npu_chip_info_bandwidth_rx"])
            add("npu_chip_info_link_speed", labels, _npu_value(port.get("speed_g")),
                _NPU_PORT_HELP["npu_chip_info_link_speed"])
        hccs = chip.get("hccs")
        if hccs is not None:  # 910B / A3: links begin at index 1 (A2, 900 A3) or 2
            prefix = "npu_chip_info_hccs_bandwidth_info_"
            for i in range(hccs["begin"], 8):
                add(f"{prefix}tx_{i}", card, _npu_value(hccs["tx_gb_s"][i]),
                    f"single-link transmission data bandwidth for hccs {i}")
                add(f"{prefix}rx_{i}", card, _npu_value(hccs["rx_gb_s"][i]),
                    f"single-link receive data bandwidth for hccs {i}")
            add(f"{prefix}profiling_time", card, float(hccs["profiling_ms"]),
                "sampling interval for hccs bandwidth")
            add(f"{prefix}total_tx", card, _npu_value(hccs["total_tx_gb_s"]), "total sent data bandwidth")
            add(f"{prefix}total_rx", card, _npu_value(hccs["total_rx_gb_s"]), "total received data bandwidth")
            for i in range(hccs["begin"], 8):
                add(f"npu_chip_info_hccs_statistic_info_crc_err_cnt_{i}", card,
                    _npu_value(hccs["crc_err_cnt"][i]), f"crc error count for hccs {i}")
    page = client_golang_page(fam, timestamp_ms=truth["timestamp_ms"])
    machine = (f"# HELP machine_npu_nums Amount of npu installed on the machine.\n"
               f"# TYPE machine_npu_nums gauge\nmachine_npu_nums {len(truth['chips'])}\n")
    return machine + page


# --------------------------------------------------------------------------- fixtures

def load_truth(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((UPSTREAM / f"{name}.truth.json").read_text(encoding="utf-8"))
    return data


def render(name: str) -> list[str]:
    """The pages (one per scrape) a fixture's truth file describes; its `exporter` says
    which renderer."""
    truth = load_truth(name)
    exporter = truth["exporter"]
    if exporter == "dcgm-exporter":
        return [dcgm_page(truth, UPSTREAM / truth["counters_csv"])]
    if exporter == "node_exporter":
        pages = []
        for state in truth["scrapes"]:
            ib = {(d, p): v for d, ports in state["infiniband"].items() for p, v in ports.items()}
            pages.append(node_exporter_page({**state, "infiniband": ib}))
        return pages
    if exporter == "npu-exporter":
        return [npu_exporter_page(truth)]
    raise ValueError(f"unknown exporter {exporter!r}")


def page_files(name: str) -> list[Path]:
    """Where a fixture's pages are kept: `<name>.txt`, or `<name>.<scrape>.txt`."""
    count = len(load_truth(name).get("scrapes", [None]))
    if count == 1:
        return [UPSTREAM / f"{name}.txt"]
    return [UPSTREAM / f"{name}.{i}.txt" for i in range(count)]


FIXTURES = (
    "dcgm-default-4.5.3-4.8.2", "dcgm-old-namespace-4.5.3-4.8.2", "dcgm-recommended-4.5.3-4.8.2",
    "dcgm-per-link-4.5.3-4.8.2",
    "node-exporter-1.12.1", "npu-exporter-910b-v26.1.0", "npu-exporter-910a5-v26.1.0",
)


def main() -> None:
    for name in FIXTURES:
        if (UPSTREAM / f"{name}.truth.json").exists():
            for path, text in zip(page_files(name), render(name), strict=True):
                path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
