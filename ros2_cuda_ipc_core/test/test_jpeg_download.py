"""The JPEG encoder (Pillow on the host, nvJPEG through torchvision on the GPU) and BackgroundDownload."""

import io
import threading

import numpy as np
import pytest
from gpu_marks import needs_gpu

from ros2_cuda_ipc_core import BackgroundDownload, JpegUnavailableError, encode_jpeg, jpeg_backend, warm_up_jpeg
from ros2_cuda_ipc_core.typed import jpeg


def gradient(channels: int = 3) -> np.ndarray:
    rows, cols = np.mgrid[:40, :56]
    planes = [(rows * 5) % 256, cols * 4, 200 - cols * 3, np.full_like(rows, 9)][:channels]
    return np.stack(planes, axis=-1).astype(np.uint8)


def decode(data: bytes, mode: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert(mode))


@pytest.mark.parametrize("order, channels", [("rgb", 3), ("bgr", 3), ("rgba", 4), ("bgra", 4)])
def test_host_images_decode_to_their_colours(order, channels):
    image = gradient(channels)
    rgb = image[:, :, [2, 1, 0]] if order.startswith("bgr") else image[:, :, :3]
    decoded = decode(encode_jpeg(image, order, 95), "RGB")
    assert np.abs(decoded.astype(int) - rgb).mean() < 2.0


def test_mono_and_padded_rows():
    padded = np.zeros((40, 64), np.uint8)
    padded[:, :56] = gradient(1)[:, :, 0]
    view = padded[:, :56]  # rows 64 bytes apart
    assert np.abs(decode(encode_jpeg(view, "mono", 95), "L").astype(int) - view).mean() < 2.0


def test_refusals():
    with pytest.raises(ValueError, match="quality 0"):
        encode_jpeg(gradient(), "rgb", 0)
    with pytest.raises(ValueError, match="no rgba 8-bit image"):
        encode_jpeg(gradient(3), "rgba")
    with pytest.raises(ValueError, match="no rgb 8-bit image"):
        encode_jpeg(gradient().astype(np.uint16), "rgb")


def test_no_encoder_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(jpeg.importlib.util, "find_spec", lambda name: None)
    assert jpeg_backend("host") is None
    with pytest.raises(JpegUnavailableError, match="pip install Pillow"):
        encode_jpeg(gradient(), "rgb")


@needs_gpu
def test_a_cuda_frame_is_encoded_on_the_gpu_without_a_host_copy(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")

    def no_download(*args):
        raise AssertionError("the raw frame was copied to the host")

    monkeypatch.setattr(jpeg, "_host_array", no_download)
    image = gradient()
    stream = torch.cuda.Stream()
    cuda = torch.from_numpy(image).cuda()
    torch.cuda.synchronize()
    assert jpeg_backend("cuda") == "torchvision"
    decoded = decode(encode_jpeg(cuda, "bgr", 95, stream=stream), "RGB")
    assert np.abs(decoded.astype(int) - image[:, :, [2, 1, 0]]).mean() < 2.0


def test_warm_up_loads_the_host_encoder():
    import sys

    assert warm_up_jpeg("host") == "pillow" and "PIL.JpegImagePlugin" in sys.modules


def test_warm_up_without_an_encoder_says_so(monkeypatch):
    monkeypatch.setattr(jpeg.importlib.util, "find_spec", lambda name: None)
    assert warm_up_jpeg("cuda") is None


@needs_gpu
def test_warm_up_on_the_gpu_starts_torch_cuda_and_nvjpeg():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    assert warm_up_jpeg("cuda", 0) == "torchvision"
    assert torch.cuda.is_initialized()


class Closable:
    def __init__(self):
        self.closed = threading.Event()

    def close(self):
        self.closed.set()


def test_background_download_runs_one_frame_at_a_time_and_drops_while_busy():
    release, ran, then_saw_closed = threading.Event(), [], []
    leased = []

    def lease(stream):
        leased.append(stream)
        return Closable()

    first = Closable()

    def work(view):
        release.wait(10)
        ran.append(view)
        return lambda: then_saw_closed.append(view.closed.is_set())

    with BackgroundDownload("test") as worker:
        assert worker.submit(lambda stream: first, work)
        assert not worker.submit(lease, work)  # busy: refused, nothing leased
        assert leased == [] and worker.stats()["busy_drops"] == 1
        release.set()
        assert first.closed.wait(10)  # the view is closed once its work is done
    assert ran == [first] and worker.stats()["done"] == 1
    assert then_saw_closed == [True]  # what the work returned ran after the lease went back


def test_background_work_that_raises_is_counted_and_its_view_closed():
    view = Closable()
    with BackgroundDownload("test") as worker:
        assert worker.submit(lambda stream: view, lambda v: 1 / 0)
        assert view.closed.wait(10)
    assert worker.stats()["failed"] == 1
    assert not worker.submit(lambda stream: Closable(), print)  # closed: refused


def test_a_warm_up_runs_on_the_worker_before_the_work_and_frames_offered_meanwhile_are_counted_apart():
    release, order = threading.Event(), []
    first = Closable()

    def warm_up():
        order.append(("warm_up", threading.current_thread()))
        release.wait(10)

    with BackgroundDownload("test") as worker:
        assert worker.submit(lambda stream: first, lambda view: order.append(("work", view.closed.is_set())),
                             warm_up=warm_up)
        assert not worker.submit(lambda stream: Closable(), print)
        assert not worker.submit(lambda stream: Closable(), print)
        stats = worker.stats()
        assert (stats["warmup_drops"], stats["busy_drops"]) == (2, 0)
        release.set()
        assert first.closed.wait(10)
    assert [step for step, _ in order] == ["warm_up", "work"] and order[0][1] is not threading.current_thread()
    assert worker.stats()["done"] == 1  # the frame leased before the warm-up was worked on after it: not lost


def test_a_warm_up_that_fails_is_logged_and_the_frame_is_worked_on_all_the_same(caplog):
    view, worked = Closable(), []

    def warm_up():
        raise RuntimeError("no nvJPEG here")

    with BackgroundDownload("test") as worker:
        assert worker.submit(lambda stream: view, worked.append, warm_up=warm_up)
        assert view.closed.wait(10)
    assert worked == [view] and worker.stats()["done"] == 1 and worker.stats()["failed"] == 0
    assert "a warm-up failed" in caplog.text and "no nvJPEG here" in caplog.text


def test_work_after_a_warm_up_is_skipped_when_the_worker_closed_meanwhile():
    release, worked, view = threading.Event(), [], Closable()
    worker = BackgroundDownload("test")
    assert worker.submit(lambda stream: view, worked.append, warm_up=lambda: release.wait(10))
    closing = threading.Thread(target=worker.close)
    closing.start()
    while not worker._closed:  # close() has begun: it waits for the warm-up
        threading.Event().wait(0.01)
    release.set()
    closing.join(10)
    assert view.closed.is_set() and worked == []  # the lease went back, nothing was made for a going node
