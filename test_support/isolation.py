"""Test support (not shipped): a real "other host" (a network namespace joined by a veth pair) and a real other user.

A "container" (:func:`other_pid_namespace`) is what ``docker run --network host`` gives a node: its own pid and
mount namespaces, its own /tmp and, unless ``--ipc host``, its own /dev/shm; the network (and so the pools'
abstract sockets) shared.  Abstract Unix sockets belong to a network namespace, so a process in another one cannot reach a pool's
FD server: to ros2_cuda_ipc it is another host.  DDS is kept to the veth pair by a Fast DDS XML profile
(UDPv4 only, no shared-memory transport, every locator on the pair's addresses, unicast initial peers),
and those addresses live only on the pair.  Everything made here (namespace, links, user, files) is
removed on the way out, also when the test fails.  Both need root; :func:`isolation_unavailable` says why
not where they cannot run.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: Where the administration commands live when PATH leaves them out (a non-login root shell, a minimal env).
ADMIN_FOLDERS = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


def admin_tool(name: str) -> str | None:
    """The path of ``ip``, ``useradd``, ``userdel``: on PATH or in the sbin folders; None if there is none."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(ADMIN_FOLDERS))


def pid_namespaces_unavailable() -> str | None:
    """Why pid and mount namespaces cannot be made here (``unshare``, ``nsenter`` as root), or None."""
    if os.geteuid() != 0:
        return "needs root (unshare --pid --mount)"
    for tool in ("unshare", "nsenter"):
        if admin_tool(tool) is None:
            return f"needs the {tool} command"
    return None


def isolation_unavailable() -> str | None:
    """Why namespaces and users cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (ip netns, useradd)"
    for tool in ("ip", "useradd", "userdel"):
        if admin_tool(tool) is None:
            return f"needs the {tool} command"
    return None


def _run(tool: str, *args: str, check: bool = True) -> None:
    subprocess.run([admin_tool(tool) or tool, *args], check=check, capture_output=True, text=True)


@contextmanager
def system_user(name: str) -> Iterator[tuple[int, int]]:
    """(uid, gid) of a fresh system user ``name`` (one left by an earlier run is replaced), removed afterwards."""
    _run("userdel", name, check=False)
    _run("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name)
    try:
        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:  # the test has ended the user's processes (its own peers) by then
        _run("userdel", name, check=False)


def fastdds_profile(path: Path, address: str, peers: Sequence[str]) -> Path:
    """Write a default participant profile: UDPv4 only (no shared memory), every locator on ``address``, ``peers``
    as unicast initial peers.

    Locators rather than an ``interfaceWhiteList``: with a white-list of the veth address (or name), Fast DDS
    3.2 participants here never discovered each other over the pair, while the same profile with explicit
    unicast locators did, and it still announces and binds nothing but the pair's addresses.
    """
    here = f"<locator><udpv4><address>{address}</address></udpv4></locator>"
    locators = "".join(f"<locator><udpv4><address>{peer}</address></udpv4></locator>" for peer in peers)
    path.write_text(f"""<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>isolated_udp</transport_id>
        <type>UDPv4</type>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="isolated" is_default_profile="true">
      <rtps>
        <userTransports><transport_id>isolated_udp</transport_id></userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
        <defaultUnicastLocatorList>{here}</defaultUnicastLocatorList>
        <builtin>
          <metatrafficUnicastLocatorList>{here}</metatrafficUnicastLocatorList>
          <initialPeersList>{locators}</initialPeersList>
        </builtin>
      </rtps>
    </participant>
  </profiles>
</dds>
""")
    return path


def dds_env(profile: Path) -> dict[str, str]:
    """This process's environment with DDS as ``profile`` says, and nothing of ROS's own range settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("ROS_LOCALHOST_ONLY", "ROS_STATIC_PEERS")}
    # Both names: Fast DDS 3 (Jazzy, Kilted) reads the first, 2.x (Humble) the second; 3 warns that it is deprecated.
    env.update(FASTDDS_DEFAULT_PROFILES_FILE=str(profile), FASTRTPS_DEFAULT_PROFILES_FILE=str(profile),
               ROS_AUTOMATIC_DISCOVERY_RANGE="SYSTEM_DEFAULT", RMW_IMPLEMENTATION="rmw_fastrtps_cpp")
    return env


@dataclass(frozen=True)
class Place:
    """Where a peer runs: the command prefix that puts it there and its environment."""

    prefix: tuple[str, ...]
    env: dict[str, str]

    def command(self, *args: str) -> list[str]:
        return [*self.prefix, *args]


@contextmanager
def other_host() -> Iterator[tuple[Place, Place]]:
    """(here, there): "there" is a fresh network namespace, reached over a veth pair only."""
    tag = f"{os.getpid() % 100000}"
    netns, outer, inner = f"r2ci{tag}", f"r2o{tag}", f"r2i{tag}"
    subnet = f"10.{200 + os.getpid() % 50}.{(os.getpid() // 50) % 250}"
    here_ip, there_ip = f"{subnet}.1", f"{subnet}.2"
    folder = Path(tempfile.mkdtemp(prefix="r2ci-netns-"))
    try:
        _run("ip", "netns", "add", netns)
        _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        _run("ip", "link", "set", inner, "netns", netns)
        _run("ip", "addr", "add", f"{here_ip}/30", "dev", outer)
        _run("ip", "link", "set", outer, "up")
        inside = (admin_tool("ip") or "ip", "netns", "exec", netns)
        ip = admin_tool("ip") or "ip"  # run inside the namespace by path too: `ip netns exec` searches PATH
        _run(*inside, ip, "addr", "add", f"{there_ip}/30", "dev", inner)
        _run(*inside, ip, "link", "set", inner, "up")
        _run(*inside, ip, "link", "set", "lo", "up")
        peers = (here_ip, there_ip)
        here = Place((), dds_env(fastdds_profile(folder / "here.xml", here_ip, peers)))
        there = Place(inside, dds_env(fastdds_profile(folder / "there.xml", there_ip, peers)))
        yield here, there
    finally:
        _run("ip", "netns", "del", netns, check=False)  # takes its end of the pair with it
        _run("ip", "link", "del", outer, check=False)  # if it was made but never moved
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def other_user() -> Iterator[tuple[Place, Place, int]]:
    """(here, as_other, uid): a fresh system user; both places speak DDS over UDP on loopback (no shared memory,
    whose segments another user could not open).

    A peer started "as_other" starts as root and drops to the user's uid and gid itself (``R2CI_RUN_AS``) once
    its imports are done: this workspace's interpreter may sit under a 0700 /root that ``runuser`` could not
    start it from.  From then on every socket it opens carries that uid, which is what ``SO_PEERCRED`` sees.
    """
    name = f"r2ci{os.getpid() % 100000}"
    folder = Path(tempfile.mkdtemp(prefix="r2ci-user-"))
    try:
        with system_user(name) as (uid, gid):
            os.chmod(folder, 0o755)
            env = dds_env(fastdds_profile(folder / "loopback.xml", "127.0.0.1", ["127.0.0.1"]))
            home = folder / "home"
            home.mkdir()
            os.chown(home, uid, gid)
            theirs = {**env, "HOME": str(home), "ROS_LOG_DIR": str(home / "log"), "USER": name,
                      "R2CI_RUN_AS": f"{uid}:{gid}"}
            yield Place((), env), Place((), theirs), uid
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def other_pid_namespace(private_shm: bool, private_tmp: bool = True) -> Iterator[tuple[Place, Place]]:
    """(here, container): "container" runs a peer as pid 1's child in a fresh pid and mount namespace
    (``unshare --pid --fork --mount-proc``) with a private /tmp (where the interpreter is not under it) and, with
    ``private_shm``, a private /dev/shm; then both places speak DDS over UDP on loopback, as Fast DDS's
    shared-memory transport cannot cross a private /dev/shm.  The namespaces end with the peer."""
    mounts = []
    if private_tmp and not any(str(path).startswith("/tmp/")
                               for path in (sys.executable, Path(__file__).resolve(), Path.cwd())):
        mounts.append("mount -t tmpfs r2ci-tmp /tmp")
    # The DDS profile must be there inside too, so not under a /tmp the container replaces (as a Docker user
    # bind-mounts theirs); /var/tmp stays the host's.
    folder = Path(tempfile.mkdtemp(prefix="r2ci-pidns-", dir="/var/tmp" if mounts else None))
    try:
        if private_shm:
            mounts.append("mount -t tmpfs r2ci-shm /dev/shm")
        script = " && ".join([*mounts, 'exec "$@"'])
        unshare = admin_tool("unshare") or "unshare"
        inside = (unshare, "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--propagation", "private",
                  "sh", "-c", script, "sh")
        loopback_only = dds_env(fastdds_profile(folder / "loopback.xml", "127.0.0.1", ["127.0.0.1"]))
        env = loopback_only if private_shm else dict(os.environ)
        yield Place((), env), Place(inside, env)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def stale_proc_pid_namespace() -> Place:
    """A fresh pid namespace that keeps the /proc of the namespace it came from (``unshare --pid`` without
    ``--mount-proc``): the kernel numbers its peers one way and its /proc another, so /proc cannot say who a
    peer is.  A peer started here is the namespace's pid 1; :func:`inside` puts others in its namespace."""
    unshare = admin_tool("unshare") or "unshare"
    return Place((unshare, "--pid", "--fork", "--kill-child"), dict(os.environ))


def inside(pid_one_of: subprocess.Popen, place: Place) -> Place:
    """``place`` entered from within the pid namespace whose pid 1 is the child of ``pid_one_of`` (an ``unshare``
    started by :func:`stale_proc_pid_namespace`)."""
    children = Path(f"/proc/{pid_one_of.pid}/task/{pid_one_of.pid}/children")
    for _ in range(100):
        child = children.read_text().split()
        if child:
            break
        time.sleep(0.05)
    else:
        raise RuntimeError(f"unshare (pid {pid_one_of.pid}) started no process")
    nsenter = admin_tool("nsenter") or "nsenter"
    return Place((nsenter, "--target", child[0], "--pid", *place.prefix), place.env)
