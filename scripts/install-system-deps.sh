#!/usr/bin/env bash
# Installs the Debian packages that the integration tests start for real:
# OpenSSH server (ssh source), tmux (smoke test of the real binary), Prometheus,
# VictoriaMetrics and Alertmanager (prom source, rules, `demo --via`), node_exporter, iproute2 (network namespaces, veth, tc), chromium (the browser view), fish (shell completion). Idempotent;
# skips what is present.
set -euo pipefail
need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || need+=(prometheus)
command -v victoria-metrics >/dev/null 2>&1 || [ -x /usr/bin/victoria-metrics ] || need+=(victoria-metrics)
command -v prometheus-alertmanager >/dev/null 2>&1 || [ -x /usr/bin/prometheus-alertmanager ] \
  || need+=(prometheus-alertmanager)
# a real node_exporter (Debian's) for port state against an exporter nobody here wrote
[ -x /usr/bin/prometheus-node-exporter ] || need+=(prometheus-node-exporter)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v tc >/dev/null 2>&1 || need+=(iproute2)
# the browser test of `infertop serve` (Playwright drives Debian's chromium)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# the completion test loads `infertop completion fish` in a real fish (under CI a skip fails)
command -v fish >/dev/null 2>&1 || need+=(fish)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-system-deps: not root; tests needing ${need[*]} will be skipped" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# --no-install-recommends keeps prometheus from pulling in its whole exporter family
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
