"""Design-space sweeps: npu-sweep run SPEC.yaml --out DIR, npu-sweep report DIR (docs/architects.md)."""
