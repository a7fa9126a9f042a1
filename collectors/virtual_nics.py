"""Which network devices are container / virtual plumbing, not a node's ports.

A Kubernetes GPU host has a handful of real interfaces and dozens of virtual ones: a veth
per pod, the CNI's bridges and tunnels, docker0. They carry no traffic that is not also
counted on a real port, they come and go with pods, and each one costs the monitor a
NIC carried through evaluation, the record, the viewer channel and the screen. So no
source reads them: node_exporter pages (collectors.pages.node_exporter), the SSH probe and the
local source (collectors.probe.host) ask `keeps_nic` for every device.

A device the layout names as an expected port is always kept, whatever its name
(`keep`): the layout's word beats the rule. `lo` is not in the rule (it is cheap and the
views already leave it out of a node's links).

Stdlib only, Python 3.7+: the SSH probe bundles this file (collectors/probe/bundle.py).
"""

from __future__ import annotations

import re
from collections.abc import Container

# Full-match patterns, one family of plumbing each. kube-prometheus-stack's node-exporter
# drops `^(veth.*|[a-f0-9]{15})$` by default (--collector.netdev.device-exclude): pod veths,
# and the 15-hex-digit host ends some CNIs name after the container (OVN-Kubernetes). The
# rest are what CNIs, Docker, libvirt and the kernel's tunnel modules create.
VIRTUAL_NIC_PATTERNS: tuple[str, ...] = (
    r"veth.*",  # pod / container veth pairs (Docker, containerd CNIs, Weave's vethwe-*)
    r"[a-f0-9]{15}",  # OVN-Kubernetes and others: the container id as the host end's name
    r"eni[a-f0-9]{11}",  # AWS VPC CNI's pod veths
    r"lxc.*",  # Cilium's pod veths, LXC
    r"cali.*",  # Calico's pod veths
    r"docker.*", r"br-[a-f0-9]{12}",  # Docker's default and user-defined bridges
    r"cni.*", r"cbr0", r"kube-bridge", r"kube-dummy-if",  # CNI / kubenet / kube-router bridges
    r"flannel.*", r"vxlan.*", r"genev_sys_.*", r"cilium_.*", r"weave", r"datapath",  # overlays
    r"antrea-.*", r"ovn-k8s-mp[0-9]+", r"ovs-system",  # Antrea, OVN-Kubernetes, Open vSwitch
    r"kube-ipvs[0-9]+", r"nodelocaldns",  # kube-proxy IPVS and NodeLocal DNSCache dummies
    r"virbr.*", r"vnet[0-9]+", r"tap.*",  # libvirt bridges and VM taps
    r"dummy[0-9]+",
    # the fallback devices the kernel's tunnel modules create once loaded
    r"tunl0", r"sit0", r"ip6tnl0", r"ip_vti0", r"ip6_vti0", r"gre0", r"gretap0", r"erspan0",
    r"ip6gre0", r"ip6erspan0",
)
# Python's syntax and PromQL's (RE2, anchored) alike: collectors.sources.promql uses the same text
VIRTUAL_NIC_REGEX = "|".join(VIRTUAL_NIC_PATTERNS)
_VIRTUAL_NIC = re.compile(VIRTUAL_NIC_REGEX)


def is_virtual_nic(name: str) -> bool:
    """True when `name` is container / virtual plumbing by its name alone."""
    return _VIRTUAL_NIC.fullmatch(name) is not None


def keeps_nic(name: str, keep: Container[str] = ()) -> bool:
    """Whether a source reads the device `name`: a real port, or one named in `keep`
    (the ports the layout expects on the node)."""
    return name in keep or _VIRTUAL_NIC.fullmatch(name) is None
