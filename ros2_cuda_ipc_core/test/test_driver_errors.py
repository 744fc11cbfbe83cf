"""Driver errors name the failing call and its CUresult; no GPU is needed to check the naming."""

import pickle

import pytest

from ros2_cuda_ipc_core import CudaDriverError, CudaUnavailableError, Ros2CudaIpcError
from ros2_cuda_ipc_core.memory.cuda_driver import check

driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-python is not installed")


def test_failed_call_names_the_call_and_its_result():
    with pytest.raises(CudaDriverError) as info:
        check((driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY, None), "cuMemCreate")
    error = info.value
    assert (error.call, error.result, error.result_name) == ("cuMemCreate", 2, "CUDA_ERROR_OUT_OF_MEMORY")
    assert str(error) == "CUDA driver call cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2)"
    assert isinstance(error, Ros2CudaIpcError) and not isinstance(error, CudaUnavailableError)


def test_driver_error_survives_pickling():
    error = CudaDriverError("cuIpcOpenEventHandle", 400, "CUDA_ERROR_INVALID_HANDLE")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.call, copy.result, copy.result_name, str(copy)) == (error.call, 400, error.result_name, str(error))


def test_success_unwraps_the_values():
    assert check((driver.CUresult.CUDA_SUCCESS,), "cuInit") is None
    assert check((driver.CUresult.CUDA_SUCCESS, 7), "cuDeviceGetCount") == 7
    assert check((driver.CUresult.CUDA_SUCCESS, 1, 2), "cuMemGetInfo") == (1, 2)
