# GPU batch I (issue 20, the viewer): headless EGL on the NVIDIA driver and CUDA-OpenGL interop through cuda.core.
# Carry wheelhouse/ (its pins now hold moderngl, glcontext, glfw and pillow) and .gl/ (the glvnd loaders:
# libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2, fetched with `apt-get download` as the device notes say).
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
source tools/gpu-batch/setup.sh
ldconfig -p | grep -E "libEGL.so.1|libOpenGL.so.0|libGL.so.1"
echo "== EGL context"; python3 -c "from ros2_cuda_ipc_tools.viewer.surface import open_surface
print(open_surface((16, 16), headless=True).renderer)"
echo "== viewer on CUDA frames"; VIEWER_SNAPSHOT_DIR=$OUT timeout 400 pytest -q -s -rfEs --timeout 240 \
  ros2_cuda_ipc_tools/test/test_viewer_cuda.py 2>&1 | grep -vE "^\[INFO\]|^$" | tail -40
echo "== viewer on host frames, headless on the NVIDIA EGL"; timeout 180 pytest -q -rfEs --timeout 120 \
  ros2_cuda_ipc_tools/test/test_viewer.py -k "headless or cloud or waiting or auto" 2>&1 | tail -4
ls -la "$OUT"; date -u
