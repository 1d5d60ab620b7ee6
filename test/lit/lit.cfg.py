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
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "shardc", "Inputs")))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
# FileCheck and not come from LLVM's tools; shardc's tools from the build.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["shardc-opt", "shardc"], [config.shardc_tools_dir])
