# lit configuration for shardc: shardc-opt and shardc CLI tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "shardc"
# bash, so RUN lines can check exit codes with `; echo "exit $?"`.
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.shardc_obj_root, "test", "lit")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]

config.substitutions.append(("%examples", os.path.join(config.shardc_src_root, "examples")))
config.substitutions.append(("%tools", os.path.join(config.shardc_src_root, "tools")))
# PyTorch 1.13 comes with Debian's python; the exporter and the reference
# checks need it. scripts/install-deps.sh installs it, so CI always runs them.
torch_python = "/usr/bin/python3"
config.substitutions.append(("%torch_python", torch_python))
import subprocess
if subprocess.run([torch_python, "-c", "import torch"], capture_output=True).returncode == 0:
    config.available_features.add("torch")
else:
    lit_config.note("torch tests are UNSUPPORTED: /usr/bin/python3 cannot import torch")
# The pinned torch 2.x environment (scripts/install-deps.sh, docs/exporter.md):
# ATen capture (torch.export) is tested there.
venv_python = "/opt/shardc-venv/bin/python"
config.substitutions.append(("%venv_python", venv_python))
if os.path.exists(venv_python) and subprocess.run(
        [venv_python, "-c", "import torch, torch.export"], capture_output=True).returncode == 0:
    config.available_features.add("torch2")
else:
    lit_config.note("torch 2 tests are UNSUPPORTED: %s cannot import torch.export" % venv_python)
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "shardc", "Inputs")))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
# FileCheck and not come from LLVM's tools; shardc's tools from the build.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["shardc-opt", "shardc"], [config.shardc_tools_dir])
