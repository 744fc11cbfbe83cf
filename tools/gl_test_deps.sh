#!/usr/bin/env bash
# The system libraries the viewer's tests draw with on a machine without a GPU: an X server in memory (Xvfb)
# and Mesa's software OpenGL / EGL (llvmpipe).  Installed with apt-get when this runs as root and they are
# missing; otherwise it says what is missing, and those tests skip naming it.
set -euo pipefail
packages=(xvfb xauth libgl1 libgl1-mesa-dri libegl1 libegl-mesa0 libopengl0 libglx-mesa0)
missing=()
command -v Xvfb >/dev/null 2>&1 || missing+=(xvfb xauth)
for lib in libEGL_mesa.so.0 libGLX_mesa.so.0 libOpenGL.so.0 libGL.so.1; do
  ldconfig -p 2>/dev/null | grep -q "${lib}" || { missing=("${packages[@]}"); break; }
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "gl test deps: Xvfb and Mesa's OpenGL/EGL are installed"
elif [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "gl test deps: installing ${packages[*]} (apt-get, as root)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}" >/dev/null; }
else
  echo "gl test deps: missing ${missing[*]} and not root with apt-get: the viewer's window tests will skip"
fi
