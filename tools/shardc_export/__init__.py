"""shardc's PyTorch exporter (tools/export_torch.py, docs/exporter.md)."""
