"""The prom source measured apart from the simulated cluster: a real Prometheus's answers,
recorded once at a small size (`record`), replayed by a small HTTP server that synthesises
larger fleets by relabelling the recorded nodes (`server`); `benchmarks.bench_scale` runs
a monitor against it."""
