"""The demo: a simulated DeepInfer cluster (prefill / decode pools, scripted trouble)
served over real HTTP on loopback, for `infertop demo`, tests and benchmarks."""
