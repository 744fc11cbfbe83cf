# Sourced by each GPU batch from the repository root: the machine, then the workspace installed offline
# into the device's own Python from the carried wheelhouse (the dev-tool pins were left out of it).
set -o pipefail; export PYTHONUNBUFFERED=1 ROS_DOMAIN_ID=45
nvidia-smi -L; date -u; lscpu | grep -E "Model name|^CPU\(s\)"
sed -i -E '/^(mypy|mypy_extensions|librt|ast_serialize|pathspec|ruff)==/d' requirements/kilted.txt
python3 tools/workspace.py setup --into-env --python python3 --wheelhouse wheelhouse 2>&1 | grep -v WARNING | tail -1
source .workspace/env.sh
