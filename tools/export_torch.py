#!/usr/bin/python3
"""Export a PyTorch nn.Module as a shardc graph file (docs/exporter.md).

    /usr/bin/python3 tools/export_torch.py package.module:Class --kwargs '{"n_layer": 2}' \
        --batch 2 --seq 8 -o model.json [--weights model.safetensors --seed 0]

The module is constructed on the meta device (no parameter is allocated)
while every init op is recorded; forward is traced with torch.fx on meta
tensors of the given input shapes. Exit codes: 0 ok, 2 the model cannot be
exported (the message names the parameter or the fx node and its source line).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from shardc_export.export import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
