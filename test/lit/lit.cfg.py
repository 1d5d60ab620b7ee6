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
# checks need it. The pinned environment (docs/python-env.md) has torch 2.15
# and the reference safetensors library. scripts/install-deps.sh installs
# both, so in CI (CI=true) a missing one is an error, never a silent
# UNSUPPORTED; elsewhere the tests that need it are UNSUPPORTED with a note.
import subprocess
in_ci = os.environ.get("CI") == "true"


def python_feature(feature, python, modules):
    # find_spec: present, without paying seconds for importing torch here.
    probe = "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None " \
            "for m in %r))" % (modules,)
    try:
        ok = subprocess.run([python, "-c", probe], capture_output=True).returncode == 0
    except OSError:
        ok = False
    if ok:
        config.available_features.add(feature)
    elif in_ci:
        lit_config.fatal("CI=true but %s lacks %s: run scripts/install-deps.sh"
                         % (python, ", ".join(modules)))
    else:
        lit_config.note("'%s' tests are UNSUPPORTED: %s lacks %s"
                        % (feature, python, ", ".join(modules)))


torch_python = "/usr/bin/python3"
config.substitutions.append(("%torch_python", torch_python))
python_feature("torch", torch_python, ["torch"])
venv_python = os.path.join(os.environ.get("SHARDC_VENV", "/opt/shardc-venv"), "bin", "python")
config.substitutions.append(("%venv_python", venv_python))
python_feature("venv", venv_python, ["torch", "safetensors", "numpy"])
python_feature("torchvision", venv_python, ["torchvision"])
python_feature("torchaudio", venv_python, ["torchaudio"])
# Hugging Face transformers in the same environment (test/lit/export/aten-hf*.test)
python_feature("hf", venv_python, ["torch", "safetensors", "numpy", "transformers"])
# scripts/sanitize.sh's build (it exports ASAN_OPTIONS and builds with
# -fsanitize=address): the OS's memory figures do not hold under
# AddressSanitizer (shadow memory, quarantine), and tests that cap the
# address space (ulimit -v) cannot run with its terabytes of shadow space.
if os.environ.get("ASAN_OPTIONS") or \
        "-fsanitize=address" in getattr(config, "shardc_cxx_flags", ""):
    config.available_features.add("asan")
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "shardc", "Inputs")))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
# FileCheck and not come from LLVM's tools; shardc's tools from the build.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["shardc-opt", "shardc"], [config.shardc_tools_dir])
