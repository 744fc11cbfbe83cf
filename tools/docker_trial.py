"""The README's Docker flags tried with real Docker containers on a development machine: a typed image publisher
in one container, a subscriber in another, each in its own pid namespace (Docker's default), 60 frames checked
byte for byte.  A developer's trial, not part of the packages or of CI (it needs a Docker daemon).

    python tools/docker_trial.py [host] [private] [bridge]

``host``: ``--network host --ipc host``; ``private``: ``--network host``, private IPC, Fast DDS over UDPv4;
``bridge``: Docker's bridge network, private IPC, UDPv4 (the frames then come through the CPU twin, said once).

No image is pulled (the development machines reach no image registry): the containers run an empty image
(``r2ci-host:local``, made here from a tarball of a few directories and symlinks) with this machine's ``/usr``, the
interpreter's prefix and this checkout bind-mounted read-only where they are, so the workspace's venv runs as is.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test_support"))

from fallback_runs import published_there  # noqa: E402
from isolation import Place  # noqa: E402

IMAGE = "r2ci-host:local"


def make_image() -> None:
    """An image of empty directories and the usual /bin, /lib symlinks into /usr (``docker import``)."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for name in ("usr", "etc", "root", "tmp", "dev", "proc", "sys", "run", "var", "opt", str(ROOT)[1:]):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        for link in ("bin", "lib", "lib64", "sbin"):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, f"usr/{link}"
            tar.addfile(info)
    subprocess.run(["docker", "import", "-", IMAGE], input=data.getvalue(), check=True, capture_output=True)


def place(variant: str, name: str) -> Place:
    network, ipc = ("bridge", "private") if variant == "bridge" else ("host", variant)
    env = ["-e", "ROS_DOMAIN_ID=77"] + ([] if ipc == "host" else ["-e", "FASTDDS_BUILTIN_TRANSPORTS=UDPv4"])
    prefix = Path(sys.base_prefix).resolve()
    return Place(("docker", "run", "--rm", "-i", "--name", name, "--network", network, "--ipc", ipc, *env,
                  "-v", "/usr:/usr:ro", "-v", f"{prefix}:{prefix}:ro", "-v", "/etc/ssl:/etc/ssl:ro",
                  "-v", f"{ROOT}:{ROOT}", "-w", str(ROOT), IMAGE, "/usr/bin/bash", "-c",
                  f'source .workspace/env.sh && export PYTHONPATH={ROOT}/test_support:$PYTHONPATH && exec "$@"',
                  "bash"), {})


def main() -> None:
    make_image()
    for variant in sys.argv[1:] or ["host", "private", "bridge"]:
        run = published_there("image", f"docker_trial_{variant}", place(variant, f"camera_{variant}"),
                              place(variant, f"inference_{variant}"), 60, through_twin=variant == "bridge")
        sub = run["sub"]
        said = [line for line in run["log"].splitlines() if "zero-copy" in line]
        print(f"{variant}: {sub['verified']} of 60 frames right, {sub['stats']['frames']}, errors {sub['errors'][:3]}; "
              f"lines said: {said or 'none'}")


if __name__ == "__main__":
    main()
