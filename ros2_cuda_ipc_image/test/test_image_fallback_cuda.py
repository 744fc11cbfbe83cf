"""GPU machine: frames in a CUDA pool reach a subscriber that has no CUDA (``CUDA_VISIBLE_DEVICES=``) through the
CPU twin, checked byte for byte, while a subscriber with the GPU reads the same frames zero-copy."""

import os

from fallback_runs import far_and_near
from gpu_marks import needs_gpu
from isolation import Place

pytestmark = needs_gpu


def test_a_subscriber_without_cuda_gets_every_frame_of_a_cuda_pool_through_the_twin():
    here = Place((), {**os.environ, "R2CI_MEMORY": "cuda"})
    no_gpu = Place((), {**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    run = far_and_near("image", "fallback_cuda_images", here, no_gpu)
    far, near = run["far"], run["near"]
    assert far["errors"] == [] and far["verified"] == 100, far
    assert far["stats"]["frames"]["zero_copy"] == 0 and far["memory"] == ["host"]
    assert run["far_log"].count("cannot be read zero-copy") == 1, run["far_log"]
    assert near["errors"] == [] and near["verified"] == 100 and near["memory"] == ["cuda"]
    published = "published /fallback_cuda_images/cpu"
    assert run["before"]["twins"][published] == 0 and run["main"]["twins"][published] >= 100
    assert run["end"]["twins"][published] == run["main"]["twins"][published]
